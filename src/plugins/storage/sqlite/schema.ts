import { sql } from "drizzle-orm";
import { check, index, uniqueIndex, integer, primaryKey, sqliteTable, sqliteView, text, type AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import type { GenerationStatus } from "../repository.ts";
import { LEDGER_VIEW_QUERY } from "../ledger-view.ts";
import { hasPaymentRef, hasResponseId, hasSubscriptionRef, isPendingTopup, ledgerChecks, notSuccess, storageColumns, topupChecks, type LedgerKind } from "../shared/tables.ts";

/**
 * SQLite tables of the storage plugin: the columns of shared/tables.ts on SQLite's builders (every
 * number an integer, booleans as integers), with SQLite's indexes.
 *
 * The ledger is two append-only tables, read as one through the `ledger` view: `ledger_entries` holds
 * the credits (> 0) and plan purchases (< 0); each generation with a cost is itself its usage debit
 * (a second row per request would double the write cost of metering for the same fact). Amounts in the
 * view are SIGNED, so a balance is SUM(amount_nano). Usage rows in `ledger_entries` exist only in
 * databases written before that (migration 0005 removed the ones their generation already states).
 */
const number = (name: string) => integer(name, { mode: "number" });
const columns = storageColumns({
  text: (name) => text(name),
  uniqueText: (name) => text(name).unique(),
  money: number,
  epochMs: number,
  int: number,
  count: number,
  bool: (name) => integer(name, { mode: "boolean" }),
  status: (name) => text(name).$type<GenerationStatus>(),
  ledgerKind: (name) => text(name).$type<LedgerKind>(),
  accountRef: (name) => text(name).references((): AnySQLiteColumn => accounts.id),
  keyRef: (name) => text(name).references((): AnySQLiteColumn => apiKeys.id),
  generationRef: (name) => text(name).references((): AnySQLiteColumn => generations.id),
  userRef: (name) => text(name).references((): AnySQLiteColumn => users.id),
});

export const accounts = sqliteTable("accounts", columns.accounts);

export const apiKeys = sqliteTable("api_keys", columns.apiKeys, (t) => [index("api_keys_account_idx").on(t.accountId)]);

export const generations = sqliteTable("generations", columns.generations, (t) => [
  index("generations_account_created_idx").on(t.accountId, t.createdAt),
  index("generations_account_response_idx").on(t.accountId, t.responseId).where(hasResponseId(t)),
  // The request log's filters (listGenerations): by key, by model, by a status other than success. The
  // status index is partial: most requests succeed, a success filter reads the (account_id, created_at)
  // index, and this one holds only the failed and cancelled requests.
  index("generations_account_key_created_idx").on(t.accountId, t.keyId, t.createdAt),
  index("generations_account_model_created_idx").on(t.accountId, t.model, t.createdAt),
  index("generations_account_status_created_idx").on(t.accountId, t.status, t.createdAt).where(notSuccess(t)),
]);

export const ledgerEntries = sqliteTable("ledger_entries", columns.ledgerEntries, (t) => [
  index("ledger_account_created_idx").on(t.accountId, t.createdAt),
  ...ledgerChecks(t).map(([name, condition]) => check(name, condition)),
]);

export const usageDaily = sqliteTable("usage_daily", columns.usageDaily, (t) => [
  primaryKey({ columns: [t.accountId, t.keyId, t.day, t.model] }),
  // The account's usage report: its days in order, each day's models in order, every counter in the
  // index, so a 92-day report is one range scan with no table lookup and no sort (docs/performance.md).
  // Written once per (key, day, model) per group commit, not per request.
  index("usage_daily_account_day_idx").on(
    t.accountId,
    t.day,
    t.model,
    t.keyId,
    t.costNano,
    t.requests,
    t.successfulRequests,
    t.failedRequests,
    t.promptTokens,
    t.completionTokens,
    t.cachedTokens,
    t.cacheWriteTokens,
  ),
]);

export const settings = sqliteTable("settings", columns.settings);

export const reservations = sqliteTable("reservations", columns.reservations, (t) => [
  index("reservations_account_idx").on(t.accountId),
  index("reservations_key_idx").on(t.keyId),
  index("reservations_instance_idx").on(t.instanceId),
]);

export const gatewayInstances = sqliteTable("gateway_instances", columns.gatewayInstances);

export const spendBuckets = sqliteTable("spend_buckets", columns.spendBuckets, (t) => [primaryKey({ columns: [t.accountId, t.bucketStart] })]);

export const accountPlans = sqliteTable("account_plans", columns.accountPlans, (t) => [
  index("account_plans_account_idx").on(t.accountId, t.endsAt),
  // A subscription's cycles (renewal, stop): only card-funded cycles name one.
  index("account_plans_subscription_idx").on(t.subscriptionRef).where(hasSubscriptionRef(t)),
]);

export const topups = sqliteTable("topups", columns.topups, (t) => [
  index("topups_account_created_idx").on(t.accountId, t.createdAt),
  // One top-up per processor payment: a refund or dispute names the payment and finds its top-up.
  uniqueIndex("topups_payment_ref_idx").on(t.paymentRef).where(hasPaymentRef(t)),
  // The open invoices of a receiving address (their exact amounts stay unique) and the chain poller's matching.
  index("topups_network_pay_to_status_idx").on(t.network, t.payTo, t.status),
  // The sweep of pending top-ups past their expiry.
  index("topups_pending_expires_idx").on(t.expiresAt).where(isPendingTopup(t)),
  ...topupChecks(t).map(([name, condition]) => check(name, condition)),
]);

export const paymentEvents = sqliteTable("payment_events", columns.paymentEvents, (t) => [index("payment_events_received_idx").on(t.receivedAt)]);

export const unmatchedTransfers = sqliteTable("unmatched_transfers", columns.unmatchedTransfers, (t) => [index("unmatched_transfers_recorded_idx").on(t.recordedAt, t.id)]);

export const users = sqliteTable("users", columns.users, (t) => [index("users_account_idx").on(t.accountId)]);

export const dashboardSessions = sqliteTable("dashboard_sessions", columns.dashboardSessions, (t) => [index("dashboard_sessions_expires_idx").on(t.expiresAt)]);

export const ledger = sqliteView("ledger", columns.ledger).as(sql.raw(LEDGER_VIEW_QUERY));
