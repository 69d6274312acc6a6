import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { UnavailableError } from "../../../core/errors.ts";
import { InsufficientFundsError } from "../errors.ts";
import type { PrimaryHost, PrimaryPart, WorkerLink } from "../../../core/workers.ts";
import { nanoToUsdString } from "../../../core/money.ts";
import type { Funds, ReservationInput } from "../repository.ts";
import { addTo } from "../shared/pending.ts";
import { lockForHolds } from "./process-lock.ts";
import { createSqliteReservations, type PendingSettlements, type SettledRequest } from "./reservations.ts";

/**
 * `primary` holds (SQLite with several workers, docs/workers.md): the budget holds of every worker live in the
 * primary's memory, decided one after another as in a gateway of one process (`process` mode), so no worker
 * writes the file to hold funds. The workers write only their group commits.
 *
 * The budget's decision (`decide(funds)`, a closure) stays in the worker. A reservation is one round trip:
 * 1. the worker asks the decision with unbounded funds, what the request would hold if money were no object;
 * 2. the primary holds that amount if it fits the account's (and a budgeted key's) funds, and answers the funds
 *    as they were before the hold: the figures one process would have decided on;
 * 3. the worker decides on those funds. The same amount: done. Less (a cap fitted the output, a spend window is
 *    near its cap): the hold shrinks to it. A refusal: the hold is dropped. More (the primary could not hold the
 *    unbounded amount, and the decision fits what is left): the worker asks for exactly that, and decides again.
 * So every hold is what the decision gives on the funds of its moment, less every hold before it, as in one
 * process; a hold the worker shrinks was counted whole by the requests decided meanwhile (never too little).
 *
 * The primary learns of the store's moves from the workers, each before anything else the worker sends after it:
 * a request settled (its debit, queued in the worker, counts instead of its hold, as in one process), the ids of
 * generations written (their debits are stored: drop their holds and queued debits, re-read the funds), a credit or
 * a plan written (re-read). A worker that exits leaves no holds: its unwritten generations die with it.
 */

const TOPIC_HOLD = "storage.hold";
const TOPIC_SHRINK = "storage.shrink";
const TOPIC_SETTLED = "storage.settled";
const TOPIC_WRITTEN = "storage.written";
const TOPIC_STALE = "storage.stale";
const TOPIC_OUTSTANDING = "storage.outstanding";

/** At most this many rounds of "hold what the decision now fits" before the request is answered 503. */
const MAX_ROUNDS = 4;

interface HoldAsk {
  input: ReservationInput;
  amount: number;
}

/** What the primary held of an ask and the funds it decided on; `error` when it could not read them. */
type HoldAnswer = { held: number; funds: Funds } | { error: string };

interface ShrinkAsk {
  id: string;
  by: number;
}

// ------------------------------------------------------------------------------------------------
// The primary's part
// ------------------------------------------------------------------------------------------------

/** A worker's settled request: its debit, queued there, counts instead of its hold until the worker has written it. */
interface QueuedDebit {
  accountId: string;
  keyId: string;
  cost: number;
  createdAt: number;
}

/** The debits the workers have queued but not yet written, by request id, summed per account and key. */
class QueuedDebits implements PendingSettlements {
  private readonly byAccount = new Map<string, Map<string, QueuedDebit>>();
  private readonly accountSums = new Map<string, number>();
  private readonly keySums = new Map<string, number>();

  add(id: string, debit: QueuedDebit): void {
    let mine = this.byAccount.get(debit.accountId);
    if (!mine) this.byAccount.set(debit.accountId, (mine = new Map()));
    if (mine.has(id)) return;
    mine.set(id, debit);
    addTo(this.accountSums, debit.accountId, debit.cost);
    addTo(this.keySums, debit.keyId, debit.cost);
  }

  /** The debit is written (or died with its worker): the stored figures have it, or never will. */
  remove(id: string, accountId: string | undefined): void {
    const mine = accountId === undefined ? undefined : this.byAccount.get(accountId);
    const debit = mine?.get(id);
    if (!debit) return;
    mine!.delete(id);
    if (mine!.size === 0) this.byAccount.delete(debit.accountId);
    addTo(this.accountSums, debit.accountId, -debit.cost);
    addTo(this.keySums, debit.keyId, -debit.cost);
  }

  accountDebits(accountId: string): number {
    return this.accountSums.get(accountId) ?? 0;
  }
  accountDebitsSince(accountId: string, since: number): number {
    let sum = 0;
    for (const debit of this.byAccount.get(accountId)?.values() ?? []) if (debit.createdAt >= since) sum += debit.cost;
    return sum;
  }
  keySpend(keyId: string): number {
    return this.keySums.get(keyId) ?? 0;
  }
}


/**
 * Serves the workers' holds from this (the primary) process. Locks the file as a `process`-mode gateway does, so no
 * gateway outside this primary can spend from it; opens its read connection at the first request (worker 0 has made
 * and migrated the file by then).
 */
export function servePrimaryHolds(path: string, host: PrimaryHost): PrimaryPart {
  mkdirSync(dirname(resolve(path)), { recursive: true });
  const lock = lockForHolds(path, "process");
  const queued = new QueuedDebits();
  let opened: { client: Database; reservations: ReturnType<typeof createSqliteReservations> } | null = null;
  const open = () => {
    if (opened) return opened.reservations;
    const client = new Database(path);
    client.exec("PRAGMA busy_timeout = 1000");
    opened = { client, reservations: createSqliteReservations(client, queued, "process") };
    return opened.reservations;
  };
  /** Each worker's holds (request id → account), so that those of a worker that exits are dropped. */
  const byWorker = new Map<number, Map<string, string>>();
  const heldBy = (worker: number) => {
    let ids = byWorker.get(worker);
    if (!ids) byWorker.set(worker, (ids = new Map()));
    return ids;
  };
  /** Holds (and queued debits) of requests written, released, or lost with their worker. */
  function forget(worker: number, ids: readonly string[]): void {
    const mine = byWorker.get(worker);
    for (const id of ids) {
      queued.remove(id, mine?.get(id));
      mine?.delete(id);
    }
    opened?.reservations.forgetWritten(ids);
  }

  host.serve(TOPIC_HOLD, (payload, from) => {
    const reservations = open();
    const answers: HoldAnswer[] = [];
    for (const ask of payload as HoldAsk[]) {
      let funds: Funds | undefined;
      try {
        const held = reservations.reserveNow(ask.input, function holdIfItFits(seen) {
          funds = seen;
          return ask.amount <= seen.account && (seen.key === null || ask.amount <= seen.key) ? ask.amount : 0;
        });
        if (held > 0) heldBy(from).set(ask.input.id, ask.input.accountId);
        answers.push({ held, funds: funds! });
      } catch (error) {
        // The file could not be read: this ask holds nothing; the others of the batch keep their answers.
        answers.push({ error: String(error) });
      }
    }
    return answers;
  });
  host.serve(TOPIC_SHRINK, (payload) => {
    const { id, by } = payload as ShrinkAsk;
    open().shrink(id, by);
    return null;
  });
  host.serve(TOPIC_SETTLED, (payload, from) => {
    const reservations = open();
    const mine = heldBy(from);
    for (const settled of payload as SettledRequest[]) {
      // Only a request still held here (its "written" may have overtaken this message).
      if (!mine.has(settled.id) || !reservations.holds(settled.id)) continue;
      queued.add(settled.id, { accountId: settled.accountId, keyId: settled.keyId, cost: settled.totalCost, createdAt: settled.createdAt });
      reservations.markSettled(settled);
    }
    return null;
  });
  host.serve(TOPIC_WRITTEN, (payload, from) => {
    open();
    forget(from, payload as string[]);
    return null;
  });
  host.serve(TOPIC_STALE, () => {
    open().storedChanged();
    return null;
  });
  host.serve(TOPIC_OUTSTANDING, () => open().holdsOutstanding());
  host.onWorkerExit((worker) => {
    const ids = byWorker.get(worker);
    if (!ids || ids.size === 0 || !opened) return;
    host.log.info("released the holds of a worker that exited", { worker, holds: ids.size });
    forget(worker, [...ids.keys()]);
    byWorker.delete(worker);
  });
  return {
    close() {
      opened?.client.close();
      lock.release();
    },
  };
}

// ------------------------------------------------------------------------------------------------
// The worker's part
// ------------------------------------------------------------------------------------------------

/** Funds that bound nothing: what a decision holds when money is no object. */
function unbounded(input: ReservationInput): Funds {
  const windows: Funds["windows"] = {};
  for (const name of Object.keys(input.windows ?? {})) windows[name] = { spent: 0, oldestAt: null };
  return { account: Number.MAX_SAFE_INTEGER, key: input.keyLimited ? Number.MAX_SAFE_INTEGER : null, windows };
}

/** A message the primary cannot take: it is gone, and this worker stops with it (its holds went with the primary). */
function ignoreGone(): void {}

function primaryUnavailable(cause: unknown): UnavailableError {
  return new UnavailableError("the store is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause });
}

/**
 * The reservations of a worker whose holds live in the primary: the same surface as `createSqliteReservations`
 * (repository.ts composes either). The asks of one event-loop turn go in one message.
 */
export function createPrimaryReservations(link: WorkerLink) {
  /** Settled requests of this turn, told in one message, before anything else this worker sends. */
  let settledQueue: SettledRequest[] = [];
  function sendSettled(): void {
    if (settledQueue.length === 0) return;
    const batch = settledQueue;
    settledQueue = [];
    link.call(TOPIC_SETTLED, batch).catch(ignoreGone);
  }

  /** Every message to the primary: the settled requests queued before it go first, so the primary sees them first. */
  function call<T>(topic: string, payload: unknown): Promise<T> {
    sendSettled();
    return link.call<T>(topic, payload);
  }

  let queue: { ask: HoldAsk; resolve(answer: { held: number; funds: Funds }): void; reject(error: unknown): void }[] = [];
  let scheduled = false;

  function sendQueue(): void {
    scheduled = false;
    const batch = queue;
    queue = [];
    call<HoldAnswer[]>(TOPIC_HOLD, batch.map((item) => item.ask)).then(
      (answers) =>
        batch.forEach((item, i) => {
          const answer = answers[i]!;
          if ("error" in answer) item.reject(primaryUnavailable(new Error(answer.error)));
          else item.resolve(answer);
        }),
      (error) => {
        // No answer in time: the primary may still hold these asks when it gets to them. The request ends refused,
        // with nothing of it to settle, so forget them after the asks (the channel keeps the order). An extension's
        // hold stays: its request goes on and settles, and its debit replaces the whole hold.
        const first = batch.filter((item) => !item.ask.input.extension).map((item) => item.ask.input.id);
        if (first.length > 0) tell(TOPIC_WRITTEN, first);
        for (const item of batch) item.reject(primaryUnavailable(error));
      },
    );
  }

  function hold(input: ReservationInput, amount: number): Promise<{ held: number; funds: Funds }> {
    return new Promise((resolve, reject) => {
      queue.push({ ask: { input, amount }, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(sendQueue);
      }
    });
  }

  /** Fire and forget: the channel keeps the order, so the primary applies it before any later ask of this worker. */
  function tell(topic: string, payload: unknown): void {
    call(topic, payload).catch(ignoreGone);
  }

  /** Gives back `by` of what this call held: the whole hold of a first reservation that ends holding nothing. */
  function giveBack(input: ReservationInput, by: number, keeping: number): void {
    if (by <= 0) return;
    if (keeping === 0 && !input.extension) tell(TOPIC_WRITTEN, [input.id]);
    else tell(TOPIC_SHRINK, { id: input.id, by } satisfies ShrinkAsk);
  }

  async function reserve(input: ReservationInput, decide: (funds: Funds) => number): Promise<number> {
    let amount = decide(unbounded(input));
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const { held, funds } = await hold(input, amount);
      let decided: number;
      try {
        decided = decide(funds);
      } catch (refusal) {
        giveBack(input, held, 0);
        throw refusal;
      }
      if (decided <= held) {
        giveBack(input, held - decided, decided);
        return decided;
      }
      // Nothing held (the amount did not fit) and the decision on these funds fits less, or the funds grew since the
      // last round: hold exactly what the decision now says.
      giveBack(input, held, 0);
      amount = decided;
    }
    throw primaryUnavailable(new Error(`the funds kept moving over ${MAX_ROUNDS} rounds`));
  }

  return {
    reserve(input: ReservationInput, decide: (funds: Funds) => number): Promise<number> {
      return reserve(input, decide);
    },
    /** The holds are in the primary; a plan bought from the balance holds its price there first (holdForPurchase). */
    availableShift(_accountId: string): number {
      return 0;
    },
    storedChanged(): void {
      tell(TOPIC_STALE, null);
    },
    /** The request's debit is queued here: the primary counts it instead of the hold until it is written. */
    markSettled({ id, accountId, keyId, totalCost, createdAt }: SettledRequest): void {
      settledQueue.push({ id, accountId, keyId, totalCost, createdAt });
      if (settledQueue.length === 1) setImmediate(sendSettled);
    },
    forgetWritten(ids: Iterable<string>): void {
      tell(TOPIC_WRITTEN, [...ids]);
    },
    releaseReservation(id: string): void {
      tell(TOPIC_WRITTEN, [id]);
    },
    holdsOutstanding(): Promise<{ count: number; amount: number }> {
      return call(TOPIC_OUTSTANDING, null);
    },
    /**
     * Holds a plan's price from the balance before the purchase is written (which then finds the funds free), so no
     * request of another worker spends them meanwhile; `release` drops the hold once the purchase is stored or failed.
     */
    async holdForPurchase(accountId: string, price: number): Promise<{ release(): void }> {
      const id = "purchase_" + crypto.randomUUID();
      await reserve({ id, accountId, keyId: "", keyLimited: false, instanceId: "", createdAt: Date.now() }, function wholePrice(funds) {
        if (funds.account < price) {
          throw new InsufficientFundsError(
            `the plan costs $${nanoToUsdString(price)} and the available balance is $${nanoToUsdString(Math.max(0, funds.account))}; top up first`,
          );
        }
        return price;
      });
      return { release: () => tell(TOPIC_WRITTEN, [id]) };
    },
  };
}

export type PrimaryReservations = ReturnType<typeof createPrimaryReservations>;
