import type { Generation, UsageCounters, UsageRow } from "../repository.ts";

const DAY_MS = 86_400_000;
let cachedDayNumber = Number.NaN;
let cachedDay = "";

/** UTC calendar day (YYYY-MM-DD) of an epoch-ms time. */
export function utcDay(ms: number): string {
  const dayNumber = Math.floor(ms / DAY_MS);
  if (dayNumber !== cachedDayNumber) {
    cachedDay = new Date(dayNumber * DAY_MS).toISOString().slice(0, 10);
    cachedDayNumber = dayNumber;
  }
  return cachedDay;
}

export function emptyCounters(): UsageCounters {
  return {
    cost: 0,
    requests: 0,
    successfulRequests: 0,
    failedRequests: 0,
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
    cacheWriteTokens: 0,
  };
}

/** Adds one generation to usage counters. `failed` = every request that did not succeed. */
export function addToCounters(counters: UsageCounters, g: Generation): void {
  counters.cost += g.totalCost;
  counters.requests += 1;
  if (g.status === "success") counters.successfulRequests += 1;
  else counters.failedRequests += 1;
  counters.promptTokens += g.promptTokens;
  counters.completionTokens += g.completionTokens;
  counters.cachedTokens += g.cachedTokens;
  counters.cacheWriteTokens += g.cacheWriteTokens;
}

/** Adds `amount` to a running sum by key; a sum back at zero leaves the map. */
export function addTo(map: Map<string, number>, key: string, amount: number): void {
  const next = (map.get(key) ?? 0) + amount;
  if (next === 0) map.delete(key);
  else map.set(key, next);
}

function responseKey(accountId: string, responseId: string): string {
  return accountId + "\u0000" + responseId;
}

/**
 * Generations recorded but not yet committed, and their effect on the totals, so that reads see a
 * request the moment it is metered. The queue is FIFO: a commit settles a prefix of it.
 */
export class PendingGenerations {
  readonly queue: Generation[] = [];
  /** Ids only (a string set): a long-lived map holding each request's object costs the hot path more. */
  private readonly ids = new Set<string>();
  private readonly byResponse = new Map<string, Generation>();
  private readonly debits = new Map<string, number>();
  private readonly keyUsage = new Map<string, number>();

  get size(): number {
    return this.queue.length;
  }

  /** Queues a generation; false when its id is already pending (a request is metered once). */
  add(g: Generation): boolean {
    if (this.ids.has(g.id)) return false;
    this.queue.push(g);
    this.ids.add(g.id);
    if (g.responseId !== null) this.byResponse.set(responseKey(g.accountId, g.responseId), g);
    addTo(this.debits, g.accountId, g.totalCost);
    addTo(this.keyUsage, g.keyId, g.totalCost);
    return true;
  }

  /** Removes the first `count` queued generations (committed or dead-lettered) and their effect. */
  settle(count: number): void {
    const settled = this.queue.splice(0, count);
    for (const g of settled) {
      this.ids.delete(g.id);
      if (g.responseId !== null) {
        const key = responseKey(g.accountId, g.responseId);
        if (this.byResponse.get(key) === g) this.byResponse.delete(key);
      }
      addTo(this.debits, g.accountId, -g.totalCost);
      addTo(this.keyUsage, g.keyId, -g.totalCost);
    }
  }

  find(accountId: string, id: string): Generation | undefined {
    // A lookup (cost API) scans the queue: at most a few batches, and only when the id is queued at all.
    if (this.ids.has(id)) {
      const queued = this.queue.find((g) => g.id === id);
      if (queued !== undefined && queued.accountId === accountId) return queued;
    }
    return this.byResponse.get(responseKey(accountId, id));
  }

  /** Queued debits of the account for requests started at or after `since` (spend windows). */
  accountDebitsSince(accountId: string, since: number): number {
    let sum = 0;
    for (const g of this.queue) if (g.accountId === accountId && g.createdAt >= since) sum += g.totalCost;
    return sum;
  }

  accountDebits(accountId: string): number {
    return this.debits.get(accountId) ?? 0;
  }

  keySpend(keyId: string): number {
    return this.keyUsage.get(keyId) ?? 0;
  }
}

/** Daily roll-ups read from the store plus the queued generations of the same scope, sorted by day, model. */
export function withPendingUsage(
  rows: UsageRow[],
  queue: readonly Generation[],
  scope: { accountId: string; keyId?: string; startDay: string; endDay: string },
): UsageRow[] {
  if (queue.length === 0) return rows;
  const byDayModel = new Map(rows.map((row) => [row.day + "\u0000" + row.model, row]));
  for (const g of queue) {
    if (g.accountId !== scope.accountId || (scope.keyId !== undefined && g.keyId !== scope.keyId)) continue;
    const day = utcDay(g.createdAt);
    if (day < scope.startDay || day > scope.endDay) continue;
    const key = day + "\u0000" + g.model;
    let row = byDayModel.get(key);
    if (row === undefined) {
      row = { day, model: g.model, ...emptyCounters() };
      byDayModel.set(key, row);
    }
    addToCounters(row, g);
  }
  return [...byDayModel.values()].sort((a, b) =>
    a.day !== b.day ? (a.day < b.day ? -1 : 1) : a.model < b.model ? -1 : a.model > b.model ? 1 : 0,
  );
}
