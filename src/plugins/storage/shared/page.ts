import type { Generation, RequestPage } from "../repository.ts";
import type { PendingGenerations } from "./pending.ts";
import { isOlderThan, newestFirst } from "./cursor.ts";

/** Copies of the account's queued generations that belong on a page (older than its cursor). */
export function queuedPage(pending: PendingGenerations, accountId: string, page: RequestPage): Generation[] {
  const older = isOlderThan(page);
  return pending.queue.filter((g) => g.accountId === accountId && older(g)).map((g) => ({ ...g }));
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
