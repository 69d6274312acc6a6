import type { Database } from "bun:sqlite";
import { GatewayError, UnavailableError } from "../../../core/errors.ts";
import type { Funds, Generation, ReservationInput, ReservationStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { failClosed } from "./errors.ts";
import { spendBucketStart } from "../shared/spend-buckets.ts";
import { addTo } from "../shared/pending.ts";
import type { StoredView } from "./repository.ts";

/**
 * Budget reservations on SQLite. Available funds = credits − committed debits − every hold, where a
 * settled request's hold is swapped for its queued debit until the group commit writes it.
 * - shared mode: holds are rows; `reserve` runs in one IMMEDIATE transaction (the write lock) per
 *   event-loop turn, so requests from this process or another on the same file see each other's holds;
 *   a request's row is deleted in the group commit that writes its debit (metering-writer).
 * - process mode: holds live in this process's memory, decided at once; the file is locked against
 *   other gateway processes (process-lock.ts), so no one else can spend the same funds.
 */
interface PendingReservation {
  input: ReservationInput;
  decide: (funds: Funds) => number;
  resolve(amount: number): void;
  reject(error: unknown): void;
  amount?: number;
  refusal?: GatewayError;
}

/**
 * What this process knows that the database does not yet: requests settled but not yet written
 * (group commit). Their holds are still in the table and their debits still in memory; this process
 * counts the debit instead of the hold, other processes keep seeing the (larger) hold.
 */
export interface PendingSettlements {
  /** Debits queued for the account / key, not yet written. */
  accountDebits(accountId: string): number;
  accountDebitsSince(accountId: string, since: number): number;
  keySpend(keyId: string): number;
}

/**
 * Where holds live. `shared`: rows of the `reservations` table, decided in IMMEDIATE transactions, so
 * several processes on one file see each other's. `process`: this process's memory only (no write per
 * request); valid only while no other process serves from the file (see process-lock.ts).
 */
export type HoldsMode = "shared" | "process";

/** Where a SQLite repository's holds live: `primary` is the workers' mode (primary-holds.ts), the others are above. */
export type SqliteHoldsMode = HoldsMode | "primary";

const STORED_FUNDS_TTL_MS = 1000;

/** A refusal from `decide` stays the answer; any other failure is the store's, retried by the client. */
function asRefusalOrBusy(error: unknown): GatewayError {
  return error instanceof GatewayError
    ? error
    : new UnavailableError("the store is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause: error });
}

/** The statements of the reservations, prepared once. */
function prepareStatements(client: Database) {
  return {
    accountAvailable: client.prepare<{ available: number }, [string, string]>(
      `select a.total_credits_nano - a.total_debits_nano
              - coalesce((select sum(r.amount_nano) from reservations r where r.account_id = ?), 0) as available
         from accounts a where a.id = ?`,
    ),
    keyAvailable: client.prepare<{ available: number | null }, [string, string]>(
      `select k.limit_nano - k.usage_nano
              - coalesce((select sum(r.amount_nano) from reservations r where r.key_id = ?), 0) as available
         from api_keys k where k.id = ?`,
    ),
    windowSpend: client.prepare<{ spent: number; oldest: number | null }, [string, number]>(
      `select coalesce(sum(cost_nano), 0) as spent, min(bucket_start) as oldest from spend_buckets where account_id = ? and bucket_start >= ?`,
    ),
    accountReserved: client.prepare<{ reserved: number }, [string]>(
      `select coalesce(sum(amount_nano), 0) as reserved from reservations where account_id = ?`,
    ),
    // By id: a second reservation of a request extends its hold (Repository.reserve).
    insert: client.prepare(
      `insert into reservations (id, account_id, key_id, amount_nano, instance_id, created_at) values (?, ?, ?, ?, ?, ?)
         on conflict (id) do update set amount_nano = reservations.amount_nano + excluded.amount_nano`,
    ),
    remove: client.prepare(`delete from reservations where id = ?`),
    heartbeat: client.prepare(
      `insert into gateway_instances (id, heartbeat_at) values (?, ?) on conflict (id) do update set heartbeat_at = excluded.heartbeat_at`,
    ),
    releaseStale: client.prepare(
      `delete from reservations where instance_id not in (select id from gateway_instances where heartbeat_at >= ?)`,
    ),
    forgetStale: client.prepare(`delete from gateway_instances where heartbeat_at < ?`),
    releaseInstance: client.prepare(`delete from reservations where instance_id = ?`),
    forgetInstance: client.prepare(`delete from gateway_instances where id = ?`),
    holdRows: client.prepare<{ count: number; amount: number }, []>(`select count(*) as count, coalesce(sum(amount_nano), 0) as amount from reservations`),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

/** This process's live holds, and the part of them whose requests are settled but not yet written. */
class HoldBook {
  private readonly mine = new Map<string, { accountId: string; keyId: string; amount: number; settled: boolean }>();
  readonly settledByAccount = new Map<string, number>();
  private readonly settledByKey = new Map<string, number>();
  /** Process mode: the holds themselves, per account and key (the table has none of them). */
  readonly heldByAccount = new Map<string, number>();
  private readonly heldByKey = new Map<string, number>();

  constructor(
    readonly pending: PendingSettlements,
    readonly inProcess: boolean,
  ) {}

  /** Funds as this process sees them: the stored figure, settled holds swapped for their queued debits. */
  accountShift(accountId: string): number {
    return (this.settledByAccount.get(accountId) ?? 0) - this.pending.accountDebits(accountId) - (this.heldByAccount.get(accountId) ?? 0);
  }
  keyShift(keyId: string): number {
    return (this.settledByKey.get(keyId) ?? 0) - this.pending.keySpend(keyId) - (this.heldByKey.get(keyId) ?? 0);
  }

  /** A hold granted (written to the table first in shared mode), or an existing one extended. */
  took(input: ReservationInput, amount: number): void {
    if (this.inProcess) {
      addTo(this.heldByAccount, input.accountId, amount);
      addTo(this.heldByKey, input.keyId, amount);
    }
    const hold = this.mine.get(input.id);
    if (hold) {
      // An extension (metering asks before it settles the request; counted as settled if it already was).
      hold.amount += amount;
      if (hold.settled) {
        addTo(this.settledByAccount, hold.accountId, amount);
        addTo(this.settledByKey, hold.keyId, amount);
      }
    } else this.mine.set(input.id, { accountId: input.accountId, keyId: input.keyId, amount, settled: false });
  }

  has(id: string): boolean {
    return this.mine.has(id);
  }

  /** Part of a hold given back (its request decided to hold less); the hold itself stays until written or released. */
  shrink(id: string, by: number): void {
    const hold = this.mine.get(id);
    if (!hold || by <= 0) return;
    const amount = Math.min(by, hold.amount);
    hold.amount -= amount;
    if (this.inProcess) {
      addTo(this.heldByAccount, hold.accountId, -amount);
      addTo(this.heldByKey, hold.keyId, -amount);
    }
    if (hold.settled) {
      addTo(this.settledByAccount, hold.accountId, -amount);
      addTo(this.settledByKey, hold.keyId, -amount);
    }
  }

  markSettled(id: string): void {
    const hold = this.mine.get(id);
    if (!hold || hold.settled) return;
    hold.settled = true;
    addTo(this.settledByAccount, hold.accountId, hold.amount);
    addTo(this.settledByKey, hold.keyId, hold.amount);
  }

  /** This process's holds (count, sum), and the part of them settled (their debit queued, the hold still counted until written). */
  tally(): { count: number; amount: number; settledCount: number; settledAmount: number } {
    let count = 0;
    let amount = 0;
    let settledCount = 0;
    let settledAmount = 0;
    for (const hold of this.mine.values()) {
      count += 1;
      amount += hold.amount;
      if (hold.settled) {
        settledCount += 1;
        settledAmount += hold.amount;
      }
    }
    return { count, amount, settledCount, settledAmount };
  }

  unsettle(id: string): void {
    const hold = this.mine.get(id);
    if (!hold) return;
    this.mine.delete(id);
    if (this.inProcess) {
      addTo(this.heldByAccount, hold.accountId, -hold.amount);
      addTo(this.heldByKey, hold.keyId, -hold.amount);
    }
    if (hold.settled) {
      addTo(this.settledByAccount, hold.accountId, -hold.amount);
      addTo(this.settledByKey, hold.keyId, -hold.amount);
    }
  }
}

/**
 * Stored figures read once per account / key / window, then kept: for one batch in shared mode (kept
 * current as the batch inserts holds; inside the IMMEDIATE transaction nothing else changes them), or
 * until this process writes to the store in process mode (`ProcessFunds`).
 */
class StoredFunds {
  private readonly accounts = new Map<string, number>();
  private readonly keys = new Map<string, number>();
  private readonly reserved = new Map<string, number>();
  private readonly spent = new Map<string, { spent: number; oldest: number | null }>();
  /** A batch was written since these figures were read (`ProcessFunds.stale`): they no longer match what is queued. */
  outdated = false;

  constructor(
    private readonly statements: Statements,
    private readonly holds: HoldBook,
    private readonly stored: StoredView = readNow,
  ) {}

  account(accountId: string): number {
    const stored = this.readOnce(this.accounts, accountId, () => this.statements.accountAvailable.get(accountId, accountId)?.available ?? 0);
    return stored + this.holds.accountShift(accountId);
  }
  key(keyId: string): number {
    return this.readOnce(this.keys, keyId, () => this.statements.keyAvailable.get(keyId, keyId)?.available ?? 0) + this.holds.keyShift(keyId);
  }
  reservedBy(accountId: string): number {
    const stored = this.readOnce(this.reserved, accountId, () => this.statements.accountReserved.get(accountId)?.reserved ?? 0);
    return stored + (this.holds.heldByAccount.get(accountId) ?? 0);
  }
  spentSince(accountId: string, bucketStart: number): { spent: number; oldest: number | null } {
    return this.readOnce(this.spent, accountId + "\u0000" + bucketStart, () => this.statements.windowSpend.get(accountId, bucketStart) ?? { spent: 0, oldest: null });
  }

  /**
   * The cached figure, read (and kept) the first time. A read that settles the metering thread's batch (it found it
   * stored) outdates the figures read before it, which count that batch as queued: the decision starts again.
   */
  private readOnce<V>(cache: Map<string, V>, key: string, read: () => V): V {
    let value = cache.get(key);
    if (value === undefined) {
      value = this.stored(read);
      if (this.outdated) throw new FundsMoved();
      cache.set(key, value);
    }
    return value;
  }
  /** A hold just inserted in the table: what the stored figures would now say. */
  held(input: ReservationInput, amount: number): void {
    const account = this.accounts.get(input.accountId);
    if (account !== undefined) this.accounts.set(input.accountId, account - amount);
    const key = this.keys.get(input.keyId);
    if (key !== undefined) this.keys.set(input.keyId, key - amount);
    const reserved = this.reserved.get(input.accountId);
    if (reserved !== undefined) this.reserved.set(input.accountId, reserved + amount);
  }
}

/**
 * Process mode: the stored figures are read once and kept until this process writes to the store
 * again (`storedChanged`: a metering commit, a credit, a plan, released holds), or for at most
 * STORED_FUNDS_TTL_MS, which bounds how long an edit made behind the gateway's back goes unseen.
 */
class ProcessFunds {
  private funds: StoredFunds | null = null;
  private until = 0;

  constructor(
    private readonly statements: Statements,
    private readonly holds: HoldBook,
    private readonly stored: StoredView,
  ) {}

  current(): StoredFunds {
    const now = performance.now();
    if (this.funds === null || now >= this.until) {
      this.funds = new StoredFunds(this.statements, this.holds, this.stored);
      this.until = now + STORED_FUNDS_TTL_MS;
    }
    return this.funds;
  }

  stale(): void {
    if (this.funds !== null) this.funds.outdated = true;
    this.funds = null;
  }
}

/** Decides one request against `stored` and takes its hold (a row in shared mode, memory in process mode). */
function reserveOne(input: ReservationInput, decide: (funds: Funds) => number, stored: StoredFunds, holds: HoldBook, statements: Statements): number {
  const account = stored.account(input.accountId);
  const key = input.keyLimited ? stored.key(input.keyId) : null;
  const windows: Funds["windows"] = {};
  if (input.windows) {
    const reserved = stored.reservedBy(input.accountId);
    for (const [name, start] of Object.entries(input.windows)) {
      // Whole buckets from the one holding the window's start: never under-counts.
      const row = stored.spentSince(input.accountId, spendBucketStart(start));
      // Settled holds are swapped for their queued debits, counted only inside the window.
      const settled = holds.settledByAccount.get(input.accountId) ?? 0;
      const queued = holds.pending.accountDebitsSince(input.accountId, spendBucketStart(start));
      windows[name] = { spent: row.spent + reserved - settled + queued, oldestAt: row.oldest };
    }
  }
  const amount = decide({ account, key, windows });
  if (amount > 0) {
    if (!holds.inProcess) {
      statements.insert.run(input.id, input.accountId, input.keyId, amount, input.instanceId, input.createdAt);
      stored.held(input, amount);
    }
    holds.took(input, amount);
  }
  return amount;
}

/**
 * Shared mode's group commit of reservations: the requests that arrive in one event-loop turn are
 * decided in one IMMEDIATE transaction, in arrival order, each seeing the holds of those before it. A
 * refusal (a GatewayError from `decide`) is that request's answer; any other failure fails the whole batch.
 */
class SharedBatches {
  private readonly queue: PendingReservation[] = [];
  private scheduled = false;
  private readonly decideBatch: ReturnType<Database["transaction"]>;
  /** PRAGMAs act when prepared, not when run: each switch is an `exec` (a few µs, once per turn). */
  private readonly busyOn: string;
  /** When the write lock was first found taken for the batch being retried (performance.now()), 0 when it was not. */
  private busySince = 0;

  constructor(
    private readonly client: Database,
    private readonly statements: Statements,
    private readonly holds: HoldBook,
    private readonly busyTimeoutMs: number,
  ) {
    this.busyOn = `PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`;
    this.decideBatch = client.transaction((batch: PendingReservation[]) => {
      const stored = new StoredFunds(statements, holds);
      for (const item of batch) {
        try {
          item.amount = reserveOne(item.input, item.decide, stored, holds, statements);
        } catch (error) {
          if (!(error instanceof GatewayError)) throw error;
          item.refusal = error;
        }
      }
    });
  }

  enqueue(input: ReservationInput, decide: (funds: Funds) => number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ input, decide, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.runBatch);
      }
    });
  }

  private readonly runBatch = (): void => {
    this.scheduled = false;
    const batch = this.queue.splice(0);
    try {
      this.withoutBusyWait(() => this.decideBatch.immediate(batch));
    } catch (error) {
      if (this.retryWhenBusy(error, batch)) return;
      for (const item of batch) item.reject(asRefusalOrBusy(error));
      return;
    }
    this.busySince = 0;
    for (const item of batch) {
      if (item.refusal) item.reject(item.refusal);
      else item.resolve(item.amount ?? 0);
    }
  };

  /**
   * Runs `work` with SQLite's busy handler off: it would sleep the whole event loop (1 ms, 2 ms, 5 ms …) while
   * another process (a worker of the same port) holds the write lock. A busy batch is tried again instead.
   */
  private withoutBusyWait(work: () => void): void {
    this.client.exec("PRAGMA busy_timeout = 0");
    try {
      work();
    } finally {
      this.client.exec(this.busyOn);
    }
  }

  /**
   * The write lock was taken: the batch goes back to the head of the queue and is tried again on the next turns
   * (the event loop serves everything else meanwhile), until `busyTimeoutMs` has passed; then it fails (503).
   */
  private retryWhenBusy(error: unknown, batch: PendingReservation[]): boolean {
    if ((error as { code?: string } | null)?.code !== "SQLITE_BUSY") return false;
    const now = performance.now();
    if (this.busySince === 0) this.busySince = now;
    if (now - this.busySince > this.busyTimeoutMs) {
      this.busySince = 0;
      return false;
    }
    this.queue.unshift(...batch);
    if (!this.scheduled) {
      this.scheduled = true;
      // The first retries at once (the lock is usually held for a short transaction), later ones a millisecond apart.
      if (now - this.busySince < 2) setImmediate(this.runBatch);
      else setTimeout(this.runBatch, 1);
    }
    return true;
  }
}

export function createSqliteReservations(
  client: Database,
  pending: PendingSettlements,
  mode: HoldsMode = "shared",
  busyTimeoutMs = 1000,
  stored: StoredView = readNow,
) {
  const statements = prepareStatements(client);
  const holds = new HoldBook(pending, mode === "process");
  const processFunds = new ProcessFunds(statements, holds, stored);
  const batches = new SharedBatches(client, statements, holds, busyTimeoutMs);
  /** Process mode, at once: the amount held, or the refusal (or store failure, as a GatewayError) thrown. */
  function reserveNow(input: ReservationInput, decide: (funds: Funds) => number): number {
    try {
      try {
        return reserveOne(input, decide, processFunds.current(), holds, statements);
      } catch (error) {
        if (!(error instanceof FundsMoved)) throw error;
        // Once at most: the batch in flight is settled now, and no other starts before this turn ends.
        return reserveOne(input, decide, processFunds.current(), holds, statements);
      }
    } catch (error) {
      throw asRefusalOrBusy(error);
    }
  }

  return {
    reserve(input: ReservationInput, decide: (funds: Funds) => number): Promise<number> {
      // Process mode: nothing to write, nothing to wait for; decided at once, in call order.
      if (!holds.inProcess) return batches.enqueue(input, decide);
      try {
        return Promise.resolve(reserveNow(input, decide));
      } catch (error) {
        return Promise.reject(error);
      }
    },
    reserveNow,
    /** What to add to the stored available funds of the account for what only this process knows. */
    availableShift(accountId: string): number {
      return holds.accountShift(accountId);
    },
    /** This process changed funds in the store (credit, plan): figures read before are stale. */
    storedChanged(): void {
      processFunds.stale();
    },
    /** The request settled and its generation is queued: count its debit, not its hold, from now on. */
    markSettled({ id }: SettledRequest): void {
      holds.markSettled(id);
    },
    /** Generations written (their holds, when rows, went in the same transaction): debits are stored now. */
    forgetWritten(ids: Iterable<string>): void {
      processFunds.stale();
      for (const id of ids) holds.unsettle(id);
    },
    /** Process mode (the primary's holds): part of a hold given back. */
    shrink(id: string, by: number): void {
      holds.shrink(id, by);
    },
    /** Whether the request `id` holds funds here. */
    holds(id: string): boolean {
      return holds.has(id);
    },
    releaseReservation(id: string): void {
      if (!holds.inProcess) statements.remove.run(id);
      holds.unsettle(id);
    },
    /**
     * Holds outstanding. Process mode: this process's holds not yet settled (the table has none). Shared mode: every
     * row (every process on the file), less this process's settled ones (their rows go in the commit that writes the debit).
     */
    holdsOutstanding(): { count: number; amount: number } {
      const mine = holds.tally();
      if (holds.inProcess) return { count: mine.count - mine.settledCount, amount: mine.amount - mine.settledAmount };
      const rows = statements.holdRows.get() ?? { count: 0, amount: 0 };
      return { count: rows.count - mine.settledCount, amount: rows.amount - mine.settledAmount };
    },
    heartbeat(instanceId: string, now: number): void {
      statements.heartbeat.run(instanceId, now);
    },
    releaseStaleReservations(aliveSince: number): number {
      processFunds.stale();
      return client.transaction(() => {
        const released = statements.releaseStale.run(aliveSince).changes;
        statements.forgetStale.run(aliveSince);
        return released;
      }).immediate();
    },
    removeInstance(instanceId: string): void {
      processFunds.stale();
      client.transaction(() => {
        statements.releaseInstance.run(instanceId);
        statements.forgetInstance.run(instanceId);
      }).immediate();
    },
  };
}

/** Stored figures read as they are: the metering batches are written on the event loop (repository.ts, StoredView). */
function readNow<T>(read: () => T): T {
  return read();
}

/** Figures read for a decision were outdated by a read that settled a metering batch: the decision starts again. */
class FundsMoved extends Error {}

export type SqliteReservations = ReturnType<typeof createSqliteReservations>;

/** A request whose generation is queued (not yet written): its debit replaces its hold from now on. */
export type SettledRequest = Pick<Generation, "id" | "accountId" | "keyId" | "totalCost" | "createdAt">;

/** What the repository's slices use of the holds, kept in this process's file or memory, or in the primary (primary-holds.ts). */
export interface ReservationBook {
  reserve(input: ReservationInput, decide: (funds: Funds) => number): Promise<number>;
  availableShift(accountId: string): number;
  storedChanged(): void;
  markSettled(settled: SettledRequest): void;
  forgetWritten(ids: Iterable<string>): void;
  releaseReservation(id: string): void;
  holdsOutstanding(): { count: number; amount: number } | Promise<{ count: number; amount: number }>;
}

/** The reservation slice of the store: holds taken and dropped, failing closed on a driver failure. */
export function sqliteReservationStore(reservations: ReservationBook, gate: StoreGate): ReservationStore {
  return {
    // Not async: the reservation's own promise is returned as is (an async wrapper adds microtask turns per request).
    reserve(input, decide) {
      if (gate.closed) return Promise.reject(gate.closedError());
      return reservations.reserve(input, decide);
    },

    async releaseReservation(id) {
      gate.assertOpen();
      failClosed(() => reservations.releaseReservation(id));
    },

    async holdsOutstanding() {
      gate.assertOpen();
      return reservations.holdsOutstanding();
    },
  };
}
