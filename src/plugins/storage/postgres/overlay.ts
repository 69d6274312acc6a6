import type { SQL } from "bun";
import { and, asc, between, desc, eq, lt, or, sql } from "drizzle-orm";
import type { AccountTotals, Generation, RequestPage, UsageRow } from "../repository.ts";
import { withPendingUsage, type PendingGenerations } from "../shared/pending.ts";
import { isOlderThan, newestFirst, pageLimit } from "../shared/cursor.ts";
import type { PostgresDb } from "./open.ts";
import { generations, usageDaily } from "./schema.ts";

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

const TOTALS = `
select a.total_credits_nano as credits, a.total_debits_nano as debits, a.paid_credits_nano as paid, ${storedIdsSql("$2")} as stored
  from (select 1) as one left join accounts a on a.id = $1`;
const KEY_USAGE = `select (select usage_nano from api_keys where id = $1) as usage, ${storedIdsSql("$2")} as stored`;

/** The reads that combine committed rows with this process's queued generations. */
export function createOverlayReads(client: SQL, db: PostgresDb, pending: PendingGenerations) {
  function rollups(q: Pick<PostgresDb, "select">, filters: ReturnType<typeof eq>[]) {
    return q
      .select({
        day: usageDaily.day,
        model: usageDaily.model,
        cost: sql<string>`sum(${usageDaily.costNano})`,
        requests: sql<string>`sum(${usageDaily.requests})`,
        successfulRequests: sql<string>`sum(${usageDaily.successfulRequests})`,
        failedRequests: sql<string>`sum(${usageDaily.failedRequests})`,
        promptTokens: sql<string>`sum(${usageDaily.promptTokens})`,
        completionTokens: sql<string>`sum(${usageDaily.completionTokens})`,
        cachedTokens: sql<string>`sum(${usageDaily.cachedTokens})`,
        cacheWriteTokens: sql<string>`sum(${usageDaily.cacheWriteTokens})`,
      })
      .from(usageDaily)
      .where(and(...filters))
      .groupBy(usageDaily.day, usageDaily.model)
      .orderBy(asc(usageDaily.day), asc(usageDaily.model));
  }

  return {
    /** Committed totals plus this process's queued debits not yet stored. */
    async totalsOf(accountId: string): Promise<AccountTotals> {
      const queued = pending.queue.filter((g) => g.accountId === accountId);
      const [row] = await client.unsafe(TOTALS, [accountId, queued.map((g) => g.id)]);
      const credits = num(row.credits);
      const debits = num(row.debits) + costOf(notStored(queued, row.stored));
      return { credits, debits, balance: credits - debits, paidCredits: num(row.paid) };
    },

    async keyUsage(keyId: string): Promise<number> {
      const queued = pending.queue.filter((g) => g.keyId === keyId);
      const [row] = await client.unsafe(KEY_USAGE, [keyId, queued.map((g) => g.id)]);
      return num(row.usage) + costOf(notStored(queued, row.stored));
    },

    async findGeneration(accountId: string, id: string): Promise<Generation | null> {
      const queued = pending.find(accountId, id);
      if (queued !== undefined) return { ...queued };
      // Not queued: never recorded here, or already committed (visible to the queries below).
      const [byId] = await db
        .select()
        .from(generations)
        .where(and(eq(generations.id, id), eq(generations.accountId, accountId)));
      if (byId !== undefined) return byId;
      const [byResponse] = await db
        .select()
        .from(generations)
        .where(and(eq(generations.accountId, accountId), eq(generations.responseId, id)))
        .orderBy(desc(generations.createdAt))
        .limit(1);
      return byResponse ?? null;
    },

    async listGenerations(accountId: string, page: RequestPage): Promise<Generation[]> {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      const before = page.before ?? Number.MAX_SAFE_INTEGER;
      const beforeId = page.beforeId ?? ""; // no id: strictly before the millisecond
      const older = isOlderThan(page);
      // Captured before the query: a generation committed meanwhile shows up in both, and is kept once.
      const queued = pending.queue.filter((g) => g.accountId === accountId && older(g)).map((g) => ({ ...g }));
      const stored = await db
        .select()
        .from(generations)
        .where(
          and(
            eq(generations.accountId, accountId),
            or(lt(generations.createdAt, before), and(eq(generations.createdAt, before), lt(generations.id, beforeId))),
          ),
        )
        .orderBy(desc(generations.createdAt), desc(generations.id))
        .limit(limit);
      if (queued.length === 0) return stored;
      const storedIds = new Set(stored.map((g) => g.id));
      return [...stored, ...queued.filter((g) => !storedIds.has(g.id))]
        .sort(newestFirst)
        .slice(0, limit);
    },

    async usageByDay(query: { accountId: string; keyId?: string; startDay: string; endDay: string }): Promise<UsageRow[]> {
      const { accountId, keyId, startDay, endDay } = query;
      const filters = [eq(usageDaily.accountId, accountId), between(usageDaily.day, startDay, endDay)];
      if (keyId !== undefined) filters.push(eq(usageDaily.keyId, keyId));
      const queued = pending.queue.filter((g) => g.accountId === accountId && (keyId === undefined || g.keyId === keyId));
      // With queued generations in scope, the roll-ups and the stored-ids probe must share one
      // snapshot: a read-only repeatable-read transaction.
      const { rows, stored } =
        queued.length === 0
          ? { rows: await rollups(db, filters), stored: [] as string[] }
          : await db.transaction(
              async (tx) => {
                const rows = await rollups(tx, filters);
                const [probe] = await tx.execute<{ stored: string[] }>(
                  sql`select array(select id from generations where id = any(${sql.param(queued.map((g) => g.id))}::text[])) as stored`,
                );
                return { rows, stored: probe.stored };
              },
              { isolationLevel: "repeatable read", accessMode: "read only" },
            );
      const usage: UsageRow[] = rows.map((row) => ({
        day: row.day,
        model: row.model,
        cost: Number(row.cost),
        requests: Number(row.requests),
        successfulRequests: Number(row.successfulRequests),
        failedRequests: Number(row.failedRequests),
        promptTokens: Number(row.promptTokens),
        completionTokens: Number(row.completionTokens),
        cachedTokens: Number(row.cachedTokens),
        cacheWriteTokens: Number(row.cacheWriteTokens),
      }));
      return withPendingUsage(usage, notStored(queued, stored), query);
    },
  };
}
