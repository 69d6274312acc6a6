import type { NanoUsd } from "../../core/money.ts";
import type { AttemptRecord } from "../../core/deployments.ts";

/**
 * The storage contract, by domain (accounts, ledger, keys, metering, reservations, plans, instances,
 * settings). SQLite (embedded default) and Postgres (multi-instance) implement all of it; everything else
 * reaches the store only through it, and may name only the slice it uses. All money is integer nano-USD.
 * Refusals are storage errors (errors.ts), mapped to HTTP errors by the routes (http-errors.ts).
 */

export const CREDIT_KINDS = ["card", "usdt", "bonus", "voucher", "promotional"] as const;
export type CreditKind = (typeof CREDIT_KINDS)[number];

export type GenerationStatus = "success" | "failed" | "cancelled";

export interface Account {
  id: string;
  name: string;
  createdAt: number; // epoch ms
  /** Why the account's keys are refused (a payment dispute), until an operator clears it; null: not blocked. */
  blockedReason: string | null;
}

export interface ApiKey {
  id: string;
  accountId: string;
  name: string;
  /** SHA-256 hex of the full key; the full key is never stored. */
  keyHash: string;
  /** Masked form, e.g. "sk-gw-Ab3d…x9Yz". */
  label: string;
  limit: NanoUsd | null;
  /** Allowed model ids; null = every model. */
  models: string[] | null;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  expiresAt: number | null;
  createdAt: number;
  deletedAt: number | null;
  blocked: boolean;
  /** The account's block (Account.blockedReason), read with the key by findKeyByHash and getKey: the key is refused while it is set. */
  accountBlockedReason: string | null;
}

export type NewApiKey = Omit<ApiKey, "createdAt" | "deletedAt" | "blocked" | "accountBlockedReason">;

export interface CreditInput {
  accountId: string;
  amount: NanoUsd;
  kind: CreditKind;
  /** Idempotency reference: the same reference credits once. */
  reference: string;
}

export interface CreditResult {
  entryId: string;
  balance: NanoUsd;
  /** True when the reference had already been credited (nothing new was added). */
  duplicate: boolean;
}

export interface AccountTotals {
  /** Everything ever credited, bonus included. */
  credits: NanoUsd;
  /** Everything ever debited. */
  debits: NanoUsd;
  balance: NanoUsd;
  /** Sum by credit kind, for promotional-only detection. */
  paidCredits: NanoUsd;
}

/** One request, as metered: every field of the spec's generation record. */
export interface Generation {
  /** The gateway request id (x-gateway-request-id). */
  id: string;
  /** The chat-completion id the client saw, when there is one. */
  responseId: string | null;
  accountId: string;
  keyId: string;
  /** The model that answered (and was billed): a catalog fallback when the asked one could not. */
  model: string;
  /**
   * The model the client asked for, when it differs from `model` (the request fell back to another catalog
   * model). null or absent: the same as `model` (the store writes NULL then; writers that predate the column).
   */
  requestedModel?: string | null;
  provider: string;
  ingress: string;
  stream: boolean;
  status: GenerationStatus;
  errorCode: string | null;
  createdAt: number; // epoch ms, request start
  latencyMs: number;
  timeToFirstTokenMs: number | null;
  promptTokens: number; // all input, cache included
  completionTokens: number; // reasoning included
  cachedTokens: number;
  /** Every cache write, both lifetimes. */
  cacheWriteTokens: number;
  /** The part of cacheWriteTokens written with a 1-hour lifetime. Absent is 0 (writers that predate the column). */
  cacheWrite1hTokens?: number;
  reasoningTokens: number;
  /** Uncached input part of the cost; the spec's `input` is inputCost + cacheReadCost + cacheWriteCost. */
  inputCost: NanoUsd;
  cacheReadCost: NanoUsd;
  cacheWriteCost: NanoUsd;
  outputCost: NanoUsd;
  /** What was charged: the priced usage, bounded by the request's hold plus what was still free. */
  totalCost: NanoUsd;
  /**
   * The part of the priced usage that could not be charged (the funds, key limit or a plan window ran
   * out). Metering always sets it; absent is 0 (writers that predate the column).
   */
  unbilledCost?: NanoUsd;
  /**
   * Signed, not charged: what caching saved against billing every cached and written token at the input price
   * (metering's `CostBreakdown.cacheDiscount`). Absent is 0.
   */
  cacheDiscount?: NanoUsd;
  /** The usage was counted by the gateway (the upstream reported none), not reported. Absent is false. */
  usageEstimated?: boolean;
  /**
   * Every try of an upstream deployment, in order; only the one that answered is billed. null (or absent:
   * writers that predate the column) when no upstream was tried.
   */
  attempts?: AttemptRecord[] | null;
}

export interface RequestPage {
  limit: number;
  /** Cursor: only rows older than (before, beforeId) in (created_at, id) order. */
  before?: number;
  beforeId?: string;
}

/** A page of an account's request log, newest first, narrowed by any of the filters (all must hold). */
export interface GenerationQuery extends RequestPage {
  keyId?: string;
  model?: string;
  status?: GenerationStatus;
  /** Only requests that started at or after this epoch ms (a day's start). */
  since?: number;
  /** Only requests that started before this epoch ms (the next day's start). */
  until?: number;
}

/** One entry of an account's ledger that is not a request's usage: a credit (> 0) or a plan bought from the balance (< 0). */
export interface LedgerEntry {
  id: string;
  kind: Exclude<LedgerKindName, "usage">;
  /** Signed nano-USD. */
  amount: NanoUsd;
  reference: string;
  createdAt: number;
}

/** Money taken back from an account after a credit: a refund or a dispute of a payment (negative ledger entries). */
export const TAKE_BACK_KINDS = ["refund", "dispute"] as const;
export type TakeBackKind = (typeof TAKE_BACK_KINDS)[number];

export type LedgerKindName = CreditKind | TakeBackKind | "usage" | "plan";

export const USER_ROLES = ["owner", "member"] as const;
export type UserRole = (typeof USER_ROLES)[number];

/** A person who signs in to the dashboard; belongs to one account. */
export interface User {
  id: string;
  accountId: string;
  /** Lower-cased; unique over the whole gateway. */
  email: string;
  role: UserRole;
  /** argon2id (Bun.password), PHC string. */
  passwordHash: string;
  createdAt: number;
}

export type NewUser = Omit<User, "createdAt">;

/** A dashboard sign-in, kept server-side. */
export interface DashboardSession {
  /** SHA-256 hex of the session id (the cookie's value): the id itself is never stored. */
  idHash: string;
  /** The user signed in; null for an operator signed in with the admin token. */
  userId: string | null;
  createdAt: number;
  expiresAt: number;
}

/** A page of accounts, newest first, optionally only those whose name or id contains `q`. */
export interface AccountQuery extends RequestPage {
  /** A substring of the name or the id, A-Z matched case-insensitively and every other character exactly (both stores alike). */
  q?: string;
}

/** Counters of the usage report (cost in nano-USD). */
export interface UsageCounters {
  cost: NanoUsd;
  requests: number;
  successfulRequests: number;
  failedRequests: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
}

export interface UsageRow extends UsageCounters {
  day: string; // YYYY-MM-DD (UTC)
  model: string;
}

/** Funds available to a new reservation: after committed debits and every reservation held. */
export interface Funds {
  account: NanoUsd;
  /** null when the key has no budget. */
  key: NanoUsd | null;
  /** Per requested spend window: spent since its start (committed + every reservation held) and the oldest spend's time. */
  windows: Record<string, { spent: NanoUsd; oldestAt: number | null }>;
}

export interface PlanPurchase {
  id: string;
  accountId: string;
  plan: string;
  funding: "balance" | "card";
  price: NanoUsd;
  /** Bonus credit that comes with the plan. */
  bonus: NanoUsd;
  startedAt: number;
  endsAt: number;
  renewing: boolean;
}

export type PlanCycle = Omit<PlanPurchase, "bonus">;

export interface ReservationInput {
  /** The request id; the generation with this id releases it when its debit is written. */
  id: string;
  accountId: string;
  keyId: string;
  /** Whether the key has a budget (its funds are then checked too). */
  keyLimited: boolean;
  instanceId: string;
  createdAt: number;
  /** Spend windows to measure, by name: the window's start (epoch ms). */
  windows?: Record<string, number>;
  /** The request already holds funds and this call extends its hold: a failed attempt leaves the first hold in place. */
  extension?: boolean;
}

/** Accounts: who is billed. */
export interface AccountStore {
  createAccount(name: string): Promise<Account>;
  getAccount(id: string): Promise<Account | null>;
  /** Newest first, in (created_at, id) order; the cursor and the search combine. */
  listAccounts(query: AccountQuery): Promise<Account[]>;
}

/** The ledger: credits in, the totals they and the metered debits add up to. */
export interface LedgerStore {
  /** Idempotent on `reference`; a reference reused for another account or amount throws RecordConflictError. */
  addCredit(credit: CreditInput): Promise<CreditResult>;
  accountTotals(accountId: string): Promise<AccountTotals>;
  /** The account's credits and plan purchases (never usage), newest first in (created_at, id) order. */
  listLedgerEntries(accountId: string, page: RequestPage): Promise<LedgerEntry[]>;
  /**
   * The ledger's own sums by kind over every account, usage left out (credits by kind, plans and take-backs
   * negative): what GET /metrics exports as gateway_credits_nano_usd{kind}. Kinds with no entry are absent.
   */
  creditTotalsByKind(): Promise<Record<string, NanoUsd>>;
}

/** API keys of accounts. */
export interface KeyStore {
  createKey(key: NewApiKey): Promise<ApiKey>;
  findKeyByHash(keyHash: string): Promise<ApiKey | null>;
  getKey(id: string): Promise<ApiKey | null>;
  /** Marks the key deleted; returns it (null when unknown or already deleted). */
  deleteKey(id: string): Promise<ApiKey | null>;
  /** The account's keys, deleted ones included, newest first in (created_at, id) order. */
  listKeys(accountId: string, page: RequestPage): Promise<ApiKey[]>;
  /** Total spend of a key, nano-USD. */
  keyUsage(keyId: string): Promise<NanoUsd>;
}

/** The metering sink and what it wrote: generation records, their debits and the daily roll-ups. */
export interface MeteringStore {
  /**
   * Meters one request: the generation record (with totalCost > 0 it is the request's usage debit in
   * the ledger), the key's and account's totals and the daily roll-up, all in one transaction. Writes may be batched (group
   * commit), but the record and totals are visible to every read of this repository at once.
   */
  recordGeneration(generation: Generation): void;
  /** A generation of the account by request id (= chat-completion id) or a relayed Responses id. */
  findGeneration(accountId: string, id: string): Promise<Generation | null>;
  /** Newest first, in (created_at, id) order, narrowed by the query's filters. */
  listGenerations(accountId: string, query: GenerationQuery): Promise<Generation[]>;
  /** Daily roll-ups of an account (or one key) between two UTC days, inclusive. */
  usageByDay(query: { accountId: string; keyId?: string; startDay: string; endDay: string }): Promise<UsageRow[]>;
  /** Writes everything batched so far. */
  flush(): Promise<void>;
}

/** Budget holds of requests in flight. */
export interface ReservationStore {
  /**
   * Atomically reads the available funds, asks `decide` for the amount to hold (it throws a
   * GatewayError to refuse) and holds it. Concurrent reservations never spend the same funds.
   * A second call for an id already held EXTENDS that hold by the amount decided (the funds it sees
   * already exclude the hold): how a request whose priced cost exceeds its hold takes what is still free.
   * `decide` may run more than once (holds kept in the workers' primary decide first on unbounded funds, then on
   * the real ones): the amount held is that of its last run, so a decision's side effects must come from it too.
   */
  reserve(input: ReservationInput, decide: (funds: Funds) => NanoUsd): Promise<NanoUsd>;
  /** Drops a reservation now (a request that ends without a generation record). */
  releaseReservation(id: string): Promise<void>;
  /**
   * The holds outstanding: how many and how much, over every process on the store (rows) plus this process's
   * own (SQLite process holds), less the holds of requests this process has settled whose debit is queued for
   * the group commit (a debit replaces them). What GET /metrics exports as gateway_holds_outstanding*.
   */
  holdsOutstanding(): Promise<HoldsOutstanding>;
}

/** Budget holds not yet replaced by a debit or released. */
export interface HoldsOutstanding {
  count: number;
  amount: NanoUsd;
}

/** Plan cycles of accounts. */
export interface PlanStore {
  /** Buys a plan cycle atomically: balance funding debits the price (once per account); the bonus is credited. */
  purchasePlan(purchase: PlanPurchase): Promise<{ cycle: PlanCycle; balance: NanoUsd }>;
  /** The plan cycle in force at `at`, if any. */
  activePlan(accountId: string, at: number): Promise<PlanCycle | null>;
}

/** Gateway processes sharing the store, and the holds they leave behind. */
export interface InstanceStore {
  /** Marks this gateway process alive. */
  heartbeat(instanceId: string, now: number): Promise<void>;
  /** Releases the reservations of processes not seen alive since `aliveSince`; returns how many. */
  releaseStaleReservations(aliveSince: number): Promise<number>;
  /** A process stopping cleanly: its reservations and its row go. */
  removeInstance(instanceId: string): Promise<void>;
}

/** Named values the gateway keeps across restarts (the admin token's hash, ...). */
export interface SettingsStore {
  getSetting(name: string): Promise<string | null>;
  setSetting(name: string, value: string): Promise<void>;
  /** Sets the value only when the name has none: true when this call set it (a claim every instance agrees on). */
  claimSetting(name: string, value: string): Promise<boolean>;
  deleteSetting(name: string): Promise<void>;
}

export const TOPUP_METHODS = ["card", "usdt"] as const;
export type TopupMethod = (typeof TOPUP_METHODS)[number];

/**
 * A top-up's states: `pending` (made, not paid) → `paid` (the processor has the money; not credited: it is
 * flagged, e.g. the amount or currency differs) → `credited`; `expired` (never paid in time); `refunded` and
 * `disputed` (money taken back after the credit, in part or whole).
 */
export const TOPUP_STATUSES = ["pending", "paid", "credited", "expired", "refunded", "disputed"] as const;
export type TopupStatus = (typeof TOPUP_STATUSES)[number];

/** One top-up of an account: our own record; the amount credited is always ours, never the processor's. */
export interface Topup {
  /** "tu_…" */
  id: string;
  accountId: string;
  method: TopupMethod;
  /** What is credited, nano-USD. */
  amount: NanoUsd;
  status: TopupStatus;
  /** The processor's object for it (a Stripe Checkout Session id); null when there is none (USDT). */
  processorRef: string | null;
  /** Where the payer goes to pay (the Checkout Session's URL). */
  checkoutUrl: string | null;
  /** The processor's payment id once paid (a Stripe PaymentIntent, a chain transaction id): the credit's ledger reference. */
  paymentRef: string | null;
  /** USDT: the network ("tron"), the receiving address and the exact amount to send in micro-USDT (6 decimals). */
  network: string | null;
  payTo: string | null;
  payAmountMicro: number | null;
  /** Why a payment was not credited automatically (e.g. "amount paid 4.00 USD differs from 5.00 USD"); null: none. */
  flag: string | null;
  /** Taken back so far by refunds and disputes, nano-USD (≤ amount). */
  takenBack: NanoUsd;
  /** A pending top-up after this is expired (epoch ms); null: the processor says when. */
  expiresAt: number | null;
  createdAt: number;
  updatedAt: number;
}

export type NewTopup = Pick<Topup, "id" | "accountId" | "method" | "amount" | "network" | "payTo" | "payAmountMicro" | "expiresAt">;

/** An event of a processor (a Stripe event, a chain transfer), applied once: its id is unique over all processors. */
export interface PaymentEvent {
  /** "stripe:evt_…", "tron:<transaction id>". */
  id: string;
  /** "stripe", "tron". */
  processor: string;
  /** The processor's event type ("checkout.session.completed", "trc20.transfer"). */
  type: string;
  receivedAt: number;
}

/** What applying an event does, in the same transaction as its record. */
export type PaymentEffect =
  /** Nothing but the record (an event type we do not act on, or one already reflected). */
  | { kind: "none" }
  /** Credits the top-up's own amount (ledger kind = its method, reference = paymentRef) and sets it `credited`; only from `pending`, `paid` or `expired` (a payment confirmed after our expiry sweep), else nothing. */
  | { kind: "credit"; topupId: string; paymentRef: string }
  /** Sets a `pending` top-up `paid` with a flag (the payment differs from the record): nothing is credited. */
  | { kind: "flag"; topupId: string; paymentRef: string | null; reason: string }
  /** Sets a `pending` top-up `expired`; any other state is left as it is. */
  | { kind: "expire"; topupId: string }
  /**
   * Takes money back from the top-up's account: a negative ledger entry of `kind` (reference unique: a refund id, a
   * dispute id; the same reference takes back once), at most what the top-up credited and has not yet given back;
   * the top-up becomes `refunded` or `disputed`. A dispute also blocks the account (Account.blockedReason). The balance
   * may go below zero: a debt, shown in the ledger.
   */
  | { kind: "take-back"; topupId: string; takeBack: TakeBackKind; reference: string; amount: NanoUsd }
  /**
   * A card-funded plan cycle paid by a subscription invoice: starts now, or at the end of the account's current cycle
   * of that subscription when one runs (a renewal), which then stops renewing; bonus credited (reference = purchase id).
   */
  | { kind: "plan-cycle"; purchase: PlanPurchase; subscriptionRef: string }
  /** The subscription will not renew: its cycles stop renewing and end at their end. */
  | { kind: "plan-stop"; subscriptionRef: string };

export interface PaymentEventResult {
  /** False when the event had been applied already: nothing changed. */
  applied: boolean;
  /** The top-up the effect names, as it is now. */
  topup: Topup | null;
  /** What was credited (+) or taken back (−) by this call, nano-USD. */
  amount: NanoUsd;
}

/** A transfer to a receiving address that matched no top-up (another token, a wrong amount, after expiry, too small): shown to the operator, never credited automatically. */
export interface UnmatchedTransfer {
  /** "tron:<transaction id>". */
  id: string;
  network: string;
  token: string;
  from: string;
  to: string;
  /** In the token's smallest unit (micro-USDT). */
  amountMicro: number;
  /** Epoch ms of the block. */
  at: number;
  reason: string;
  recordedAt: number;
}

/** Top-ups, the processors' events applied once, and the transfers that matched none. */
export interface PaymentStore {
  createTopup(topup: NewTopup): Promise<Topup>;
  getTopup(id: string): Promise<Topup | null>;
  /** The top-up paid by this processor payment (for refunds and disputes that name the payment). */
  findTopupByPaymentRef(paymentRef: string): Promise<Topup | null>;
  /** The account's top-ups, newest first in (created_at, id) order. */
  listTopups(accountId: string, page: RequestPage): Promise<Topup[]>;
  /** The processor's side of a new top-up, once it exists (the Checkout Session). */
  attachCheckout(id: string, checkout: { processorRef: string; checkoutUrl: string; expiresAt: number | null }): Promise<Topup>;
  /** Pending top-ups to `payTo` on `network` that have not expired at `now`: their exact amounts must stay unique. */
  openTopupsTo(network: string, payTo: string, now: number): Promise<Topup[]>;
  /** Pending top-ups whose expiresAt passed by `now` (for the sweep that expires them). */
  expiredPendingTopups(now: number, limit: number): Promise<Topup[]>;
  /** Records the event and applies its effect in one transaction; an event id seen before changes nothing. */
  applyPaymentEvent(event: PaymentEvent, effect: PaymentEffect): Promise<PaymentEventResult>;
  /** The processor's events applied since `since` (epoch ms), oldest first: what reconciliation compares. */
  listPaymentEvents(since: number, processor?: string): Promise<(PaymentEvent & { topupId: string | null; amount: NanoUsd })[]>;
  /** Records a transfer that matched nothing; false when its id was recorded before. */
  recordUnmatchedTransfer(transfer: UnmatchedTransfer): Promise<boolean>;
  /** Newest first. */
  listUnmatchedTransfers(page: RequestPage): Promise<UnmatchedTransfer[]>;
  /** Clears an account's block (an operator settled the dispute); false when it was not blocked. */
  clearAccountBlock(accountId: string): Promise<boolean>;
}

/** People of accounts who sign in to the dashboard. */
export interface UserStore {
  /** RecordNotFoundError for an unknown account; RecordConflictError when the email (or id) is taken. */
  createUser(user: NewUser): Promise<User>;
  /** By lower-cased email. */
  findUserByEmail(email: string): Promise<User | null>;
  getUser(id: string): Promise<User | null>;
  /** The account's users, oldest first. */
  listUsers(accountId: string): Promise<User[]>;
}

/** Dashboard sessions, server-side. */
export interface SessionStore {
  createSession(session: DashboardSession): Promise<void>;
  /** The session with this id hash, unless it expired by `now`. */
  findSession(idHash: string, now: number): Promise<DashboardSession | null>;
  /** Signs the session out (a no-op when unknown). */
  deleteSession(idHash: string): Promise<void>;
  /** Drops sessions that expired by `now`; returns how many. */
  deleteExpiredSessions(now: number): Promise<number>;
}

/** The store as a whole: is it answering, and closing it. */
export interface StoreLifecycle {
  /** A cheap query; throws when the store cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /**
   * Tells `listener` of every group commit of metered generations that wrote rows: its write's duration in seconds
   * and how many rows it settled (GET /metrics: gateway_store_commit_seconds). Synchronous, on the writer's path:
   * a listener must be cheap and must not throw (an error is swallowed). Returns a function that removes it.
   */
  onCommit(listener: (seconds: number, rows: number) => void): () => void;
}

/** Every domain of the store: what the `storage` service provides; a consumer may ask for just its slice. */
export interface Repository
  extends AccountStore,
    LedgerStore,
    KeyStore,
    MeteringStore,
    ReservationStore,
    PlanStore,
    InstanceStore,
    SettingsStore,
    UserStore,
    SessionStore,
    PaymentStore,
    StoreLifecycle {}

declare module "../../core/plugin.ts" {
  interface Services {
    storage: Repository;
  }
}
