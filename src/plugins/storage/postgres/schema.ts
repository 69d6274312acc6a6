import { sql } from "drizzle-orm";
import { bigint, boolean, check, index, integer, pgTable, pgView, primaryKey, text } from "drizzle-orm/pg-core";
import type { GenerationStatus } from "../repository.ts";
import { LEDGER_VIEW_QUERY } from "../ledger-view.ts";

/**
 * Postgres tables of the storage plugin, mirroring `sqlite/schema.ts` column for column: money is
 * bigint nano-USD, ids are text, timestamps are bigint epoch ms, JSON is text. Per-request token
 * counts and latencies are `integer`; every sum (totals, daily roll-ups) is `bigint`.
 *
 * The ledger (as in SQLite): `ledger_entries` (credits > 0, plan purchases < 0) and the generations with
 * a cost (each its own usage debit), read as one signed list through the `ledger` view, so a balance is
 * SUM(amount_nano). CHECK constraints tie the sign to the kind.
 */

const money = (name: string) => bigint(name, { mode: "number" });
const epochMs = (name: string) => bigint(name, { mode: "number" });
const count = (name: string) => bigint(name, { mode: "number" });

export const accounts = pgTable("accounts", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  createdAt: epochMs("created_at").notNull(),
  // Maintained in the same transaction as every ledger insert: the balance is never a scan.
  totalCreditsNano: money("total_credits_nano").notNull().default(0),
  totalDebitsNano: money("total_debits_nano").notNull().default(0),
  /** Credits of the paid kinds (card, usdt). */
  paidCreditsNano: money("paid_credits_nano").notNull().default(0),
});

export const apiKeys = pgTable(
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
    rpm: integer("rpm"),
    tpm: integer("tpm"),
    expiresAt: epochMs("expires_at"),
    createdAt: epochMs("created_at").notNull(),
    deletedAt: epochMs("deleted_at"),
    blocked: boolean("blocked").notNull().default(false),
    /** Maintained with every metered generation of the key. */
    usageNano: money("usage_nano").notNull().default(0),
  },
  (t) => [index("api_keys_account_idx").on(t.accountId)],
);

export const LEDGER_KINDS = ["card", "usdt", "bonus", "voucher", "promotional", "usage", "plan"] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

export const generations = pgTable(
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
    stream: boolean("stream").notNull(),
    status: text("status").$type<GenerationStatus>().notNull(),
    errorCode: text("error_code"),
    createdAt: epochMs("created_at").notNull(),
    latencyMs: integer("latency_ms").notNull(),
    timeToFirstTokenMs: integer("time_to_first_token_ms"),
    promptTokens: integer("prompt_tokens").notNull(),
    completionTokens: integer("completion_tokens").notNull(),
    cachedTokens: integer("cached_tokens").notNull(),
    cacheWriteTokens: integer("cache_write_tokens").notNull(),
    reasoningTokens: integer("reasoning_tokens").notNull(),
    inputCost: money("input_cost_nano").notNull(),
    cacheReadCost: money("cache_read_cost_nano").notNull(),
    cacheWriteCost: money("cache_write_cost_nano").notNull(),
    outputCost: money("output_cost_nano").notNull(),
    totalCost: money("total_cost_nano").notNull(),
    /** Priced but not charged: past the request's hold and what was still free (docs/billing.md). */
    unbilledCost: money("unbilled_cost_nano").notNull().default(0),
    /** The usage was counted by the gateway: the upstream reported none. */
    usageEstimated: boolean("usage_estimated").notNull().default(false),
  },
  (t) => [
    index("generations_account_created_idx").on(t.accountId, t.createdAt),
    // Only answers whose id is not the request id carry one (a relayed Responses answer): chat and
    // Messages rows stay out of this index, so the hot insert path pays for no random-keyed index.
    index("generations_account_response_idx").on(t.accountId, t.responseId).where(sql`${t.responseId} is not null`),
  ],
);

export const ledgerEntries = pgTable(
  "ledger_entries",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    kind: text("kind").$type<LedgerKind>().notNull(),
    /** Signed: credit > 0, debit (kinds usage, plan) < 0. */
    amountNano: money("amount_nano").notNull(),
    /** Idempotency key: the caller's reference for credits, the generation id for usage debits. */
    reference: text("reference").notNull().unique(),
    generationId: text("generation_id").references(() => generations.id),
    createdAt: epochMs("created_at").notNull(),
  },
  (t) => [
    index("ledger_account_created_idx").on(t.accountId, t.createdAt),
    check("ledger_kind_check", sql`${t.kind} in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan')`),
    check(
      "ledger_sign_check",
      sql`(${t.kind} = 'usage' and ${t.amountNano} < 0 and ${t.generationId} is not null) or (${t.kind} = 'plan' and ${t.amountNano} < 0) or (${t.kind} not in ('usage', 'plan') and ${t.amountNano} > 0)`,
    ),
  ],
);

export const usageDaily = pgTable(
  "usage_daily",
  {
    accountId: text("account_id").notNull(),
    keyId: text("key_id").notNull(),
    /** UTC day of the generation's createdAt, YYYY-MM-DD. */
    day: text("day").notNull(),
    model: text("model").notNull(),
    costNano: money("cost_nano").notNull(),
    requests: count("requests").notNull(),
    successfulRequests: count("successful_requests").notNull(),
    failedRequests: count("failed_requests").notNull(),
    promptTokens: count("prompt_tokens").notNull(),
    completionTokens: count("completion_tokens").notNull(),
    cachedTokens: count("cached_tokens").notNull(),
    cacheWriteTokens: count("cache_write_tokens").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.keyId, t.day, t.model] })],
);

export const settings = pgTable("settings", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
});

/**
 * Worst-case costs held for requests in flight (budget plugin). A reservation is deleted in the same
 * transaction that writes its request's generation and debit, so funds are never counted free twice.
 */
export const reservations = pgTable(
  "reservations",
  {
    /** The request id. */
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    keyId: text("key_id").notNull(),
    amountNano: money("amount_nano").notNull(),
    /** The gateway process holding it; reservations of a dead process are released. */
    instanceId: text("instance_id").notNull(),
    createdAt: epochMs("created_at").notNull(),
  },
  (t) => [
    index("reservations_account_idx").on(t.accountId),
    index("reservations_key_idx").on(t.keyId),
    index("reservations_instance_idx").on(t.instanceId),
  ],
);

/** Live gateway processes on this store, by heartbeat. */
export const gatewayInstances = pgTable("gateway_instances", {
  id: text("id").primaryKey(),
  heartbeatAt: epochMs("heartbeat_at").notNull(),
});

/** Account spend in 5-minute buckets (by request start), maintained by metering: plan spend windows sum these. */
export const spendBuckets = pgTable(
  "spend_buckets",
  {
    accountId: text("account_id").notNull(),
    /** Epoch ms, a multiple of 5 minutes. */
    bucketStart: epochMs("bucket_start").notNull(),
    costNano: money("cost_nano").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.bucketStart] })],
);

/** Plan cycles bought by accounts. */
export const accountPlans = pgTable(
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
    startedAt: epochMs("started_at").notNull(),
    endsAt: epochMs("ends_at").notNull(),
    renewing: boolean("renewing").notNull(),
  },
  (t) => [index("account_plans_account_idx").on(t.accountId, t.endsAt)],
);

/** Every money movement of every account, signed (ledger-view.ts). */
export const ledger = pgView("ledger", {
  id: text("id").notNull(),
  accountId: text("account_id").notNull(),
  kind: text("kind").$type<LedgerKind>().notNull(),
  amountNano: money("amount_nano").notNull(),
  reference: text("reference").notNull(),
  createdAt: epochMs("created_at").notNull(),
}).as(sql.raw(LEDGER_VIEW_QUERY));

export const postgresSchema = {
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
