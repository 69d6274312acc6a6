import { sql } from "drizzle-orm";
import { bigint, boolean, check, index, uniqueIndex, integer, pgTable, pgView, primaryKey, text, type AnyPgColumn } from "drizzle-orm/pg-core";
import type { GenerationStatus } from "../repository.ts";
import { LEDGER_VIEW_QUERY } from "../ledger-view.ts";
import { hasPaymentRef, hasResponseId, hasSubscriptionRef, isPendingTopup, ledgerChecks, notSuccess, storageColumns, topupChecks, type LedgerKind } from "../shared/tables.ts";

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
  userRef: (name) => text(name).references((): AnyPgColumn => users.id),
});

export const accounts = pgTable("accounts", columns.accounts);

export const apiKeys = pgTable("api_keys", columns.apiKeys, (t) => [index("api_keys_account_idx").on(t.accountId)]);

export const generations = pgTable("generations", columns.generations, (t) => [
  index("generations_account_created_idx").on(t.accountId, t.createdAt),
  index("generations_account_response_idx").on(t.accountId, t.responseId).where(hasResponseId(t)),
  // The request log's filters (listGenerations): by key, by model, by a status other than success. The
  // status index is partial: most requests succeed, a success filter reads the (account_id, created_at)
  // index, and this one holds only the failed and cancelled requests.
  index("generations_account_key_created_idx").on(t.accountId, t.keyId, t.createdAt),
  index("generations_account_model_created_idx").on(t.accountId, t.model, t.createdAt),
  index("generations_account_status_created_idx").on(t.accountId, t.status, t.createdAt).where(notSuccess(t)),
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

export const accountPlans = pgTable("account_plans", columns.accountPlans, (t) => [
  index("account_plans_account_idx").on(t.accountId, t.endsAt),
  // A subscription's cycles (renewal, stop): only card-funded cycles name one.
  index("account_plans_subscription_idx").on(t.subscriptionRef).where(hasSubscriptionRef(t)),
]);

export const topups = pgTable("topups", columns.topups, (t) => [
  index("topups_account_created_idx").on(t.accountId, t.createdAt),
  // One top-up per processor payment: a refund or dispute names the payment and finds its top-up.
  uniqueIndex("topups_payment_ref_idx").on(t.paymentRef).where(hasPaymentRef(t)),
  // The open invoices of a receiving address (their exact amounts stay unique) and the chain poller's matching.
  index("topups_network_pay_to_status_idx").on(t.network, t.payTo, t.status),
  // The sweep of pending top-ups past their expiry.
  index("topups_pending_expires_idx").on(t.expiresAt).where(isPendingTopup(t)),
  ...topupChecks(t).map(([name, condition]) => check(name, condition)),
]);

export const paymentEvents = pgTable("payment_events", columns.paymentEvents, (t) => [index("payment_events_received_idx").on(t.receivedAt)]);

export const unmatchedTransfers = pgTable("unmatched_transfers", columns.unmatchedTransfers, (t) => [index("unmatched_transfers_recorded_idx").on(t.recordedAt, t.id)]);

export const users = pgTable("users", columns.users, (t) => [index("users_account_idx").on(t.accountId)]);

export const dashboardSessions = pgTable("dashboard_sessions", columns.dashboardSessions, (t) => [index("dashboard_sessions_expires_idx").on(t.expiresAt)]);

export const ledger = pgView("ledger", columns.ledger).as(sql.raw(LEDGER_VIEW_QUERY));
