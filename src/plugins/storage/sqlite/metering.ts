import type { Database } from "bun:sqlite";
import { and, asc, between, desc, eq, sql } from "drizzle-orm";
import type { MeteringStore, UsageRow } from "../repository.ts";
import { checkGeneration, generationFromRow, queuedGeneration } from "../rows.ts";
import type { SettledRequest } from "./reservations.ts";
import type { StoreGate } from "../shared/gate.ts";
import type { GroupCommit } from "../shared/group-commit.ts";
import { withPendingUsage, type PendingGenerations } from "../shared/pending.ts";
import { pageLimit } from "../shared/cursor.ts";
import { generationsWhere, mergePage, queuedPage } from "../shared/page.ts";
import type { SqliteDb } from "./open.ts";
import { compileStatement } from "./statements.ts";
import type { StoredView } from "./repository.ts";
import { generations, usageDaily } from "./schema.ts";

const p = sql.placeholder;

/**
 * Metering on SQLite: `recordGeneration` queues for the group commit (hot path: no await, no write);
 * every read adds the queued generations to what is committed. `markSettled` swaps the request's
 * hold for its queued debit (reservations.ts).
 */
export function createSqliteMetering(
  client: Database,
  db: SqliteDb,
  pending: PendingGenerations,
  commits: GroupCommit,
  gate: StoreGate,
  markSettled: (generation: SettledRequest) => void,
  stored: StoredView,
): MeteringStore {
  const selectGenerationById = db
    .select()
    .from(generations)
    .where(and(eq(generations.id, p("id")), eq(generations.accountId, p("accountId"))))
    .prepare();
  const selectGenerationByResponse = db
    .select()
    .from(generations)
    .where(and(eq(generations.accountId, p("accountId")), eq(generations.responseId, p("id"))))
    .orderBy(desc(generations.createdAt))
    .limit(1)
    .prepare();

  const usageByDay = createUsageReport(client, db, pending, stored);

  return {
    recordGeneration(generation) {
      gate.assertOpen();
      checkGeneration(generation);
      commits.record(queuedGeneration(generation));
      markSettled(generation);
    },

    async findGeneration(accountId, id) {
      const queued = pending.find(accountId, id);
      if (queued !== undefined) return { ...queued };
      const row = selectGenerationById.get({ id, accountId }) ?? selectGenerationByResponse.get({ id, accountId });
      return row === undefined ? null : generationFromRow(row);
    },

    async listGenerations(accountId, query) {
      const limit = pageLimit(query);
      if (limit === 0) return [];
      // The stored page first: a batch found stored there is no longer queued (repository.ts, storedView).
      const storedPage = stored(() =>
        db
          .select()
          .from(generations)
          .where(generationsWhere(generations, accountId, query))
          .orderBy(desc(generations.createdAt), desc(generations.id))
          .limit(limit)
          .all(),
      ).map(generationFromRow);
      return mergePage(storedPage, queuedPage(pending, accountId, query), limit);
    },

    usageByDay,

    async flush() {
      if (!gate.closed) await commits.flush();
    },
  };
}

/** The usage report: daily roll-ups of an account (or one key) plus its queued generations. */
function createUsageReport(client: Database, db: SqliteDb, pending: PendingGenerations, stored: StoredView): MeteringStore["usageByDay"] {
  // The usage report reads thousands of grouped rows: a raw statement returns them as objects keyed by
  // the aliases, without drizzle's per-field mapping (which was most of the report's time: docs/performance.md).
  const usageQuery = (scope: "account" | "key") =>
    compileStatement(
      client,
      db
        .select({
          day: usageDaily.day,
          model: usageDaily.model,
          cost: sql<number>`sum(${usageDaily.costNano})`.as("cost"),
          requests: sql<number>`sum(${usageDaily.requests})`.as("requests"),
          successfulRequests: sql<number>`sum(${usageDaily.successfulRequests})`.as("successfulRequests"),
          failedRequests: sql<number>`sum(${usageDaily.failedRequests})`.as("failedRequests"),
          promptTokens: sql<number>`sum(${usageDaily.promptTokens})`.as("promptTokens"),
          completionTokens: sql<number>`sum(${usageDaily.completionTokens})`.as("completionTokens"),
          cachedTokens: sql<number>`sum(${usageDaily.cachedTokens})`.as("cachedTokens"),
          cacheWriteTokens: sql<number>`sum(${usageDaily.cacheWriteTokens})`.as("cacheWriteTokens"),
        })
        .from(usageDaily)
        .where(
          and(
            eq(usageDaily.accountId, p("accountId")),
            between(usageDaily.day, p("startDay"), p("endDay")),
            scope === "key" ? eq(usageDaily.keyId, p("keyId")) : undefined,
          ),
        )
        .groupBy(usageDaily.day, usageDaily.model)
        .orderBy(asc(usageDaily.day), asc(usageDaily.model)),
    );
  const usageOfAccount = usageQuery("account");
  const usageOfKey = usageQuery("key");

  return async function usageByDay({ accountId, keyId, startDay, endDay }) {
    const scope = { accountId, keyId, startDay, endDay };
    const rows = stored(() => (keyId === undefined ? usageOfAccount.all(scope) : usageOfKey.all(scope))) as UsageRow[];
    return withPendingUsage(rows, pending.queue, scope);
  };
}
