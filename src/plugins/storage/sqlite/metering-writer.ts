import type { Database } from "bun:sqlite";
import { eq, sql } from "drizzle-orm";
import type { Generation, UsageCounters } from "../repository.ts";
import { attemptsText, storedRequestedModel } from "../rows.ts";
import { addToCounters, emptyCounters, utcDay } from "../shared/pending.ts";
import { addToSpend, type SpendBucket } from "../shared/spend-buckets.ts";
import { accounts, apiKeys, generations, usageDaily } from "./schema.ts";
import type { SqliteDb } from "./open.ts";
import { compileStatement } from "./statements.ts";

const p = sql.placeholder;

interface UsageBucket extends UsageCounters {
  accountId: string;
  keyId: string;
  day: string;
  model: string;
}

/**
 * Writes a batch of generations in ONE transaction: per generation its row, which is also its usage
 * debit in the ledger (schema.ts); per account, key and (account, key, day, model) one aggregated
 * update of the maintained totals and the daily roll-up. A generation id already stored is skipped
 * whole: a request is never debited twice.
 */
export function createMeteringWriter(db: SqliteDb, client: Database, options: { holdsInTable: boolean } = { holdsInTable: true }) {
  const compile = (query: Parameters<typeof compileStatement>[1]) => compileStatement(client, query);
  const insertGeneration = compileInsertGeneration(db, compile);

  const addAccountDebits = compile(
    db
      .update(accounts)
      .set({ totalDebitsNano: sql`${accounts.totalDebitsNano} + ${p("amount")}` })
      .where(eq(accounts.id, p("accountId"))),
  );

  const addKeyUsage = compile(
    db
      .update(apiKeys)
      .set({ usageNano: sql`${apiKeys.usageNano} + ${p("amount")}` })
      .where(eq(apiKeys.id, p("keyId"))),
  );

  const upsertUsage = compileUpsertUsage(db, compile);

  // The request's budget reservation (when holds are rows) goes in the same transaction as its debit.
  const deleteReservation = client.prepare("delete from reservations where id = ?");
  const addSpend = client.prepare(
    "insert into spend_buckets (account_id, bucket_start, cost_nano) values (?, ?, ?) on conflict (account_id, bucket_start) do update set cost_nano = cost_nano + excluded.cost_nano",
  );

  function applyBatch(batch: readonly Generation[]): void {
    const accountDebits = new Map<string, number>();
    const keyUsage = new Map<string, number>();
    const usage = new Map<string, UsageBucket>();
    const spend = new Map<string, SpendBucket>();
    for (const g of batch) {
      if (options.holdsInTable) deleteReservation.run(g.id);
      const inserted = insertGeneration.run(insertValues(g));
      if (inserted === 0) continue; // already stored: metered once
      if (g.totalCost > 0) {
        accountDebits.set(g.accountId, (accountDebits.get(g.accountId) ?? 0) + g.totalCost);
        addToSpend(spend, g);
        keyUsage.set(g.keyId, (keyUsage.get(g.keyId) ?? 0) + g.totalCost);
      }
      const day = utcDay(g.createdAt);
      const bucketKey = g.accountId + "\u0000" + g.keyId + "\u0000" + day + "\u0000" + g.model;
      let bucket = usage.get(bucketKey);
      if (bucket === undefined) {
        bucket = { accountId: g.accountId, keyId: g.keyId, day, model: g.model, ...emptyCounters() };
        usage.set(bucketKey, bucket);
      }
      addToCounters(bucket, g);
    }
    for (const [accountId, amount] of accountDebits) addAccountDebits.run({ accountId, amount });
    for (const [keyId, amount] of keyUsage) addKeyUsage.run({ keyId, amount });
    for (const bucket of usage.values()) upsertUsage.run({ ...bucket });
    for (const bucket of spend.values()) addSpend.run(bucket.accountId, bucket.bucketStart, bucket.cost);
  }

  const transaction = client.transaction(applyBatch);

  return {
    /** Commits the batch atomically; throws (and writes nothing) on any failure. */
    write(batch: readonly Generation[]): void {
      transaction.immediate(batch);
    },
  };
}

type Compile = (query: Parameters<typeof compileStatement>[1]) => ReturnType<typeof compileStatement>;

/** A generation's row (its usage debit when it has a cost); an id already stored is skipped. */
function compileInsertGeneration(db: SqliteDb, compile: Compile) {
  return compile(
    db
      .insert(generations)
      .values({
        id: p("id"),
        responseId: p("responseId"),
        accountId: p("accountId"),
        keyId: p("keyId"),
        model: p("model"),
        requestedModel: p("requestedModel"),
        provider: p("provider"),
        ingress: p("ingress"),
        stream: p("stream"), // bun:sqlite binds a boolean as 1 / 0
        status: p("status"),
        errorCode: p("errorCode"),
        createdAt: p("createdAt"),
        latencyMs: p("latencyMs"),
        timeToFirstTokenMs: p("timeToFirstTokenMs"),
        promptTokens: p("promptTokens"),
        completionTokens: p("completionTokens"),
        cachedTokens: p("cachedTokens"),
        cacheWriteTokens: p("cacheWriteTokens"),
        cacheWrite1hTokens: p("cacheWrite1hTokens"),
        reasoningTokens: p("reasoningTokens"),
        inputCost: p("inputCost"),
        cacheReadCost: p("cacheReadCost"),
        cacheWriteCost: p("cacheWriteCost"),
        outputCost: p("outputCost"),
        totalCost: p("totalCost"),
        unbilledCost: p("unbilledCost"),
        cacheDiscount: p("cacheDiscount"),
        usageEstimated: p("usageEstimated"),
        attempts: p("attemptsText"),
      })
      .onConflictDoNothing({ target: generations.id }),
  );
}

/** One (account, key, day, model) roll-up, added to what is stored. */
function compileUpsertUsage(db: SqliteDb, compile: Compile) {
  const excludedPlus = (column: (typeof usageDaily)["costNano"], name: string) =>
    sql`${column} + ${sql.raw(`excluded.${name}`)}`;
  return compile(
    db
      .insert(usageDaily)
      .values({
        accountId: p("accountId"),
        keyId: p("keyId"),
        day: p("day"),
        model: p("model"),
        costNano: p("cost"),
        requests: p("requests"),
        successfulRequests: p("successfulRequests"),
        failedRequests: p("failedRequests"),
        promptTokens: p("promptTokens"),
        completionTokens: p("completionTokens"),
        cachedTokens: p("cachedTokens"),
        cacheWriteTokens: p("cacheWriteTokens"),
      })
      .onConflictDoUpdate({
        target: [usageDaily.accountId, usageDaily.keyId, usageDaily.day, usageDaily.model],
        set: {
          costNano: excludedPlus(usageDaily.costNano, "cost_nano"),
          requests: excludedPlus(usageDaily.requests, "requests"),
          successfulRequests: excludedPlus(usageDaily.successfulRequests, "successful_requests"),
          failedRequests: excludedPlus(usageDaily.failedRequests, "failed_requests"),
          promptTokens: excludedPlus(usageDaily.promptTokens, "prompt_tokens"),
          completionTokens: excludedPlus(usageDaily.completionTokens, "completion_tokens"),
          cachedTokens: excludedPlus(usageDaily.cachedTokens, "cached_tokens"),
          cacheWriteTokens: excludedPlus(usageDaily.cacheWriteTokens, "cache_write_tokens"),
        },
      }),
  );
}

/**
 * The insert's values: the generation with its attempts serialised (once, here: the queued generation keeps
 * the array its readers see), and the column defaults of fields a writer that predates them leaves out.
 */
function insertValues(g: Generation): Generation & { attemptsText: string | null } {
  return {
    ...g,
    cacheWrite1hTokens: g.cacheWrite1hTokens ?? 0,
    unbilledCost: g.unbilledCost ?? 0,
    cacheDiscount: g.cacheDiscount ?? 0,
    usageEstimated: g.usageEstimated ?? false,
    requestedModel: storedRequestedModel(g),
    attemptsText: attemptsText(g.attempts),
  };
}
