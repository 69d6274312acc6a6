import type { ApiKey, Generation } from "./repository.ts";

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

export function toApiKey(row: ApiKeyRow): ApiKey {
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
  };
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
  if (!Number.isFinite(g.createdAt)) throw new RangeError(`generation ${g.id}: createdAt must be epoch ms`);
}
