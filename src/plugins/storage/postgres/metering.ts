import { and, asc, between, desc, eq, sql } from "drizzle-orm";
import type { MeteringStore, UsageRow } from "../repository.ts";
import { checkGeneration, generationFromRow, queuedGeneration } from "../rows.ts";
import type { StoreGate } from "../shared/gate.ts";
import type { GroupCommit } from "../shared/group-commit.ts";
import { withPendingUsage, type PendingGenerations } from "../shared/pending.ts";
import { pageLimit } from "../shared/cursor.ts";
import { generationsWhere, mergePage, queuedPage } from "../shared/page.ts";
import { guard } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { notStored } from "./overlay.ts";
import { generations, usageDaily } from "./schema.ts";

/**
 * Metering on Postgres: `recordGeneration` queues for the group commit (hot path: no await, no write);
 * every read adds this process's queued generations the store did not hold in its snapshot (overlay.ts).
 */
export function createPostgresMetering(db: PostgresDb, pending: PendingGenerations, commits: GroupCommit, gate: StoreGate): MeteringStore {
  const usageByDay = createUsageReport(db, pending);

  return {
    recordGeneration(generation) {
      gate.assertOpen();
      checkGeneration(generation);
      commits.record(queuedGeneration(generation));
    },

    findGeneration: (accountId, id) =>
      guard(async () => {
        const queued = pending.find(accountId, id);
        if (queued !== undefined) return { ...queued };
        // Not queued: never recorded here, or already committed (visible to the queries below).
        const [byId] = await db
          .select()
          .from(generations)
          .where(and(eq(generations.id, id), eq(generations.accountId, accountId)));
        if (byId !== undefined) return generationFromRow(byId);
        const [byResponse] = await db
          .select()
          .from(generations)
          .where(and(eq(generations.accountId, accountId), eq(generations.responseId, id)))
          .orderBy(desc(generations.createdAt))
          .limit(1);
        return byResponse === undefined ? null : generationFromRow(byResponse);
      }),

    listGenerations: (accountId, query) =>
      guard(async () => {
        const limit = pageLimit(query);
        if (limit === 0) return [];
        // Captured before the query: a generation committed meanwhile shows up in both, and is kept once.
        const queued = queuedPage(pending, accountId, query);
        const stored = await db
          .select()
          .from(generations)
          .where(generationsWhere(generations, accountId, query))
          .orderBy(desc(generations.createdAt), desc(generations.id))
          .limit(limit);
        return mergePage(stored.map(generationFromRow), queued, limit);
      }),

    usageByDay: (query) => guard(() => usageByDay(query)),

    async flush() {
      if (!gate.closed) await commits.flush();
    },
  };
}

/** The usage report: daily roll-ups of an account (or one key) plus its queued generations not yet stored. */
function createUsageReport(db: PostgresDb, pending: PendingGenerations) {
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

  async function usageByDay(query: { accountId: string; keyId?: string; startDay: string; endDay: string }): Promise<UsageRow[]> {
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
  }

  return usageByDay;
}
