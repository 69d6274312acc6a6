import { and, eq, lt, lte, or, type Column } from "drizzle-orm";
import type { RequestPage } from "../repository.ts";

/** A page's row count: a whole number, at least 0. */
export function pageLimit(page: RequestPage): number {
  return Math.max(0, Math.floor(page.limit));
}

/** Rows strictly older than the cursor in (created_at, id) order; no id: strictly before the millisecond. */
export function olderThan(table: { createdAt: Column; id: Column }, page: RequestPage) {
  if (page.before === undefined) return undefined;
  const beforeId = page.beforeId ?? "";
  // The plain `created_at <= before` bounds the index range: the OR alone would be a filter over the
  // whole (account, created_at) range above the cursor, and a deep page would read every row before it.
  return and(
    lte(table.createdAt, page.before),
    or(lt(table.createdAt, page.before), and(eq(table.createdAt, page.before), lt(table.id, beforeId))),
  );
}

/** The same cursor test for rows still in memory (queued generations). */
export function isOlderThan(page: RequestPage): (row: { createdAt: number; id: string }) => boolean {
  const before = page.before ?? Number.MAX_SAFE_INTEGER;
  // Cursor (created_at, id): rows of the same millisecond are split by id, none lost between pages.
  const beforeId = page.beforeId ?? ""; // no id: strictly before the millisecond
  return (row) => row.createdAt < before || (row.createdAt === before && row.id < beforeId);
}

/** Newest first in (created_at, id) order. */
export function newestFirst(a: { createdAt: number; id: string }, b: { createdAt: number; id: string }): number {
  return b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
}
