import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, sqliteView, text } from "drizzle-orm/sqlite-core";
import type { GenerationStatus } from "../repository.ts";
import { LEDGER_VIEW_QUERY } from "../ledger-view.ts";

/**
 * SQLite tables of the storage plugin. Kept dialect-portable on purpose (the Postgres sibling mirrors
 * them): money is integer nano-USD, ids are text, timestamps are epoch-ms integers, JSON is text.
 *
 * The ledger is two append-only tables, read as one through the `ledger` view: `ledger_entries` holds
 * the credits (> 0) and plan purchases (< 0); each generation with a cost is itself its usage debit
 * (a second row per request would double the write cost of metering for the same fact). Amounts in the
 * view are SIGNED, so a balance is SUM(amount_nano). Usage rows in `ledger_entries` exist only in
 * databases written before that (migration 0005 removed the ones their generation already states).
 */

const money = (name: string) => integer(name, { mode: "number" });

export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  createdAt: integer("created_at", { mode: "number" }).notNull(),
  // Maintained in the same transaction as every ledger insert: the balance is never a scan.
  totalCreditsNano: money("total_credits_nano").notNull().default(0),
  totalDebitsNano: money("total_debits_nano").notNull().default(0),
  /** Credits of the paid kinds (card, usdt). */
  paidCreditsNano: money("paid_credits_nano").notNull().default(0),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    name: text("name").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    label: text("label").notNull(),
    limitNano: money("limit_nano"),
    /** JSON array of model ids; NULL = every model. */
    models: text("models"),
    rpm: integer("rpm", { mode: "number" }),
    tpm: integer("tpm", { mode: "number" }),
    expiresAt: integer("expires_at", { mode: "number" }),
    createdAt: integer("created_at", { mode: "number" }).notNull(),
    deletedAt: integer("deleted_at", { mode: "number" }),
    blocked: integer("blocked", { mode: "boolean" }).notNull().default(false),
    /** Maintained with every metered generation of the key. */
    usageNano: money("usage_nano").notNull().default(0),
  },
  (t) => [index("api_keys_account_idx").on(t.accountId)],
);

export const LEDGER_KINDS = ["card", "usdt", "bonus", "voucher", "promotional", "usage", "plan"] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

export const generations = sqliteTable(
  "generations",
  {
    id: text("id").primaryKey(),
    responseId: text("response_id"),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    keyId: text("key_id")
      .notNull()
      .references(() => apiKeys.id),
    model: text("model").notNull(),
    provider: text("provider").notNull(),
    ingress: text("ingress").notNull(),
    stream: integer("stream", { mode: "boolean" }).notNull(),
    status: text("status").$type<GenerationStatus>().notNull(),
    errorCode: text("error_code"),
    createdAt: integer("created_at", { mode: "number" }).notNull(),
    latencyMs: integer("latency_ms", { mode: "number" }).notNull(),
    timeToFirstTokenMs: integer("time_to_first_token_ms", { mode: "number" }),
    promptTokens: integer("prompt_tokens", { mode: "number" }).notNull(),
    completionTokens: integer("completion_tokens", { mode: "number" }).notNull(),
    cachedTokens: integer("cached_tokens", { mode: "number" }).notNull(),
    cacheWriteTokens: integer("cache_write_tokens", { mode: "number" }).notNull(),
    reasoningTokens: integer("reasoning_tokens", { mode: "number" }).notNull(),
    inputCost: money("input_cost_nano").notNull(),
    cacheReadCost: money("cache_read_cost_nano").notNull(),
    cacheWriteCost: money("cache_write_cost_nano").notNull(),
    outputCost: money("output_cost_nano").notNull(),
    totalCost: money("total_cost_nano").notNull(),
    /** Priced but not charged: past the request's hold and what was still free (docs/billing.md). */
    unbilledCost: money("unbilled_cost_nano").notNull().default(0),
    /** The usage was counted by the gateway: the upstream reported none. */
    usageEstimated: integer("usage_estimated", { mode: "boolean" }).notNull().default(false),
  },
  (t) => [
    index("generations_account_created_idx").on(t.accountId, t.createdAt),
    // Only answers whose id is not the request id carry one (a relayed Responses answer): chat and
    // Messages rows stay out of this index, so the hot insert path pays for no random-keyed index.
    index("generations_account_response_idx").on(t.accountId, t.responseId).where(sql`${t.responseId} is not null`),
  ],
);

export const ledgerEntries = sqliteTable(
  "ledger_entries",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    kind: text("kind").$type<LedgerKind>().notNull(),
    /** Signed: credit > 0, debit (kind usage) < 0. */
    amountNano: money("amount_nano").notNull(),
    /**
     * Idempotency key: the caller's reference for credits, the generation id for usage debits, so
     * a request can never be debited twice (no second unique index on generation_id: it would be the
     * same random-keyed index again, and the write path pays per random index).
     */
    reference: text("reference").notNull().unique(),
    generationId: text("generation_id").references(() => generations.id),
    createdAt: integer("created_at", { mode: "number" }).notNull(),
  },
  (t) => [
    index("ledger_account_created_idx").on(t.accountId, t.createdAt),
    check("ledger_kind_check", sql`${t.kind} in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan')`),
    check(
      "ledger_sign_check",
      // A usage debit is negative and names its generation (the writer sets reference = generation id);
      // a plan bought from the balance is a negative entry too; credits are positive.
      sql`(${t.kind} = 'usage' and ${t.amountNano} < 0 and ${t.generationId} is not null) or (${t.kind} = 'plan' and ${t.amountNano} < 0) or (${t.kind} not in ('usage', 'plan') and ${t.amountNano} > 0)`,
    ),
  ],
);

export const usageDaily = sqliteTable(
  "usage_daily",
  {
    accountId: text("account_id").notNull(),
    keyId: text("key_id").notNull(),
    /** UTC day of the generation's createdAt, YYYY-MM-DD. */
    day: text("day").notNull(),
    model: text("model").notNull(),
    costNano: money("cost_nano").notNull(),
    requests: integer("requests", { mode: "number" }).notNull(),
    successfulRequests: integer("successful_requests", { mode: "number" }).notNull(),
    failedRequests: integer("failed_requests", { mode: "number" }).notNull(),
    promptTokens: integer("prompt_tokens", { mode: "number" }).notNull(),
    completionTokens: integer("completion_tokens", { mode: "number" }).notNull(),
    cachedTokens: integer("cached_tokens", { mode: "number" }).notNull(),
    cacheWriteTokens: integer("cache_write_tokens", { mode: "number" }).notNull(),
  },
  (t) => [
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
  ],
);

export const settings = sqliteTable("settings", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
});


/**
 * Worst-case costs held for requests in flight (budget plugin). A reservation is deleted in the same
 * transaction that writes its request's generation and debit, so funds are never counted free twice.
 */
export const reservations = sqliteTable(
  "reservations",
  {
    /** The request id. */
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    keyId: text("key_id").notNull(),
    amountNano: money("amount_nano").notNull(),
    /** The gateway process holding it; reservations of a dead process are released. */
    instanceId: text("instance_id").notNull(),
    createdAt: integer("created_at", { mode: "number" }).notNull(),
  },
  (t) => [index("reservations_account_idx").on(t.accountId), index("reservations_key_idx").on(t.keyId), index("reservations_instance_idx").on(t.instanceId)],
);

/** Live gateway processes on this store, by heartbeat. */
export const gatewayInstances = sqliteTable("gateway_instances", {
  id: text("id").primaryKey(),
  heartbeatAt: integer("heartbeat_at", { mode: "number" }).notNull(),
});

/** Account spend in 5-minute buckets (by request start), maintained by metering: plan spend windows sum these. */
export const spendBuckets = sqliteTable(
  "spend_buckets",
  {
    accountId: text("account_id").notNull(),
    /** Epoch ms, a multiple of 5 minutes. */
    bucketStart: integer("bucket_start", { mode: "number" }).notNull(),
    costNano: money("cost_nano").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.bucketStart] })],
);

/** Plan cycles bought by accounts. */
export const accountPlans = sqliteTable(
  "account_plans",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    plan: text("plan").notNull(),
    /** balance (one non-renewing cycle per account) or card (recurring). */
    funding: text("funding").notNull(),
    priceNano: money("price_nano").notNull(),
    startedAt: integer("started_at", { mode: "number" }).notNull(),
    endsAt: integer("ends_at", { mode: "number" }).notNull(),
    renewing: integer("renewing", { mode: "boolean" }).notNull(),
  },
  (t) => [index("account_plans_account_idx").on(t.accountId, t.endsAt)],
);

/** Every money movement of every account, signed (ledger-view.ts). */
export const ledger = sqliteView("ledger", {
  id: text("id").notNull(),
  accountId: text("account_id").notNull(),
  kind: text("kind").$type<LedgerKind>().notNull(),
  amountNano: money("amount_nano").notNull(),
  reference: text("reference").notNull(),
  createdAt: integer("created_at", { mode: "number" }).notNull(),
}).as(sql.raw(LEDGER_VIEW_QUERY));

export const sqliteSchema = {
  accounts,
  apiKeys,
  ledgerEntries,
  ledger,
  generations,
  usageDaily,
  settings,
  reservations,
  gatewayInstances,
  spendBuckets,
  accountPlans,
};
