import type { SQL } from "bun";
import type { Funds, ReservationInput, ReservationStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { spendBucketStart } from "../shared/spend-buckets.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import { guard, sqlState } from "./errors.ts";
import { num, numOrNull, storedIdsSql } from "./overlay.ts";
import { pipelined, pipelinedTransaction } from "./pipeline.ts";

type Tx = SQL;

/**
 * The row locks of a decision: accounts, then keys, each in the ORDER BY of the statement (the same
 * order the metering writer locks them in), so that batches of any process never deadlock.
 */
const LOCK_ACCOUNTS = `select id from accounts where id = any($1::text[]) order by id for no key update`;
const LOCK_KEYS = `select id from api_keys where id = any($1::text[]) order by id for no key update`;

/**
 * Funds of a whole batch in ONE statement (one snapshot), issued after the locks are held: per account
 * its balance and holds, per key its room and holds, per (account, window start) the spend, plus which
 * of this process's queued generations ($3) are already stored. The holds leave out those of the
 * queued generations: each of them counts at its exact cost instead (added here when it is not stored
 * yet; once stored, its hold is gone and its debit is in the totals, in the same commit).
 * Amounts travel as JSON numbers (exact below 2^53 nano-USD, like `Number()` of the int8 text).
 */
/** Holds per account or key of `ids`, less those of this process's queued generations ($3). */
const heldPer = (column: "account_id" | "key_id", ids: string) => `coalesce((select json_agg(json_build_array(r.${column}, r.held))
              from (select ${column}, sum(amount_nano) as held from reservations
                     where ${column} = any(${ids}::text[]) and id not in (select unnest($3::text[]))
                     group by ${column}) r), '[]')`;

const FUNDS = `
select
  coalesce((select json_agg(json_build_array(a.id, a.total_credits_nano - a.total_debits_nano))
              from accounts a where a.id = any($1::text[])), '[]') as accounts,
  ${heldPer("account_id", "$1")} as account_holds,
  coalesce((select json_agg(json_build_array(k.id, k.limit_nano - k.usage_nano))
              from api_keys k where k.id = any($2::text[])), '[]') as keys,
  ${heldPer("key_id", "$2")} as key_holds,
  ${storedIdsSql("$3")} as stored,
  coalesce((select json_agg(json_build_array(s.spent, s.oldest) order by w.ord)
              from unnest($4::text[], $5::bigint[]) with ordinality as w(account_id, start, ord)
              cross join lateral (select coalesce(sum(cost_nano), 0) as spent, min(bucket_start) as oldest
                                    from spend_buckets where account_id = w.account_id and bucket_start >= w.start) s), '[]') as windows`;

/** By id: a second reservation of a request extends its hold (Repository.reserve). */
const INSERT_HOLDS = `
insert into reservations (id, account_id, key_id, amount_nano, instance_id, created_at)
select * from unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[])
on conflict (id) do update set amount_nano = reservations.amount_nano + excluded.amount_nano`;

export interface FundsScope {
  accountId: string;
  /** The key whose budget is checked, or null. */
  keyId: string | null;
  windows?: Record<string, number>;
}

export interface FundsRead extends Funds {
  /** credits − debits, this process's queued debits included. */
  balance: number;
}

const windowKey = (accountId: string, bucketStart: number) => accountId + "\u0000" + bucketStart;

/**
 * The funds of a set of accounts and keys as this process sees them inside a decision: what the store
 * holds (read after the row locks), this process's queued generations counted at their exact cost
 * instead of their holds (the commit swaps one for the other), and the holds taken so far by the batch
 * (`hold`). Made by `fundsStatements`.
 */
export class FundsView {
  /** credits − debits per existing account. */
  private readonly balances = new Map<string, number>();
  /** Holds per account (every account in scope, existing or not). */
  private readonly accountHeld = new Map<string, number>();
  /** limit − usage per key in scope; null when the key is unknown or has no limit. */
  private readonly keyRooms = new Map<string, number | null>();
  private readonly keyHeld = new Map<string, number>();
  /** Spend and oldest bucket per (account, window bucket start). */
  private readonly windowSpend = new Map<string, { spent: number; oldest: number | null }>();

  /** @internal */
  constructor(row: any, queued: PendingGenerations["queue"], windowPairs: readonly (readonly [string, number])[]) {
    for (const [id, balance] of row.accounts as [string, number][]) this.balances.set(id, num(balance));
    for (const [id, held] of row.account_holds as [string, number][]) this.accountHeld.set(id, num(held));
    for (const [id, room] of row.keys as [string, number | null][]) this.keyRooms.set(id, numOrNull(room));
    for (const [id, held] of row.key_holds as [string, number][]) this.keyHeld.set(id, num(held));
    windowPairs.forEach(([accountId, start], i) => {
      const w = (row.windows as [number, number | null][])[i];
      this.windowSpend.set(windowKey(accountId, start), { spent: num(w?.[0]), oldest: numOrNull(w?.[1]) });
    });

    const stored = new Set<string>(row.stored as string[]);
    for (const g of queued) {
      if (stored.has(g.id)) continue;
      const balance = this.balances.get(g.accountId);
      if (balance !== undefined) this.balances.set(g.accountId, balance - g.totalCost);
      const room = this.keyRooms.get(g.keyId);
      if (room !== undefined && room !== null) this.keyRooms.set(g.keyId, room - g.totalCost);
      if (g.totalCost > 0) {
        const bucket = spendBucketStart(g.createdAt);
        for (const [accountId, start] of windowPairs) {
          if (accountId !== g.accountId || bucket < start) continue;
          const w = this.windowSpend.get(windowKey(accountId, start))!;
          w.spent += g.totalCost;
          w.oldest = w.oldest === null ? bucket : Math.min(w.oldest, bucket);
        }
      }
    }
  }

  /** What a new reservation may use. `scope.keyId` null: the key's budget is not checked. */
  funds(scope: FundsScope): FundsRead {
    const { accountId, keyId } = scope;
    const balance = this.balances.get(accountId);
    const held = this.accountHeld.get(accountId) ?? 0;
    let key: number | null = null;
    if (keyId !== null) {
      const room = this.keyRooms.get(keyId);
      key = room === undefined || room === null ? 0 : room - (this.keyHeld.get(keyId) ?? 0);
    }
    const windows: Funds["windows"] = {};
    for (const [name, start] of Object.entries(scope.windows ?? {})) {
      const w = this.windowSpend.get(windowKey(accountId, spendBucketStart(start)));
      windows[name] = { spent: (w?.spent ?? 0) + held, oldestAt: w?.oldest ?? null };
    }
    return { balance: balance ?? 0, account: balance === undefined ? 0 : balance - held, key, windows };
  }

  /** A hold taken by the batch: later decisions of the batch see it. */
  hold(accountId: string, keyId: string, amount: number): void {
    this.accountHeld.set(accountId, (this.accountHeld.get(accountId) ?? 0) + amount);
    if (this.keyRooms.has(keyId)) this.keyHeld.set(keyId, (this.keyHeld.get(keyId) ?? 0) + amount);
  }
}

/**
 * Locks the accounts and then the keys (sorted), and reads their funds in a statement issued AFTER the
 * locks: in READ COMMITTED its snapshot is taken once the locks are held, so it sees every hold and
 * debit committed by the previous holder (reading in the locking statement itself would use a snapshot
 * from before the wait, and overspend). The statements are meant to be pipelined (one round trip): the
 * server still runs them in order. `finish` turns their results into the view.
 */
export function fundsStatements(
  tx: Tx,
  pending: PendingGenerations,
  accountIds: readonly string[],
  keyIds: readonly string[],
  windowPairs: readonly (readonly [string, number])[],
): { statements: PromiseLike<unknown>[]; finish(results: readonly unknown[]): FundsView } {
  const accounts = new Set(accountIds);
  const keys = new Set(keyIds);
  // Captured before the statement: a commit landing meanwhile is seen by the `stored` probe.
  const queued = pending.queue.filter((g) => accounts.has(g.accountId) || keys.has(g.keyId));
  const statements: PromiseLike<unknown>[] = [
    // Plain index scans, for the rest of the transaction (a tagged template: Bun pipelines it). The
    // reservations table churns (a row per request, deleted by the metering commit): a bitmap scan
    // visits every dead index entry of a busy account until autovacuum comes by, a plain index scan
    // marks them dead once and skips them from then on, and the planner, fooled by the table's
    // bloat, picks bitmap or sequential scans of it.
    tx`select set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`,
    tx.unsafe(LOCK_ACCOUNTS, [[...accounts]]),
  ];
  if (keys.size > 0) statements.push(tx.unsafe(LOCK_KEYS, [[...keys]]));
  statements.push(
    tx.unsafe(FUNDS, [
      [...accounts],
      [...keys],
      queued.map((g) => g.id),
      windowPairs.map(([accountId]) => accountId),
      windowPairs.map(([, start]) => start),
    ]),
  );
  return {
    statements,
    finish(results) {
      const [row] = results[results.length - 1] as any[];
      return new FundsView(row, queued, windowPairs);
    },
  };
}

/**
 * What a new reservation (or a plan purchase) may use, as if this process's queued generations were
 * already written. Locks the account (and the key) row first, in the caller's transaction.
 */
export async function readFunds(tx: Tx, pending: PendingGenerations, scope: FundsScope): Promise<FundsRead> {
  const windows = Object.values(scope.windows ?? {}).map((start) => [scope.accountId, spendBucketStart(start)] as const);
  const read = fundsStatements(tx, pending, [scope.accountId], scope.keyId === null ? [] : [scope.keyId], windows);
  return read.finish(await pipelined(read.statements)).funds(scope);
}

interface PendingReservation {
  input: ReservationInput;
  decide: (funds: Funds) => number;
  resolve(amount: number): void;
  reject(error: unknown): void;
  amount: number;
  refusal?: unknown;
}

/** Reservations decided in one transaction at most; the rest wait for the next. */
const MAX_BATCH = 256;
/** Batch transactions in flight at once per process; requests arriving meanwhile form the next batch. */
const MAX_IN_FLIGHT = 2;

/** Deadlock / serialization failure: nothing was written, the batch may simply run again. */
const isRetryable = (error: unknown) => {
  const state = sqlState(error);
  return state === "40P01" || state === "40001";
};

const ORPHAN_RETRY_MIN_MS = 50;
const ORPHAN_RETRY_MAX_MS = 1000;
/** Ids per delete (a long outage may leave many). */
const ORPHAN_SWEEP_MAX = 5000;

/**
 * Holds of refused requests that may still be stored (a batch whose COMMIT reply was lost, a release
 * that failed): deleted in the background, retried with backoff until the store answers. They belong
 * to requests that were answered with an error, so nothing else will ever release them, and a process
 * that keeps beating keeps them alive for every other process.
 */
function orphanedHolds(client: SQL) {
  const ids = new Set<string>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let delay = ORPHAN_RETRY_MIN_MS;
  let stopped = false;

  async function sweep(): Promise<void> {
    timer = null;
    const batch: string[] = [];
    for (const id of ids) {
      if (batch.length === ORPHAN_SWEEP_MAX) break;
      batch.push(id);
    }
    try {
      await client.unsafe(`delete from reservations where id = any($1::text[])`, [batch]);
      for (const id of batch) ids.delete(id);
      delay = ORPHAN_RETRY_MIN_MS;
      if (ids.size > 0) arm(0); // the next chunk
    } catch {
      delay = Math.min(ORPHAN_RETRY_MAX_MS, delay * 2);
      arm(delay);
    }
  }

  function arm(ms: number): void {
    if (timer !== null || stopped) return;
    timer = setTimeout(() => void sweep(), ms);
    timer.unref?.();
  }

  return {
    drop(list: readonly string[]): void {
      for (const id of list) ids.add(id);
      arm(0);
    },
    async stop(): Promise<void> {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      if (ids.size > 0) await client.unsafe(`delete from reservations where id = any($1::text[])`, [[...ids]]).catch(() => {});
    },
  };
}

/** The accounts, budgeted keys and (account, window bucket) pairs a batch decides on. */
function batchScope(batch: readonly PendingReservation[]) {
  const accountIds = new Set<string>();
  const keyIds = new Set<string>();
  const windowPairs = new Map<string, readonly [string, number]>();
  for (const { input } of batch) {
    accountIds.add(input.accountId);
    if (input.keyLimited) keyIds.add(input.keyId);
    for (const start of Object.values(input.windows ?? {})) {
      const bucket = spendBucketStart(start);
      windowPairs.set(windowKey(input.accountId, bucket), [input.accountId, bucket]);
    }
  }
  return { accountIds: [...accountIds].sort(), keyIds: [...keyIds].sort(), windowPairs: [...windowPairs.values()] };
}

/** Each request of the batch in arrival order, seeing the holds of those before it; returns those that hold funds. */
function decideInOrder(view: FundsView, batch: PendingReservation[]): PendingReservation[] {
  const holds: PendingReservation[] = [];
  for (const item of batch) {
    const { input } = item;
    item.refusal = undefined;
    item.amount = 0;
    try {
      const funds = view.funds({ accountId: input.accountId, keyId: input.keyLimited ? input.keyId : null, windows: input.windows });
      item.amount = item.decide({ account: funds.account, key: funds.key, windows: funds.windows });
    } catch (error) {
      // A refusal (or a fault of the caller's `decide`) answers this request only.
      item.refusal = error;
      continue;
    }
    if (item.amount > 0) {
      view.hold(input.accountId, input.keyId, item.amount);
      holds.push(item);
    }
  }
  return holds;
}

/** One batch's transaction: locks, funds read, decisions in memory, the holds and the COMMIT in one round trip. */
async function decideBatch(client: SQL, pending: PendingGenerations, batch: PendingReservation[]): Promise<void> {
  const scope = batchScope(batch);
  await pipelinedTransaction(client, async (tx) => {
    const read = fundsStatements(tx.sql, pending, scope.accountIds, scope.keyIds, scope.windowPairs);
    const view = read.finish(await tx.run(read.statements));
    const holds = decideInOrder(view, batch);
    await tx.commit(
      holds.length === 0
        ? []
        : [
            tx.sql.unsafe(INSERT_HOLDS, [
              holds.map((h) => h.input.id),
              holds.map((h) => h.input.accountId),
              holds.map((h) => h.input.keyId),
              holds.map((h) => h.amount),
              holds.map((h) => h.input.instanceId),
              holds.map((h) => h.input.createdAt),
            ]),
          ],
    );
  });
}

/** Decides a batch (retried once on a deadlock) and answers each of its requests. */
async function runBatch(client: SQL, pending: PendingGenerations, orphans: ReturnType<typeof orphanedHolds>, batch: PendingReservation[]): Promise<void> {
  try {
    try {
      await decideBatch(client, pending, batch);
    } catch (error) {
      if (!isRetryable(error)) throw error;
      await decideBatch(client, pending, batch); // once: sorted locks make this all but impossible
    }
  } catch (error) {
    // These requests are refused. When the connection went down around the COMMIT, their holds may
    // have been stored all the same: they are deleted as soon as the store answers again.
    // An extension's request keeps its first hold: its debit replaces it (metering-writer).
    orphans.drop(batch.filter((item) => !item.input.extension).map((item) => item.input.id));
    for (const item of batch) item.reject(error);
    return;
  }
  for (const item of batch) {
    if (item.refusal !== undefined) item.reject(item.refusal);
    else item.resolve(item.amount);
  }
}

/**
 * Budget reservations on Postgres, group-committed like the SQLite sibling: the requests that arrive
 * in one event-loop turn are decided in ONE READ COMMITTED transaction. It locks the batch's account
 * rows and then its budgeted key rows (FOR NO KEY UPDATE, sorted), reads the funds of all of them in
 * one statement issued after the locks, decides each request in arrival order in memory (each sees
 * the holds of those before it), inserts every hold in one statement and commits. A refusal (a
 * GatewayError from `decide`) answers only its request. Reservations of an account, from any process,
 * are still decided one transaction at a time by the row lock, and at most `MAX_IN_FLIGHT` batches
 * per process hold connections: the others queue in memory, not on the lock.
 */
export function createPostgresReservations(client: SQL, pending: PendingGenerations) {
  const orphans = orphanedHolds(client);
  const queue: PendingReservation[] = [];
  let scheduled = false;
  let inFlight = 0;

  function pump(): void {
    scheduled = false;
    while (queue.length > 0 && inFlight < MAX_IN_FLIGHT) {
      const batch = queue.splice(0, MAX_BATCH);
      inFlight += 1;
      void runBatch(client, pending, orphans, batch).finally(() => {
        inFlight -= 1;
        if (queue.length > 0) schedule();
      });
    }
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(pump);
  }

  return {
    reserve(input: ReservationInput, decide: (funds: Funds) => number): Promise<number> {
      return new Promise((resolve, reject) => {
        queue.push({ input, decide, resolve, reject, amount: 0 });
        schedule();
      });
    },

    async releaseReservation(id: string): Promise<void> {
      try {
        await client.unsafe(`delete from reservations where id = $1`, [id]);
      } catch (error) {
        orphans.drop([id]); // the hold must not outlive the outage: deleted once the store is back
        throw error;
      }
    },

    /** One last attempt at the holds still to delete; no more retries after it. */
    async stop(): Promise<void> {
      await orphans.stop();
    },

    /** Every process's hold rows, less those of this process's queued generations (their debits replace them in the commit). */
    async holdsOutstanding(): Promise<{ count: number; amount: number }> {
      const [row] = await client.unsafe(
        `select count(*) as count, coalesce(sum(amount_nano), 0) as amount from reservations where id <> all($1::text[])`,
        [pending.queue.map((g) => g.id)],
      );
      return { count: num(row?.count), amount: num(row?.amount) };
    },

    async heartbeat(instanceId: string, now: number): Promise<void> {
      await client.unsafe(
        `insert into gateway_instances (id, heartbeat_at) values ($1, $2)
           on conflict (id) do update set heartbeat_at = excluded.heartbeat_at`,
        [instanceId, now],
      );
    },

    async releaseStaleReservations(aliveSince: number): Promise<number> {
      return client.begin(async (tx) => {
        const released = await tx.unsafe(
          `delete from reservations where instance_id not in (select id from gateway_instances where heartbeat_at >= $1)`,
          [aliveSince],
        );
        await tx.unsafe(`delete from gateway_instances where heartbeat_at < $1`, [aliveSince]);
        return released.count;
      });
    },

    async removeInstance(instanceId: string): Promise<void> {
      await client.begin(async (tx) => {
        await tx.unsafe(`delete from reservations where instance_id = $1`, [instanceId]);
        await tx.unsafe(`delete from gateway_instances where id = $1`, [instanceId]);
      });
    },
  };
}

export type PostgresReservations = ReturnType<typeof createPostgresReservations>;

/** The reservation slice of the store: holds taken and dropped, store failures as `UnavailableError`. */
export function postgresReservationStore(reservations: PostgresReservations, gate: StoreGate): ReservationStore {
  return {
    reserve: (input, decide) =>
      guard(async () => {
        gate.assertOpen();
        // No flush first (unlike SQLite): the funds read counts this process's queued requests at
        // their exact cost instead of their holds, which is what writing them first would give.
        return reservations.reserve(input, decide);
      }),

    releaseReservation: (id) =>
      guard(async () => {
        gate.assertOpen();
        await reservations.releaseReservation(id);
      }),

    holdsOutstanding: () =>
      guard(async () => {
        gate.assertOpen();
        return reservations.holdsOutstanding();
      }),
  };
}
