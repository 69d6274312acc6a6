import { and, eq, gte, lt, type Column, type SQL } from "drizzle-orm";
import type { Generation, GenerationQuery, RequestPage } from "../repository.ts";
import type { PendingGenerations } from "./pending.ts";
import { isOlderThan, newestFirst, olderThan } from "./cursor.ts";
import { notSuccess } from "./tables.ts";

/**
 * The WHERE of a page of an account's request log: the account, every filter of the query, and the
 * cursor. Each single filter has an index that also gives the (created_at) order: (account_id, key_id,
 * created_at), (account_id, model, created_at), the partial (account_id, status, created_at) for a status
 * other than success, and (account_id, created_at) for success and the day range.
 */
export function generationsWhere(
  t: { accountId: Column; keyId: Column; model: Column; status: Column; createdAt: Column; id: Column },
  accountId: string,
  query: GenerationQuery,
): SQL | undefined {
  return and(
    eq(t.accountId, accountId),
    query.keyId === undefined ? undefined : eq(t.keyId, query.keyId),
    query.model === undefined ? undefined : eq(t.model, query.model),
    query.status === undefined ? undefined : eq(t.status, query.status),
    // The partial index's own condition, as a term: SQLite uses a partial index only when the query
    // states its condition (it does not infer `status <> 'success'` from `status = 'failed'`).
    query.status === undefined || query.status === "success" ? undefined : notSuccess(t),
    query.since === undefined ? undefined : gte(t.createdAt, query.since),
    query.until === undefined ? undefined : lt(t.createdAt, query.until),
    olderThan(t, query),
  );
}

/** The same filters (not the cursor) for a generation still in memory. */
export function matchesQuery(accountId: string, query: GenerationQuery): (g: Generation) => boolean {
  return (g) =>
    g.accountId === accountId &&
    (query.keyId === undefined || g.keyId === query.keyId) &&
    (query.model === undefined || g.model === query.model) &&
    (query.status === undefined || g.status === query.status) &&
    (query.since === undefined || g.createdAt >= query.since) &&
    (query.until === undefined || g.createdAt < query.until);
}

/** Copies of the account's queued generations that belong on a page (the query's filters, older than its cursor). */
export function queuedPage(pending: PendingGenerations, accountId: string, page: RequestPage | GenerationQuery): Generation[] {
  const older = isOlderThan(page);
  const matches = matchesQuery(accountId, page);
  return pending.queue.filter((g) => matches(g) && older(g)).map((g) => ({ ...g }));
}

/**
 * A page of stored and queued generations, newest first. A queued generation the store already
 * returned (Postgres commits while a read is in flight) is kept once.
 */
export function mergePage(stored: Generation[], queued: readonly Generation[], limit: number): Generation[] {
  if (queued.length === 0) return stored;
  const storedIds = new Set(stored.map((g) => g.id));
  return [...stored, ...queued.filter((g) => !storedIds.has(g.id))]
    .sort(newestFirst)
    .slice(0, limit);
}
