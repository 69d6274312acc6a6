import { sql } from "drizzle-orm";
import { bigint, boolean, check, index, integer, pgTable, pgView, primaryKey, text, type AnyPgColumn } from "drizzle-orm/pg-core";
import type { GenerationStatus } from "../repository.ts";
import { LEDGER_VIEW_QUERY } from "../ledger-view.ts";
import { hasResponseId, ledgerChecks, storageColumns, type LedgerKind } from "../shared/tables.ts";

/**
 * Postgres tables of the storage plugin: the columns of shared/tables.ts on Postgres's builders. Money
 * and timestamps are bigint; per-request token counts and latencies are `integer`; every sum (totals,
 * daily roll-ups) is `bigint`.
 *
 * The ledger (as in SQLite): `ledger_entries` (credits > 0, plan purchases < 0) and the generations with
 * a cost (each its own usage debit), read as one signed list through the `ledger` view, so a balance is
 * SUM(amount_nano). CHECK constraints tie the sign to the kind.
 */
const big = (name: string) => bigint(name, { mode: "number" });
const columns = storageColumns({
  text: (name) => text(name),
  uniqueText: (name) => text(name).unique(),
  money: big,
  epochMs: big,
  int: (name) => integer(name),
  count: big,
  bool: (name) => boolean(name),
  status: (name) => text(name).$type<GenerationStatus>(),
  ledgerKind: (name) => text(name).$type<LedgerKind>(),
  accountRef: (name) => text(name).references((): AnyPgColumn => accounts.id),
  keyRef: (name) => text(name).references((): AnyPgColumn => apiKeys.id),
  generationRef: (name) => text(name).references((): AnyPgColumn => generations.id),
});

export const accounts = pgTable("accounts", columns.accounts);

export const apiKeys = pgTable("api_keys", columns.apiKeys, (t) => [index("api_keys_account_idx").on(t.accountId)]);

export const generations = pgTable("generations", columns.generations, (t) => [
  index("generations_account_created_idx").on(t.accountId, t.createdAt),
  index("generations_account_response_idx").on(t.accountId, t.responseId).where(hasResponseId(t)),
]);

export const ledgerEntries = pgTable("ledger_entries", columns.ledgerEntries, (t) => [
  index("ledger_account_created_idx").on(t.accountId, t.createdAt),
  ...ledgerChecks(t).map(([name, condition]) => check(name, condition)),
]);

export const usageDaily = pgTable("usage_daily", columns.usageDaily, (t) => [primaryKey({ columns: [t.accountId, t.keyId, t.day, t.model] })]);

export const settings = pgTable("settings", columns.settings);

export const reservations = pgTable("reservations", columns.reservations, (t) => [
  index("reservations_account_idx").on(t.accountId),
  index("reservations_key_idx").on(t.keyId),
  index("reservations_instance_idx").on(t.instanceId),
]);

export const gatewayInstances = pgTable("gateway_instances", columns.gatewayInstances);

export const spendBuckets = pgTable("spend_buckets", columns.spendBuckets, (t) => [primaryKey({ columns: [t.accountId, t.bucketStart] })]);

export const accountPlans = pgTable("account_plans", columns.accountPlans, (t) => [index("account_plans_account_idx").on(t.accountId, t.endsAt)]);

export const ledger = pgView("ledger", columns.ledger).as(sql.raw(LEDGER_VIEW_QUERY));
