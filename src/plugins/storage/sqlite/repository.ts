import { and, asc, between, desc, eq, lt, or, sql } from "drizzle-orm";
import { UnavailableError } from "../../../core/errors.ts";
import { InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import { failClosed, isPermanent, isUniqueViolation } from "./errors.ts";
import { createLogger, type Logger } from "../../../core/log.ts";
import {
  type Account,
  type AccountTotals,
  type ApiKey,
  type CreditInput,
  type CreditResult,
  type Generation,
  type NewApiKey,
  type Repository,
  type UsageRow,
} from "../repository.ts";
import { newId } from "../shared/ids.ts";
import { compileStatement } from "./statements.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import { isInMemoryPath, openSqlite, type OpenSqliteOptions } from "./open.ts";
import { createGroupCommit } from "../shared/group-commit.ts";
import { createSqliteReservations, type HoldsMode } from "./reservations.ts";
import { lockForHolds } from "./process-lock.ts";
import { startCheckpointer } from "./checkpointer.ts";
import { createSqlitePlans } from "./plans.ts";
import { createSqliteListing } from "./listing.ts";
import { PendingGenerations, withPendingUsage } from "../shared/pending.ts";
import { isOlderThan, newestFirst, pageLimit } from "../shared/cursor.ts";
import { accounts, apiKeys, generations, ledgerEntries, settings, usageDaily } from "./schema.ts";
import { checkCredit, checkGeneration, CREDITS_CAP_MESSAGE, newApiKeyRow, PAID_KINDS, toApiKey } from "../rows.ts";

export interface SqliteRepositoryOptions extends OpenSqliteOptions {
  /** Group-commit period (default 5 ms). */
  flushIntervalMs?: number;
  /** A queue this long is flushed at once (default 512); also the size of one transaction. */
  maxBatch?: number;
  /**
   * Where budget holds live (reservations.ts): `shared` (default here: rows of the file, any number of
   * processes) or `process` (this process's memory, no write per request; the file is then locked
   * against every other gateway process).
   */
  holds?: HoldsMode;
  /** WAL checkpoints on a thread of their own every this many ms (default 500); 0: the writer checkpoints itself. */
  checkpointIntervalMs?: number;
  log?: Logger;
}

const p = sql.placeholder;


/** The embedded SQLite store: WAL, migrations at open, group-committed metering. */
export function createSqliteRepository(path: string, options: SqliteRepositoryOptions = {}): Repository {
  const flushIntervalMs = Math.max(1, options.flushIntervalMs ?? 5);
  const maxBatch = Math.max(1, options.maxBatch ?? 512);
  const log = options.log ?? createLogger("storage");
  const holds = options.holds ?? "shared";
  const { client, db } = openSqlite(path, options); // creates the file's directory: lock after
  let lock: { release(): void } | null = null;
  try {
    lock = isInMemoryPath(path) ? null : lockForHolds(path, holds);
  } catch (error) {
    client.close();
    throw error;
  }
  const checkpointIntervalMs = options.checkpointIntervalMs ?? 500;
  const checkpointer = isInMemoryPath(path) || checkpointIntervalMs <= 0 ? null : startCheckpointer(client, path, { intervalMs: checkpointIntervalMs, log });
  const writer = createMeteringWriter(db, client, { holdsInTable: holds === "shared" });
  const pending = new PendingGenerations();

  const selectTotals = db
    .select({ credits: accounts.totalCreditsNano, debits: accounts.totalDebitsNano, paid: accounts.paidCreditsNano })
    .from(accounts)
    .where(eq(accounts.id, p("id")))
    .prepare();
  const selectKeyByHash = db.select().from(apiKeys).where(eq(apiKeys.keyHash, p("hash"))).prepare();
  const selectKeyById = db.select().from(apiKeys).where(eq(apiKeys.id, p("id"))).prepare();
  const selectKeyUsage = db.select({ usage: apiKeys.usageNano }).from(apiKeys).where(eq(apiKeys.id, p("id"))).prepare();
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

  const reservations = createSqliteReservations(client, pending, holds);
  const listing = createSqliteListing(db);
  const plans = createSqlitePlans(client, { availableShift: reservations.availableShift, queuedDebits: (id) => pending.accountDebits(id) });
  let closed = false;
  function writeBatch(batch: readonly Generation[]): void {
    writer.write(batch);
    reservations.forgetWritten(batch.map((g) => g.id));
  }
  const commits = createGroupCommit({ pending, write: writeBatch, isPermanent, flushIntervalMs, maxBatch, log });

  function totalsOf(accountId: string): AccountTotals {
    const row = selectTotals.get({ id: accountId });
    const credits = row?.credits ?? 0;
    const debits = (row?.debits ?? 0) + pending.accountDebits(accountId);
    return { credits, debits, balance: credits - debits, paidCredits: row?.paid ?? 0 };
  }

  const closedError = () => new UnavailableError("storage is closed");
  function assertOpen(): void {
    if (closed) throw closedError();
  }

  const repository: Repository = {
    async createAccount(name) {
      assertOpen();
      const account: Account = { id: newId("acct"), name, createdAt: Date.now() };
      db.insert(accounts).values(account).run();
      return account;
    },

    async getAccount(id) {
      const row = db
        .select({ id: accounts.id, name: accounts.name, createdAt: accounts.createdAt })
        .from(accounts)
        .where(eq(accounts.id, id))
        .get();
      return row ?? null;
    },

    async addCredit(credit: CreditInput): Promise<CreditResult> {
      assertOpen();
      checkCredit(credit);
      const { accountId, amount, kind, reference } = credit;
      return db.transaction(
        (tx) => {
          const existing = tx
            .select({ id: ledgerEntries.id, accountId: ledgerEntries.accountId, amount: ledgerEntries.amountNano, kind: ledgerEntries.kind })
            .from(ledgerEntries)
            .where(eq(ledgerEntries.reference, reference))
            .get();
          if (existing !== undefined) {
            // A replay is the same credit: account, amount and kind (a card payment is not a bonus).
            if (existing.accountId !== accountId || existing.amount !== amount || existing.kind !== kind) {
              throw new RecordConflictError("reference already used for another credit", { field: "reference" });
            }
            return { entryId: existing.id, balance: totalsOf(accountId).balance, duplicate: true };
          }
          // Totals are read as JS numbers: an account's credits stay a safe integer, so every balance is exact.
          const current = tx.select({ credits: accounts.totalCreditsNano }).from(accounts).where(eq(accounts.id, accountId)).get();
          if (current !== undefined && current.credits + amount > Number.MAX_SAFE_INTEGER) {
            throw new InvalidRecordError(CREDITS_CAP_MESSAGE, { field: "amount" });
          }
          const paid = PAID_KINDS.has(kind) ? amount : 0;
          const updated = tx
            .update(accounts)
            .set({
              totalCreditsNano: sql`${accounts.totalCreditsNano} + ${amount}`,
              paidCreditsNano: sql`${accounts.paidCreditsNano} + ${paid}`,
            })
            .where(eq(accounts.id, accountId))
            .returning({ id: accounts.id })
            .get();
          if (updated === undefined) throw new RecordNotFoundError(`account ${accountId} not found`);
          const entryId = newId("le");
          tx.insert(ledgerEntries)
            .values({ id: entryId, accountId, kind, amountNano: amount, reference, createdAt: Date.now() })
            .run();
          reservations.storedChanged();
          return { entryId, balance: totalsOf(accountId).balance, duplicate: false };
        },
        { behavior: "immediate" },
      );
    },

    async accountTotals(accountId) {
      return totalsOf(accountId);
    },

    async listAccounts(query) {
      return listing.listAccounts(query);
    },

    async createKey(key: NewApiKey) {
      assertOpen();
      const account = db.select({ id: accounts.id }).from(accounts).where(eq(accounts.id, key.accountId)).get();
      if (account === undefined) throw new RecordNotFoundError(`account ${key.accountId} not found`);
      const row = newApiKeyRow(key);
      try {
        db.insert(apiKeys).values(row).run();
      } catch (error) {
        if (isUniqueViolation(error)) throw new RecordConflictError("a key with this id or hash already exists");
        throw error;
      }
      return toApiKey(row);
    },

    async findKeyByHash(keyHash) {
      const row = selectKeyByHash.get({ hash: keyHash });
      return row === undefined ? null : toApiKey(row);
    },

    async getKey(id) {
      const row = selectKeyById.get({ id });
      return row === undefined ? null : toApiKey(row);
    },

    async deleteKey(id) {
      assertOpen();
      const row = db
        .update(apiKeys)
        .set({ deletedAt: Date.now() })
        .where(and(eq(apiKeys.id, id), sql`${apiKeys.deletedAt} is null`))
        .returning()
        .get();
      return row === undefined ? null : toApiKey(row);
    },

    async listKeys(accountId, page) {
      return listing.listKeys(accountId, page);
    },

    async keyUsage(keyId) {
      return (selectKeyUsage.get({ id: keyId })?.usage ?? 0) + pending.keySpend(keyId);
    },

    recordGeneration(generation) {
      assertOpen();
      checkGeneration(generation);
      commits.record({ ...generation });
      reservations.markSettled(generation.id);
    },

    async findGeneration(accountId, id) {
      const queued = pending.find(accountId, id);
      if (queued !== undefined) return { ...queued };
      return selectGenerationById.get({ id, accountId }) ?? selectGenerationByResponse.get({ id, accountId }) ?? null;
    },

    async listGenerations(accountId, page) {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      const before = page.before ?? Number.MAX_SAFE_INTEGER;
      const beforeId = page.beforeId ?? ""; // no id: strictly before the millisecond
      const older = isOlderThan(page);
      const queued = pending.queue.filter((g) => g.accountId === accountId && older(g));
      const stored = db
        .select()
        .from(generations)
        .where(
          and(
            eq(generations.accountId, accountId),
            or(lt(generations.createdAt, before), and(eq(generations.createdAt, before), lt(generations.id, beforeId))),
          ),
        )
        .orderBy(desc(generations.createdAt), desc(generations.id))
        .limit(limit)
        .all();
      if (queued.length === 0) return stored;
      return [...stored, ...queued.map((g) => ({ ...g }))]
        .sort(newestFirst)
        .slice(0, limit);
    },

    async usageByDay({ accountId, keyId, startDay, endDay }) {
      const scope = { accountId, keyId, startDay, endDay };
      const rows = (keyId === undefined ? usageOfAccount.all(scope) : usageOfKey.all(scope)) as UsageRow[];
      return withPendingUsage(rows, pending.queue, scope);
    },

    async getSetting(name) {
      return db.select({ value: settings.value }).from(settings).where(eq(settings.name, name)).get()?.value ?? null;
    },

    async setSetting(name, value) {
      assertOpen();
      db.insert(settings).values({ name, value }).onConflictDoUpdate({ target: settings.name, set: { value } }).run();
    },

    async flush() {
      if (!closed) await commits.flush();
    },

    // Not async: the reservation's own promise is returned as is (an async wrapper adds microtask turns per request).
    reserve(input, decide) {
      if (closed) return Promise.reject(closedError());
      return reservations.reserve(input, decide);
    },

    async purchasePlan(purchase) {
      assertOpen();
      try {
        return plans.purchasePlan(purchase);
      } finally {
        reservations.storedChanged();
      }
    },

    async activePlan(accountId, at) {
      assertOpen();
      return failClosed(() => plans.activePlan(accountId, at));
    },

    async releaseReservation(id) {
      assertOpen();
      failClosed(() => reservations.releaseReservation(id));
    },

    async heartbeat(instanceId, now) {
      assertOpen();
      reservations.heartbeat(instanceId, now);
    },

    async releaseStaleReservations(aliveSince) {
      assertOpen();
      return reservations.releaseStaleReservations(aliveSince);
    },

    async removeInstance(instanceId) {
      assertOpen();
      reservations.removeInstance(instanceId);
    },

    async ping() {
      try {
        assertOpen();
        client.query("select 1").get();
      } catch (error) {
        throw error instanceof UnavailableError ? error : new UnavailableError("storage unavailable", { cause: error });
      }
    },

    async close() {
      if (closed) return;
      closed = true; // new writes are refused from here; reads keep working until the file closes
      await commits.stop();
      await checkpointer?.stop();
      client.close();
      lock?.release();
    },
  };
  return repository;
}
