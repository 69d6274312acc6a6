import type { Generation } from "../repository.ts";

/**
 * Reads add this process's queued generations to what is committed. Commits are asynchronous here,
 * so a batch may become visible while a read is in flight: each read therefore captures the queued
 * generations it would add BEFORE its query, and the same SQL statement (one snapshot) returns which
 * of them the store already holds. Only the others are added: a generation is counted once, whether
 * its commit landed before, during or after the read.
 */
export const storedIdsSql = (param: string) => `array(select id from generations where id = any(${param}::text[]))`;

/** The queued generations of `queued` the store did not hold in the read's snapshot. */
export function notStored(queued: readonly Generation[], stored: readonly string[]): Generation[] {
  if (queued.length === 0 || stored.length === 0) return queued.slice();
  const have = new Set(stored);
  return queued.filter((g) => !have.has(g.id));
}

/** Sum of total costs. */
export function costOf(list: readonly Generation[]): number {
  let sum = 0;
  for (const g of list) sum += g.totalCost;
  return sum;
}

/** int8 and numeric arrive as strings; null counts as 0. */
export function num(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

export function numOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}
