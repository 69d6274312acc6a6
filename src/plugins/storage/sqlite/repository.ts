import type { Database } from "bun:sqlite";
import { UnavailableError } from "../../../core/errors.ts";
import { createLogger, type Logger } from "../../../core/log.ts";
import type { Generation, Repository, StoreLifecycle } from "../repository.ts";
import { StoreGate } from "../shared/gate.ts";
import { createGroupCommit, type GroupCommit } from "../shared/group-commit.ts";
import { PendingGenerations } from "../shared/pending.ts";
import { createSqliteAccounts } from "./accounts.ts";
import { startCheckpointer } from "./checkpointer.ts";
import { isBusy, isPermanent } from "./errors.ts";
import { createSqliteInstances, primaryHeldInstances } from "./instances.ts";
import { createSqliteKeys } from "./keys.ts";
import { createSqliteLedger } from "./ledger.ts";
import { createSqliteMetering } from "./metering.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import { startMeteringThread } from "./metering-thread.ts";
import type { MeteringThreadFaults } from "./metering-worker.ts";
import { isInMemoryPath, openSqlite, type OpenSqliteOptions } from "./open.ts";
import { createSqlitePayments } from "./payments.ts";
import { createSqlitePlans, sqlitePlanStore } from "./plans.ts";
import { lockForHolds } from "./process-lock.ts";
import { createSqliteReservations, sqliteReservationStore, type ReservationBook, type SqliteHoldsMode } from "./reservations.ts";
import { createPrimaryReservations } from "./primary-holds.ts";
import type { WorkerLink } from "../../../core/workers.ts";
import { createSqliteSessions } from "./sessions.ts";
import { createSqliteSettings } from "./settings.ts";
import { createSqliteUsers } from "./users.ts";

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
  holds?: SqliteHoldsMode;
  /** `primary` holds: the channel to the primary that keeps them. */
  primary?: WorkerLink;
  /** WAL checkpoints on a thread of their own every this many ms (default 500); 0: the writer checkpoints itself. */
  checkpointIntervalMs?: number;
  /**
   * The group commit's transactions on a thread of their own (metering-thread.ts), on a file with `process` or `primary`
   * holds (`shared` ones are rows the metering transaction deletes on the event loop's connection). Default false: it
   * measured no gain on two cores (docs/performance.md).
   */
  meteringThread?: boolean;
  /** Tests only: what the metering thread does between a batch's COMMIT and its reply. */
  meteringThreadFaults?: MeteringThreadFaults;
  log?: Logger;
}

/**
 * The embedded SQLite store: WAL, migrations at open, group-committed metering. Opens the file and
 * the pieces every domain shares (the queue of metered generations, the group commit, the holds),
 * then composes one slice per domain (accounts.ts, ledger.ts, keys.ts, metering.ts, ...).
 */
export function createSqliteRepository(path: string, options: SqliteRepositoryOptions = {}): Repository {
  const flushIntervalMs = Math.max(1, options.flushIntervalMs ?? 5);
  const maxBatch = Math.max(1, options.maxBatch ?? 512);
  const log = options.log ?? createLogger("storage");
  const holds = options.holds ?? "shared";
  const { client, db } = openSqlite(path, options); // creates the file's directory: lock after
  let lock: { release(): void } | null = null;
  try {
    // `primary`: the primary holds the file's lock for its workers.
    lock = isInMemoryPath(path) || holds === "primary" ? null : lockForHolds(path, holds);
  } catch (error) {
    client.close();
    throw error;
  }
  const checkpointIntervalMs = options.checkpointIntervalMs ?? 500;
  const checkpointer = isInMemoryPath(path) || checkpointIntervalMs <= 0 ? null : startCheckpointer(client, path, { intervalMs: checkpointIntervalMs, log });
  const writer = createMeteringWriter(db, client, { holdsInTable: holds === "shared" });
  const pending = new PendingGenerations();
  const gate = new StoreGate();

  const thread =
    options.meteringThread && holds !== "shared" && !isInMemoryPath(path)
      ? startMeteringThread(path, { busyTimeoutMs: options.busyTimeoutMs ?? 1000, faults: options.meteringThreadFaults, log })
      : null;
  // Filled in below: the reservations read stored funds through it, and the group commit needs the reservations.
  let commits: GroupCommit;
  // Without the thread a batch is written and settled in one turn: reads run as they are, nothing prepared for them.
  const stored: StoredView = thread ? storedView(client, () => commits) : (read) => read();

  const heldHere = holds === "primary" ? null : createSqliteReservations(client, pending, holds, options.busyTimeoutMs ?? 1000, stored);
  const heldInPrimary = heldHere ? null : createPrimaryReservations(options.primary!);
  const reservations: ReservationBook = heldHere ?? heldInPrimary!;
  const plans = createSqlitePlans(client, {
    availableShift: reservations.availableShift,
    queuedDebits: (id) => pending.accountDebits(id),
    stored,
  });
  // Other processes write the file (workers, shared holds): a timer's commit that finds the lock taken fails at once
  // and is tried again a millisecond later, instead of SQLite's busy handler sleeping the event loop (1, 2, 5 ms …).
  const busyWaitOn = `PRAGMA busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 1000))}`;
  function writeBatch(batch: readonly Generation[], background: boolean): void | Promise<void> {
    if (thread?.alive) return thread.write(batch);
    if (background && holds !== "process") {
      client.exec("PRAGMA busy_timeout = 0");
      try {
        writer.write(batch);
      } finally {
        client.exec(busyWaitOn);
      }
    } else writer.write(batch);
  }
  commits = createGroupCommit({
    pending,
    write: writeBatch,
    isPermanent,
    isBusy,
    onWritten: (batch) => reservations.forgetWritten(batch.map((g) => g.id)),
    flushIntervalMs,
    maxBatch,
    log,
  });

  const lifecycle: StoreLifecycle = {
    async ping() {
      try {
        gate.assertOpen();
        client.query("select 1").get();
      } catch (error) {
        throw error instanceof UnavailableError ? error : new UnavailableError("storage unavailable", { cause: error });
      }
    },

    async close() {
      if (gate.closed) return;
      gate.closed = true; // new writes are refused from here; reads keep working until the file closes
      await commits.stop();
      await thread?.stop();
      await checkpointer?.stop();
      client.close();
      lock?.release();
    },

    onCommit: (listener) => commits.onCommit(listener),
  };

  return {
    ...createSqliteAccounts(db, gate),
    ...createSqliteLedger(db, pending, gate, reservations.storedChanged, stored),
    ...createSqliteKeys(db, pending, gate, stored),
    ...createSqliteMetering(client, db, pending, commits, gate, reservations.markSettled, stored),
    ...sqliteReservationStore(reservations, gate),
    ...sqlitePlanStore(plans, gate, reservations.storedChanged, heldInPrimary?.holdForPurchase),
    ...(heldHere ? createSqliteInstances(heldHere, gate) : primaryHeldInstances(gate)),
    ...createSqliteSettings(db, gate),
    ...createSqliteUsers(db, gate),
    ...createSqliteSessions(db, gate),
    ...createSqlitePayments(client, gate, plans, reservations.storedChanged),
    ...lifecycle,
  };
}

/** Runs a read of stored figures to which the caller adds the queued generations (see `storedView`). */
export type StoredView = <T>(read: () => T) => T;

/**
 * Reads that add this process's queued generations to stored figures must not count a batch twice. A batch written
 * on the event loop is settled in the same turn, so no read sees it both stored and queued. A batch written on the
 * metering thread may commit at any moment: the read then runs in one snapshot with a probe of the batch's last row
 * (a batch is all or nothing, and a prefix of the queue), and a batch found stored is settled there and then, before
 * the caller adds what is still queued.
 */
function storedView(client: Database, commits: () => GroupCommit): StoredView {
  const probe = client.prepare<{ stored: number }, [string]>("select exists(select 1 from generations where id = ?) as stored");
  function settleIfStored(batch: readonly Generation[]): void {
    if (probe.get(batch[batch.length - 1]!.id)?.stored === 1) commits().settleWriting();
  }
  return function stored<T>(read: () => T): T {
    const batch = commits().writing();
    if (batch === null) return read();
    if (client.inTransaction) {
      // The caller's transaction: its snapshot (a write transaction's is the newest, and holds the lock) for both.
      settleIfStored(batch);
      return read();
    }
    client.exec("BEGIN");
    try {
      settleIfStored(batch);
      return read();
    } finally {
      client.exec("COMMIT");
    }
  };
}
