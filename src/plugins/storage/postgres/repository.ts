import { and, eq, isNull, sql } from "drizzle-orm";
import { UnavailableError } from "../../../core/errors.ts";
import { InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import { createLogger, type Logger } from "../../../core/log.ts";
import {
  type Account,
  type ApiKey,
  type CreditInput,
  type CreditResult,
  type Generation,
  type NewApiKey,
  type Repository,
} from "../repository.ts";
import { newId } from "../shared/ids.ts";
import { PendingGenerations } from "../shared/pending.ts";
import { guard, isForeignKeyViolation, isPermanent, isUniqueViolation, storeError } from "./errors.ts";
import { createGroupCommit } from "../shared/group-commit.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import { openPostgres, type OpenPostgresOptions } from "./open.ts";
import { createOverlayReads } from "./overlay.ts";
import { createPostgresPlans } from "./plans.ts";
import { createPostgresListing } from "./listing.ts";
import { createPostgresReservations } from "./reservations.ts";
import { accounts, apiKeys, settings } from "./schema.ts";
import { checkCredit, checkGeneration, CREDITS_CAP_MESSAGE, newApiKeyRow, PAID_KINDS, toApiKey } from "../rows.ts";

export interface PostgresRepositoryOptions extends OpenPostgresOptions {
  /** Group-commit period (default 5 ms). */
  flushIntervalMs?: number;
  /** A queue this long is flushed at once (default 512); also the size of one transaction. */
  maxBatch?: number;
  log?: Logger;
}



/**
 * The multi-instance store on Postgres (Bun's built-in SQL client, drizzle's bun-sql driver):
 * migrations at start under an advisory lock, group-committed metering with a read overlay,
 * reservations serialized per account by row locks. Same contract and semantics as the SQLite store.
 */
export async function createPostgresRepository(url: string, options: PostgresRepositoryOptions = {}): Promise<Repository> {
  const flushIntervalMs = Math.max(1, options.flushIntervalMs ?? 5);
  const maxBatch = Math.max(1, options.maxBatch ?? 512);
  const log = options.log ?? createLogger("storage");
  const { client, db } = await openPostgres(url, options);
  const pending = new PendingGenerations();
  const writer = createMeteringWriter(client);
  const reservations = createPostgresReservations(client, pending);
  const plans = createPostgresPlans(client, pending);
  const reads = createOverlayReads(client, db, pending);
  const listing = createPostgresListing(db);
  const commits = createGroupCommit({ pending, write: writer.write, isPermanent, flushIntervalMs, maxBatch, log });
  let closed = false;

  const selectKeyByHash = db.select().from(apiKeys).where(eq(apiKeys.keyHash, sql.placeholder("hash"))).prepare("gw_key_by_hash");
  const selectKeyById = db.select().from(apiKeys).where(eq(apiKeys.id, sql.placeholder("id"))).prepare("gw_key_by_id");

  function assertOpen(): void {
    if (closed) throw new UnavailableError("storage is closed");
  }

  const repository: Repository = {
    createAccount: (name) =>
      guard(async () => {
        assertOpen();
        const account: Account = { id: newId("acct"), name, createdAt: Date.now() };
        await db.insert(accounts).values(account);
        return account;
      }),

    getAccount: (id) =>
      guard(async () => {
        const [row] = await db
          .select({ id: accounts.id, name: accounts.name, createdAt: accounts.createdAt })
          .from(accounts)
          .where(eq(accounts.id, id));
        return row ?? null;
      }),

    addCredit: (credit: CreditInput) =>
      guard(async (): Promise<CreditResult> => {
        assertOpen();
        checkCredit(credit);
        const { accountId, amount, kind, reference } = credit;
        const paid = PAID_KINDS.has(kind) ? amount : 0;
        const entryId = newId("le");
        const outcome = await client
          .begin(async (tx) => {
            // On a concurrent insert of the same reference, ON CONFLICT waits for that transaction and
            // then does nothing: exactly one credit per reference, however many gateways race.
            const inserted = await tx.unsafe(
              `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at)
                 values ($1, $2, $3, $4, $5, null, $6) on conflict (reference) do nothing returning id`,
              [entryId, accountId, kind, amount, reference, Date.now()],
            );
            if (inserted.length === 1) {
              // Totals are read as JS numbers: an account's credits stay a safe integer, so every balance is exact.
              // No row updated with the row inserted (the foreign key holds): the cap; throwing rolls the insert back.
              const updated = await tx.unsafe(
                `update accounts set total_credits_nano = total_credits_nano + $1, paid_credits_nano = paid_credits_nano + $2
                   where id = $3 and total_credits_nano + $1 <= $4 returning id`,
                [amount, paid, accountId, Number.MAX_SAFE_INTEGER],
              );
              if (updated.length === 0) {
                throw new InvalidRecordError(CREDITS_CAP_MESSAGE, { field: "amount" });
              }
              return { entryId, duplicate: false };
            }
            const [existing] = await tx.unsafe(`select id, account_id, amount_nano, kind from ledger_entries where reference = $1`, [reference]);
            // A replay is the same credit: account, amount and kind (a card payment is not a bonus).
            if (existing.account_id !== accountId || Number(existing.amount_nano) !== amount || existing.kind !== kind) {
              throw new RecordConflictError("reference already used for another credit", { field: "reference" });
            }
            return { entryId: existing.id as string, duplicate: true };
          })
          .catch((error: unknown) => {
            if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`account ${accountId} not found`);
            throw error;
          });
        return { ...outcome, balance: (await reads.totalsOf(accountId)).balance };
      }),

    accountTotals: (accountId) => guard(() => reads.totalsOf(accountId)),

    listAccounts: (query) => guard(() => listing.listAccounts(query)),

    createKey: (key: NewApiKey) =>
      guard(async () => {
        assertOpen();
        const row = newApiKeyRow(key);
        try {
          await db.insert(apiKeys).values(row);
        } catch (error) {
          if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`account ${key.accountId} not found`);
          if (isUniqueViolation(error)) throw new RecordConflictError("a key with this id or hash already exists");
          throw error;
        }
        return toApiKey(row);
      }),

    findKeyByHash: (keyHash) =>
      guard(async () => {
        const [row] = await selectKeyByHash.execute({ hash: keyHash });
        return row === undefined ? null : toApiKey(row);
      }),

    getKey: (id) =>
      guard(async () => {
        const [row] = await selectKeyById.execute({ id });
        return row === undefined ? null : toApiKey(row);
      }),

    deleteKey: (id) =>
      guard(async () => {
        assertOpen();
        const [row] = await db
          .update(apiKeys)
          .set({ deletedAt: Date.now() })
          .where(and(eq(apiKeys.id, id), isNull(apiKeys.deletedAt)))
          .returning();
        return row === undefined ? null : toApiKey(row);
      }),

    listKeys: (accountId, page) => guard(() => listing.listKeys(accountId, page)),
    keyUsage: (keyId) => guard(() => reads.keyUsage(keyId)),

    recordGeneration(generation) {
      assertOpen();
      checkGeneration(generation);
      commits.record({ ...generation });
    },

    findGeneration: (accountId, id) => guard(() => reads.findGeneration(accountId, id)),
    listGenerations: (accountId, page) => guard(() => reads.listGenerations(accountId, page)),
    usageByDay: (query) => guard(() => reads.usageByDay(query)),

    getSetting: (name) =>
      guard(async () => {
        const [row] = await db.select({ value: settings.value }).from(settings).where(eq(settings.name, name));
        return row?.value ?? null;
      }),

    setSetting: (name, value) =>
      guard(async () => {
        assertOpen();
        await db.insert(settings).values({ name, value }).onConflictDoUpdate({ target: settings.name, set: { value } });
      }),

    async flush() {
      if (!closed) await commits.flush();
    },

    reserve: (input, decide) =>
      guard(async () => {
        assertOpen();
        // No flush first (unlike SQLite): the funds read counts this process's queued requests at
        // their exact cost instead of their holds, which is what writing them first would give.
        return reservations.reserve(input, decide);
      }),

    purchasePlan: (purchase) =>
      guard(async () => {
        assertOpen();
        return plans.purchasePlan(purchase);
      }),

    activePlan: (accountId, at) =>
      guard(async () => {
        assertOpen();
        return plans.activePlan(accountId, at);
      }),

    releaseReservation: (id) =>
      guard(async () => {
        assertOpen();
        await reservations.releaseReservation(id);
      }),

    heartbeat: (instanceId, now) =>
      guard(async () => {
        assertOpen();
        await reservations.heartbeat(instanceId, now);
      }),

    releaseStaleReservations: (aliveSince) =>
      guard(async () => {
        assertOpen();
        return reservations.releaseStaleReservations(aliveSince);
      }),

    removeInstance: (instanceId) =>
      guard(async () => {
        assertOpen();
        await reservations.removeInstance(instanceId);
      }),

    async ping() {
      try {
        assertOpen();
        await client.unsafe("select 1");
      } catch (error) {
        const mapped = storeError(error);
        throw mapped instanceof UnavailableError ? mapped : new UnavailableError("storage unavailable", { cause: error });
      }
    },

    async close() {
      if (closed) return;
      closed = true; // new writes are refused from here
      await commits.stop();
      await reservations.stop();
      await client.close();
    },
  };
  return repository;
}
