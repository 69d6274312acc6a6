import { InvalidRecordError } from "./errors.ts";
import { newId } from "./shared/ids.ts";
import type { AttemptRecord } from "../../core/deployments.ts";
import { CREDIT_KINDS, USER_ROLES, type ApiKey, type CreditInput, type Generation, type LedgerEntry, type NewApiKey, type NewUser, type PlanCycle, type PlanPurchase, type User, type UserRole } from "./repository.ts";

/** What both dialects' `api_keys` rows look like once read (drizzle maps the columns to these names). */
export interface ApiKeyRow {
  id: string;
  accountId: string;
  name: string;
  keyHash: string;
  label: string;
  limitNano: number | null;
  models: string | null;
  rpm: number | null;
  tpm: number | null;
  expiresAt: number | null;
  createdAt: number;
  deletedAt: number | null;
  blocked: boolean;
}

/** A key row read with its account's block (findKeyByHash, getKey, listKeys join `accounts`). */
export interface ApiKeyWithAccountRow extends ApiKeyRow {
  accountBlockedReason: string | null;
}

export function toApiKey(row: ApiKeyWithAccountRow): ApiKey {
  return {
    id: row.id,
    accountId: row.accountId,
    name: row.name,
    keyHash: row.keyHash,
    label: row.label,
    limit: row.limitNano,
    models: row.models === null ? null : (JSON.parse(row.models) as string[]),
    requestsPerMinute: row.rpm,
    tokensPerMinute: row.tpm,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    deletedAt: row.deletedAt,
    blocked: row.blocked,
    accountBlockedReason: row.accountBlockedReason,
  };
}

/** The row a new key is stored as: no spend, not deleted, not blocked. */
export function newApiKeyRow(key: NewApiKey): ApiKeyRow & { usageNano: number } {
  return {
    id: key.id || newId("key"),
    accountId: key.accountId,
    name: key.name,
    keyHash: key.keyHash,
    label: key.label,
    limitNano: key.limit,
    models: key.models === null ? null : JSON.stringify(key.models),
    rpm: key.requestsPerMinute,
    tpm: key.tokensPerMinute,
    expiresAt: key.expiresAt,
    createdAt: Date.now(),
    deletedAt: null,
    blocked: false,
    usageNano: 0,
  };
}

/** Credit kinds that count as paid (promotional-only detection). */
export const PAID_KINDS = new Set<string>(["card", "usdt"]);

/** The message of a credit that would take an account past the integers a JS number holds exactly. */
export const CREDITS_CAP_MESSAGE =
  "this amount would take the account's credits past 9007199.254740991 USD (2^53 - 1 nano-USD), the most it counts exactly";

/** Refuses a credit that could never be stored: amount, kind and reference, before any I/O. */
export function checkCredit({ amount, kind, reference }: CreditInput): void {
  if (!Number.isSafeInteger(amount) || amount <= 0) {
    throw new InvalidRecordError("credit amount must be a positive integer of nano-USD", { field: "amount" });
  }
  if (!(CREDIT_KINDS as readonly string[]).includes(kind)) {
    throw new InvalidRecordError(`unknown credit kind "${kind}"`, { field: "kind" });
  }
  if (!reference) throw new InvalidRecordError("credit reference is required", { field: "reference" });
}

/** The cycle a purchase starts (the purchase without its bonus). */
export function cycleOf(p: PlanPurchase): PlanCycle {
  return { id: p.id, accountId: p.accountId, plan: p.plan, funding: p.funding, price: p.price, startedAt: p.startedAt, endsAt: p.endsAt, renewing: p.renewing };
}

/** Refuses a generation that could never be written (a bug upstream of the store), before it is queued. */
export function checkGeneration(g: Generation): void {
  if (!g.id || !g.accountId || !g.keyId) throw new TypeError("generation needs id, accountId and keyId");
  if (!Number.isSafeInteger(g.totalCost) || g.totalCost < 0) {
    throw new RangeError(`generation ${g.id}: totalCost must be a non-negative integer (nano-USD)`);
  }
  if (g.unbilledCost !== undefined && (!Number.isSafeInteger(g.unbilledCost) || g.unbilledCost < 0)) {
    throw new RangeError(`generation ${g.id}: unbilledCost must be a non-negative integer (nano-USD)`);
  }
  if (g.cacheDiscount !== undefined && !Number.isSafeInteger(g.cacheDiscount)) {
    throw new RangeError(`generation ${g.id}: cacheDiscount must be an integer (nano-USD, signed)`);
  }
  if (g.cacheWrite1hTokens !== undefined && (!Number.isSafeInteger(g.cacheWrite1hTokens) || g.cacheWrite1hTokens < 0 || g.cacheWrite1hTokens > g.cacheWriteTokens)) {
    throw new RangeError(`generation ${g.id}: cacheWrite1hTokens must be an integer from 0 to cacheWriteTokens`);
  }
  if (!Number.isFinite(g.createdAt)) throw new RangeError(`generation ${g.id}: createdAt must be epoch ms`);
  if (g.attempts != null && !Array.isArray(g.attempts)) throw new TypeError(`generation ${g.id}: attempts must be an array or null`);
  if (g.requestedModel != null && (typeof g.requestedModel !== "string" || g.requestedModel === "")) {
    throw new TypeError(`generation ${g.id}: requestedModel must be a non-empty string or null`);
  }
}

/** The stored `requested_model`: the asked model only when it differs from the one that answered; NULL otherwise (almost always). */
export function storedRequestedModel(g: Pick<Generation, "model" | "requestedModel">): string | null {
  return g.requestedModel == null || g.requestedModel === g.model ? null : g.requestedModel;
}

/**
 * The generation as queued (a copy): a `requestedModel` given as the model itself reads as null, as it will once
 * stored, so a read answers the same before and after the commit. Absent stays absent (a writer that predates it).
 */
export function queuedGeneration(g: Generation): Generation {
  return g.requestedModel === undefined ? { ...g } : { ...g, requestedModel: storedRequestedModel(g) };
}

/** A generation's attempts as stored: JSON text, NULL when there were none to keep (serialised once, by the writer). */
export function attemptsText(attempts: readonly AttemptRecord[] | null | undefined): string | null {
  return attempts == null ? null : JSON.stringify(attempts);
}

/** A stored generation row (both dialects: attempts as JSON text) as the contract's `Generation`. */
export function generationFromRow<Row extends { attempts: string | null }>(row: Row): Omit<Row, "attempts"> & { attempts: AttemptRecord[] | null } {
  return { ...row, attempts: row.attempts === null ? null : (JSON.parse(row.attempts) as AttemptRecord[]) };
}

/** Errors that come after the upstream's answer began: that deployment answered (and is billed) all the same. */
const ANSWERED_THEN_FAILED = new Set<string>(["broken_stream", "idle_timeout"]);

/**
 * The deployment that answered the request (the one billed): the last attempt, when it succeeded or failed
 * only after its answer began; null when no deployment answered (none tried, or every try failed before an answer).
 */
export function answeringDeployment(attempts: readonly AttemptRecord[] | null | undefined): string | null {
  const last = attempts?.[attempts.length - 1];
  if (last === undefined) return null;
  return last.error_class === null || ANSWERED_THEN_FAILED.has(last.error_class) ? last.deployment : null;
}

/** A `ledger_entries` row as the ledger list returns it (never of kind usage: the query excludes those). */
export function toLedgerEntry(row: { id: string; kind: string; amountNano: number; reference: string; createdAt: number }): LedgerEntry {
  return { id: row.id, kind: row.kind as LedgerEntry["kind"], amount: row.amountNano, reference: row.reference, createdAt: row.createdAt };
}

/** A `users` row read back (role is text in the table). */
export function toUser(row: { id: string; accountId: string; email: string; role: string; passwordHash: string; createdAt: number }): User {
  return { id: row.id, accountId: row.accountId, email: row.email, role: row.role as UserRole, passwordHash: row.passwordHash, createdAt: row.createdAt };
}

/** The row a new user is stored as: a `usr_…` id when none is given, created now. */
export function newUserRow(user: NewUser): User {
  if (!(USER_ROLES as readonly string[]).includes(user.role)) throw new InvalidRecordError(`unknown role "${user.role}"`, { field: "role" });
  if (!user.email) throw new InvalidRecordError("email is required", { field: "email" });
  return { id: user.id || newId("usr"), accountId: user.accountId, email: user.email, role: user.role, passwordHash: user.passwordHash, createdAt: Date.now() };
}
