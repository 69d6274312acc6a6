import { sql, type Column, type ColumnBuilder, type HasDefault, type SQL } from "drizzle-orm";

/**
 * The storage tables once, for both dialects: column names, kinds, nullability and defaults. Each
 * dialect hands over its builder per kind (`ColumnKit`: SQLite integers, Postgres bigint, ...), and
 * builds its tables, indexes and checks around these columns (sqlite/schema.ts, postgres/schema.ts).
 * The builders' own types flow through, so the rows are typed as precisely as hand-written tables.
 *
 * Money is integer nano-USD, ids are text, timestamps are epoch-ms integers, JSON is text.
 */

export const LEDGER_KINDS = ["card", "usdt", "bonus", "voucher", "promotional", "usage", "plan", "refund", "dispute"] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

type Col = ColumnBuilder;

/** A dialect's builder for each kind of column (nullable unless the kind says otherwise). */
export interface ColumnKit<Text extends Col, UniqueText extends Col, Money extends Col, Ms extends Col, Int extends Col, Count extends Col, Bool extends Col, Status extends Col, Kind extends Col, AccountRef extends Col, KeyRef extends Col, GenerationRef extends Col, UserRef extends Col> {
  text(name: string): Text;
  /** Text with a UNIQUE constraint. */
  uniqueText(name: string): UniqueText;
  /** nano-USD. */
  money(name: string): Money;
  /** Epoch milliseconds. */
  epochMs(name: string): Ms;
  /** A per-request count (tokens, milliseconds). */
  int(name: string): Int;
  /** A sum of counts (daily roll-ups). */
  count(name: string): Count;
  bool(name: string): Bool;
  /** Text typed as a `GenerationStatus`, and as a `LedgerKind`. */
  status(name: string): Status;
  ledgerKind(name: string): Kind;
  /** Foreign keys: accounts.id, api_keys.id, generations.id, users.id. */
  accountRef(name: string): AccountRef;
  keyRef(name: string): KeyRef;
  generationRef(name: string): GenerationRef;
  userRef(name: string): UserRef;
}

/** A default the generic column cannot check (its data type is the dialect's): 0 or false, as the kind says. */
function orElse<T extends Col>(column: T, value: number | boolean): HasDefault<T> {
  return (column as unknown as { default(value: unknown): HasDefault<T> }).default(value);
}

/**
 * Every table's columns, built by one dialect's kit. Long on purpose: it is a declaration (one entry
 * per table, one line per column), and one function is what lets a single inference carry the kit's
 * builder types to every column.
 */
export function storageColumns<Text extends Col, UniqueText extends Col, Money extends Col, Ms extends Col, Int extends Col, Count extends Col, Bool extends Col, Status extends Col, Kind extends Col, AccountRef extends Col, KeyRef extends Col, GenerationRef extends Col, UserRef extends Col>(
  k: ColumnKit<Text, UniqueText, Money, Ms, Int, Count, Bool, Status, Kind, AccountRef, KeyRef, GenerationRef, UserRef>,
) {
  const tokens = (count: (name: string) => Int | Count) => ({
    promptTokens: count("prompt_tokens").notNull(),
    completionTokens: count("completion_tokens").notNull(),
    cachedTokens: count("cached_tokens").notNull(),
    cacheWriteTokens: count("cache_write_tokens").notNull(),
  });
  return {
    accounts: {
      id: k.text("id").primaryKey(),
      name: k.text("name").notNull(),
      createdAt: k.epochMs("created_at").notNull(),
      // Maintained in the same transaction as every ledger insert: the balance is never a scan.
      totalCreditsNano: orElse(k.money("total_credits_nano").notNull(), 0),
      totalDebitsNano: orElse(k.money("total_debits_nano").notNull(), 0),
      /** Credits of the paid kinds (card, usdt). */
      paidCreditsNano: orElse(k.money("paid_credits_nano").notNull(), 0),
      /** Why the account's keys are refused (a payment dispute) until an operator clears it; NULL: not blocked. */
      blockedReason: k.text("blocked_reason"),
    },
    apiKeys: {
      id: k.text("id").primaryKey(),
      accountId: k.accountRef("account_id").notNull(),
      name: k.text("name").notNull(),
      keyHash: k.uniqueText("key_hash").notNull(),
      label: k.text("label").notNull(),
      limitNano: k.money("limit_nano"),
      /** JSON array of model ids; NULL = every model. */
      models: k.text("models"),
      rpm: k.int("rpm"),
      tpm: k.int("tpm"),
      expiresAt: k.epochMs("expires_at"),
      createdAt: k.epochMs("created_at").notNull(),
      deletedAt: k.epochMs("deleted_at"),
      blocked: orElse(k.bool("blocked").notNull(), false),
      /** Maintained with every metered generation of the key. */
      usageNano: orElse(k.money("usage_nano").notNull(), 0),
    },
    generations: {
      id: k.text("id").primaryKey(),
      responseId: k.text("response_id"),
      accountId: k.accountRef("account_id").notNull(),
      keyId: k.keyRef("key_id").notNull(),
      model: k.text("model").notNull(),
      /** The model the client asked for when the request fell back to another (catalog fallbacks); NULL: the same as model. */
      requestedModel: k.text("requested_model"),
      provider: k.text("provider").notNull(),
      ingress: k.text("ingress").notNull(),
      stream: k.bool("stream").notNull(),
      status: k.status("status").notNull(),
      errorCode: k.text("error_code"),
      createdAt: k.epochMs("created_at").notNull(),
      latencyMs: k.int("latency_ms").notNull(),
      timeToFirstTokenMs: k.int("time_to_first_token_ms"),
      ...tokens(k.int),
      /** The part of cache_write_tokens written with a 1-hour lifetime (billed at its own price); the rest is 5-minute. */
      cacheWrite1hTokens: orElse(k.int("cache_write_1h_tokens").notNull(), 0),
      reasoningTokens: k.int("reasoning_tokens").notNull(),
      inputCost: k.money("input_cost_nano").notNull(),
      cacheReadCost: k.money("cache_read_cost_nano").notNull(),
      cacheWriteCost: k.money("cache_write_cost_nano").notNull(),
      outputCost: k.money("output_cost_nano").notNull(),
      totalCost: k.money("total_cost_nano").notNull(),
      /** Priced but not charged: past the request's hold and what was still free (docs/billing.md). */
      unbilledCost: orElse(k.money("unbilled_cost_nano").notNull(), 0),
      /**
       * Signed, not a charge: what caching saved against billing every cached and written token at the input
       * price (negative when the writes cost more than the reads saved; docs/billing.md).
       */
      cacheDiscount: orElse(k.money("cache_discount_nano").notNull(), 0),
      /** The usage was counted by the gateway: the upstream reported none. */
      usageEstimated: orElse(k.bool("usage_estimated").notNull(), false),
      /** JSON array of the request's upstream attempts (AttemptRecord: deployment, status, error_class, latency_ms); NULL: none. */
      attempts: k.text("attempts"),
    },
    ledgerEntries: {
      id: k.text("id").primaryKey(),
      accountId: k.accountRef("account_id").notNull(),
      kind: k.ledgerKind("kind").notNull(),
      /** Signed: credit > 0, debit (kinds usage, plan) and money taken back (refund, dispute) < 0. */
      amountNano: k.money("amount_nano").notNull(),
      /**
       * Idempotency key: the caller's reference for credits, the generation id for usage debits, so
       * a request can never be debited twice (no second unique index on generation_id: it would be the
       * same random-keyed index again, and the write path pays per random index).
       */
      reference: k.uniqueText("reference").notNull(),
      generationId: k.generationRef("generation_id"),
      createdAt: k.epochMs("created_at").notNull(),
    },
    usageDaily: {
      accountId: k.text("account_id").notNull(),
      keyId: k.text("key_id").notNull(),
      /** UTC day of the generation's createdAt, YYYY-MM-DD. */
      day: k.text("day").notNull(),
      model: k.text("model").notNull(),
      costNano: k.money("cost_nano").notNull(),
      requests: k.count("requests").notNull(),
      successfulRequests: k.count("successful_requests").notNull(),
      failedRequests: k.count("failed_requests").notNull(),
      ...tokens(k.count),
    },
    settings: {
      name: k.text("name").primaryKey(),
      value: k.text("value").notNull(),
    },
    /**
     * Worst-case costs held for requests in flight (budget plugin). A reservation is deleted in the same
     * transaction that writes its request's generation and debit, so funds are never counted free twice.
     */
    reservations: {
      /** The request id. */
      id: k.text("id").primaryKey(),
      accountId: k.text("account_id").notNull(),
      keyId: k.text("key_id").notNull(),
      amountNano: k.money("amount_nano").notNull(),
      /** The gateway process holding it; reservations of a dead process are released. */
      instanceId: k.text("instance_id").notNull(),
      createdAt: k.epochMs("created_at").notNull(),
    },
    /** Live gateway processes on this store, by heartbeat. */
    gatewayInstances: {
      id: k.text("id").primaryKey(),
      heartbeatAt: k.epochMs("heartbeat_at").notNull(),
    },
    /** Account spend in 5-minute buckets (by request start), maintained by metering: plan spend windows sum these. */
    spendBuckets: {
      accountId: k.text("account_id").notNull(),
      /** Epoch ms, a multiple of 5 minutes. */
      bucketStart: k.epochMs("bucket_start").notNull(),
      costNano: k.money("cost_nano").notNull(),
    },
    /** Plan cycles bought by accounts. */
    accountPlans: {
      id: k.text("id").primaryKey(),
      accountId: k.accountRef("account_id").notNull(),
      plan: k.text("plan").notNull(),
      /** balance (one non-renewing cycle per account) or card (recurring). */
      funding: k.text("funding").notNull(),
      priceNano: k.money("price_nano").notNull(),
      startedAt: k.epochMs("started_at").notNull(),
      endsAt: k.epochMs("ends_at").notNull(),
      renewing: k.bool("renewing").notNull(),
      /** The processor's subscription that pays card-funded cycles (a Stripe subscription id); NULL: none. */
      subscriptionRef: k.text("subscription_ref"),
    },
    /** Top-ups of accounts (card, USDT): one record each, through its states (repository.ts, TOPUP_STATUSES). */
    topups: {
      /** `tu_…` */
      id: k.text("id").primaryKey(),
      accountId: k.accountRef("account_id").notNull(),
      /** card or usdt: the ledger kind of its credit. */
      method: k.text("method").notNull(),
      /** What is credited: ours, never the processor's figure. */
      amountNano: k.money("amount_nano").notNull(),
      status: k.text("status").notNull(),
      /** The processor's object (a Checkout Session id). */
      processorRef: k.text("processor_ref"),
      checkoutUrl: k.text("checkout_url"),
      /** The processor's payment (PaymentIntent id, "tron:" + transaction id): the credit's ledger reference. Unique when set. */
      paymentRef: k.text("payment_ref"),
      network: k.text("network"),
      payTo: k.text("pay_to"),
      /** The exact amount to send, in the token's smallest unit (micro-USDT): past 2^31, so a bigint. */
      payAmountMicro: k.money("pay_amount_micro"),
      flag: k.text("flag"),
      /** Taken back by refunds and disputes so far (0 ≤ taken_back ≤ amount). */
      takenBackNano: orElse(k.money("taken_back_nano").notNull(), 0),
      expiresAt: k.epochMs("expires_at"),
      createdAt: k.epochMs("created_at").notNull(),
      updatedAt: k.epochMs("updated_at").notNull(),
    },
    /** Processors' events, each applied once (its id is the primary key), with what its effect moved. */
    paymentEvents: {
      /** "stripe:evt_…", "tron:<transaction id>". */
      id: k.text("id").primaryKey(),
      processor: k.text("processor").notNull(),
      type: k.text("type").notNull(),
      /** The top-up its effect named; NULL: none (a subscription's events). */
      topupId: k.text("topup_id"),
      /** What the effect credited (+) or took back (−); 0: nothing moved. */
      amountNano: orElse(k.money("amount_nano").notNull(), 0),
      receivedAt: k.epochMs("received_at").notNull(),
    },
    /** Transfers to a receiving address that matched no top-up: shown to the operator, never credited automatically. */
    unmatchedTransfers: {
      /** "tron:<transaction id>". */
      id: k.text("id").primaryKey(),
      network: k.text("network").notNull(),
      token: k.text("token").notNull(),
      fromAddress: k.text("from_address").notNull(),
      toAddress: k.text("to_address").notNull(),
      /** In the token's smallest unit (micro-USDT). */
      amountMicro: k.money("amount_micro").notNull(),
      /** The block's time. */
      at: k.epochMs("at").notNull(),
      reason: k.text("reason").notNull(),
      recordedAt: k.epochMs("recorded_at").notNull(),
    },
    /** People who sign in to the dashboard, each of one account. */
    users: {
      /** `usr_…` */
      id: k.text("id").primaryKey(),
      accountId: k.accountRef("account_id").notNull(),
      /** Lower-cased by the caller; unique over the whole gateway. */
      email: k.uniqueText("email").notNull(),
      /** owner or member. */
      role: k.text("role").notNull(),
      /** argon2id PHC string. */
      passwordHash: k.text("password_hash").notNull(),
      createdAt: k.epochMs("created_at").notNull(),
    },
    /** Dashboard sign-ins, server-side: the SHA-256 of the cookie's id, never the id. */
    dashboardSessions: {
      idHash: k.text("id_hash").primaryKey(),
      /** NULL: the operator, signed in with the admin token. */
      userId: k.userRef("user_id"),
      createdAt: k.epochMs("created_at").notNull(),
      expiresAt: k.epochMs("expires_at").notNull(),
    },
    /** The `ledger` view (ledger-view.ts): every money movement of every account, signed. */
    ledger: {
      id: k.text("id").notNull(),
      accountId: k.text("account_id").notNull(),
      kind: k.ledgerKind("kind").notNull(),
      amountNano: k.money("amount_nano").notNull(),
      reference: k.text("reference").notNull(),
      createdAt: k.epochMs("created_at").notNull(),
    },
  };
}

/** The CHECK constraints of `ledger_entries`, by name: the kind is known, and its sign goes with it. */
export function ledgerChecks(t: { kind: Column; amountNano: Column; generationId: Column }): [name: string, condition: SQL][] {
  return [
    ["ledger_kind_check", sql`${t.kind} in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan', 'refund', 'dispute')`],
    // A usage debit is negative and names its generation (the writer sets reference = generation id);
    // a plan bought from the balance and money taken back (a refund, a dispute) are negative entries
    // too; credits are positive.
    [
      "ledger_sign_check",
      sql`(${t.kind} = 'usage' and ${t.amountNano} < 0 and ${t.generationId} is not null) or (${t.kind} in ('plan', 'refund', 'dispute') and ${t.amountNano} < 0) or (${t.kind} not in ('usage', 'plan', 'refund', 'dispute') and ${t.amountNano} > 0)`,
    ],
  ];
}

/** A top-up never gives back more than it credited. */
export function topupChecks(t: { amountNano: Column; takenBackNano: Column }): [name: string, condition: SQL][] {
  return [["topup_taken_back_check", sql`${t.takenBackNano} >= 0 and ${t.takenBackNano} <= ${t.amountNano}`]];
}

/** Only top-ups with a payment are in the unique payment_ref index; only pending ones in the expiry sweep's. */
export const hasPaymentRef = (t: { paymentRef: Column }): SQL => sql`${t.paymentRef} is not null`;
export const isPendingTopup = (t: { status: Column }): SQL => sql`${t.status} = 'pending'`;
export const hasSubscriptionRef = (t: { subscriptionRef: Column }): SQL => sql`${t.subscriptionRef} is not null`;

/**
 * Only answers whose id is not the request id carry a response id (a relayed Responses answer): chat
 * and Messages rows stay out of this partial index, so the hot insert path pays for no random-keyed index.
 */
export const hasResponseId = (t: { responseId: Column }): SQL => sql`${t.responseId} is not null`;

/**
 * The generations that did not succeed: the few rows of the partial (account_id, status, created_at)
 * index. A status filter other than success adds this very term to its query, so that SQLite (which
 * matches a partial index's condition by its terms, not by implication) uses the index too.
 */
export const notSuccess = (t: { status: Column }): SQL => sql`${t.status} <> 'success'`;
