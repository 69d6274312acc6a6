import { UnavailableError } from "../../../core/errors.ts";
import type { Logger } from "../../../core/log.ts";
import type { Generation } from "../repository.ts";
import type { PendingGenerations } from "./pending.ts";

const MAX_RETRY_DELAY_MS = 1000;
/** How long background writes keep finding the write lock taken (another process's commit) before that is a failure. */
const BUSY_PATIENCE_MS = 1000;

/** A write step: done when it returns (SQLite), or when its promise settles (Postgres). */
type Step = void | Promise<void>;

export interface GroupCommitOptions {
  pending: PendingGenerations;
  /**
   * Writes a batch in one transaction, all or nothing: synchronously, or by the promise it returns. `background`: a
   * timer's write, which may fail at once when another process holds the write lock (`isBusy`) instead of waiting.
   */
  write(batch: readonly Generation[], background: boolean): Step;
  /** The dialect's "another process holds the write lock": a background write tries again a millisecond later. */
  isBusy?(error: unknown): boolean;
  /** The dialect's "this row can never be written": such a row is set aside; every other failure is retried. */
  isPermanent(error: unknown): boolean;
  /** Told of each batch written (not of rows set aside): its holds can go. */
  onWritten?(batch: readonly Generation[]): void;
  flushIntervalMs: number;
  maxBatch: number;
  log: Logger;
}

/** The write being made: a read may find it stored before its writer says so (`settleWriting`). */
interface Writing {
  readonly batch: readonly Generation[];
  readonly startedMono: number;
  settled: boolean;
}

/** Runs `work`, then `done`; a failure (thrown or rejected) goes to `failed`. Synchronous while `work` is. */
function attempt(work: () => Step, done: () => void, failed: (error: unknown) => Step): Step {
  let step: Step;
  try {
    step = work();
  } catch (error) {
    return failed(error);
  }
  if (step instanceof Promise) return step.then(done, failed);
  done();
}

/**
 * Group commit of metered generations: queued in `pending` (visible to reads at once), written every
 * `flushIntervalMs` or as soon as `maxBatch` are queued, in transactions of at most `maxBatch`. A commit
 * has a large fixed part (SQLite: the WAL pages it dirties; Postgres: a round trip), so the interval sets
 * what a row costs. One write is in flight at a time; what is queued meanwhile goes in the next one. A
 * synchronous writer (SQLite) writes one transaction per turn of the event loop, so a backlog never
 * stalls it long; an asynchronous one (Postgres, the SQLite metering thread) writes whole batches one
 * after the other and the rest at the next interval. A failed write
 * keeps the batch and retries with backoff; a row the schema refuses is logged whole and set aside so it
 * cannot block the rows behind it.
 */
// Long on purpose (issue 26): a closure factory of small named steps (none over ~25 lines) sharing one
// mutable state (timers, in-flight write, failure count, recorded/settled counts); `onTimer` and
// `onImmediate` go to the timers as they are, with no `this` to bind on the hot path.
export function createGroupCommit({ pending, write, isPermanent, isBusy, onWritten, flushIntervalMs, maxBatch, log }: GroupCommitOptions) {
  let stopped = false;
  let draining = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let immediate: ReturnType<typeof setImmediate> | null = null;
  let failures = 0;
  /** When background writes first found the write lock taken (performance.now()), 0 while they do not. */
  let busySince = 0;
  /** The write being made is a timer's (see GroupCommitOptions.write). */
  let background = false;
  let inFlight: Promise<void> | null = null;
  let writing: Writing | null = null;
  // Monotonic counts: the queue is FIFO, so everything recorded before a flush is settled once
  // `settled` reaches the `recorded` the flush saw.
  let recorded = 0;
  let settled = 0;
  /** Told of each write that settled rows (StoreLifecycle.onCommit): GET /metrics' commit latency. */
  const commitListeners: ((seconds: number, rows: number) => void)[] = [];

  function settle(count: number): void {
    pending.settle(count);
    settled += count;
  }

  /** A write of `rows` that began at `startedMono` settled: its listeners learn how long it took. */
  function committed(startedMono: number, rows: number): void {
    if (commitListeners.length === 0) return;
    const seconds = (performance.now() - startedMono) / 1000;
    for (const listener of commitListeners) {
      try {
        listener(seconds, rows);
      } catch {
        // An observer's fault must not fail a write that succeeded.
      }
    }
  }

  function deadLetter(g: Generation, error: unknown): void {
    log.error("generation rejected by the store; logged here instead", { generation: g, error: String(error) });
    settle(1);
  }

  /** The batch written, settled once: by its write returning, or earlier by a read that found it stored. */
  function written(of: Writing): void {
    if (of.settled) return;
    of.settled = true;
    settle(of.batch.length);
    try {
      onWritten?.(of.batch);
    } catch (error) {
      log.error("after a metering write", { error: String(error) });
    }
    committed(of.startedMono, of.batch.length);
  }

  /** `write(batch)`, settled as written when it succeeds; `failed` decides what a failure means. */
  function writeBatch(batch: readonly Generation[], failed: (error: unknown) => Step): Step {
    const current: Writing = { batch, startedMono: performance.now(), settled: false };
    writing = current;
    return attempt(
      () => write(batch, background),
      () => {
        if (writing === current) writing = null;
        written(current);
      },
      (error) => {
        if (writing === current) writing = null;
        return failed(error);
      },
    );
  }

  /** Writes the head of the queue (one batch); throws on a failure that may pass (the queue is kept). */
  function writeHead(): Step {
    const batch = pending.queue.slice(0, maxBatch);
    if (batch.length === 0) return;
    return writeBatch(batch, (error) => {
      if (!isPermanent(error)) throw error;
      // A poison row: write this batch one by one so only the bad rows are set aside.
      return writeEach(batch, 0);
    });
  }

  function writeEach(batch: readonly Generation[], from: number): Step {
    for (let i = from; i < batch.length; i++) {
      const g = batch[i]!;
      const step = writeBatch([g], (rowError) => {
        if (!isPermanent(rowError)) throw rowError;
        deadLetter(g, rowError);
      });
      if (step instanceof Promise) return step.then(() => writeEach(batch, i + 1));
    }
  }

  /** The write in flight, or a new one: never two at once, so batches settle in queue order. */
  function writeOnce(): Step {
    if (inFlight !== null) return inFlight;
    const step = writeHead();
    if (!(step instanceof Promise)) return;
    inFlight = step.finally(() => {
      inFlight = null;
    });
    return inFlight;
  }

  function resumed(): void {
    busySince = 0;
    if (failures > 0) log.info("metering writes resumed", { afterFailures: failures });
    failures = 0;
  }

  function failed(error: unknown): void {
    if (isBusy?.(error)) {
      // Another process's commit holds the lock: try again shortly, the event loop serving meanwhile.
      const now = performance.now();
      if (busySince === 0) busySince = now;
      if (now - busySince < BUSY_PATIENCE_MS) return schedule(1);
    }
    failures += 1;
    const retryMs = Math.min(MAX_RETRY_DELAY_MS, flushIntervalMs * 2 ** failures);
    log.error("metering flush failed; batch kept, retrying", { queued: pending.size, failures, retryMs, error: String(error) });
    schedule(retryMs);
  }

  async function drain(first: Promise<void>): Promise<void> {
    draining = true;
    try {
      await first;
      // Paced like the timer: at once only while a whole batch waits, the rest on the next interval, so that each
      // transaction's fixed cost is shared by an interval's rows, as on the synchronous path.
      while (!stopped && pending.size >= maxBatch) await writeOnce();
      resumed();
      if (pending.size > 0) schedule(flushIntervalMs);
    } catch (error) {
      failed(error);
    } finally {
      draining = false;
    }
  }

  function tick(): void {
    if (stopped || draining || pending.size === 0) return;
    let step: Step;
    background = true;
    try {
      step = writeOnce();
    } catch (error) {
      failed(error);
      return;
    } finally {
      background = false;
    }
    if (step instanceof Promise) {
      void drain(step);
      return;
    }
    // Synchronous: the next transaction on the next turn of the event loop.
    resumed();
    if (pending.size > 0) immediate ??= setImmediate(onImmediate);
  }

  function onTimer(): void {
    timer = null;
    tick();
  }

  function onImmediate(): void {
    immediate = null;
    tick();
  }

  function schedule(delayMs: number): void {
    if (timer !== null || stopped) return;
    timer = setTimeout(onTimer, delayMs);
    timer.unref?.();
  }

  function unavailable(error: unknown): UnavailableError {
    schedule(flushIntervalMs);
    return new UnavailableError("storage could not write metered generations; they stay queued", { cause: error });
  }

  /** Writes until everything recorded before `target` is settled: synchronously while the writer is. */
  function flushTo(target: number): Step {
    while (settled < target) {
      let step: Step;
      try {
        step = writeOnce();
      } catch (error) {
        throw unavailable(error);
      }
      if (step instanceof Promise) {
        return step.then(
          () => flushTo(target),
          (error) => {
            throw unavailable(error);
          },
        );
      }
    }
    resumed();
  }

  return {
    /** The batch an asynchronous write is making (null when none): at most one at a time, a prefix of the queue. */
    writing(): readonly Generation[] | null {
      return writing === null || writing.settled ? null : writing.batch;
    },

    /** A read found the batch being written already stored (its transaction committed): settled now, once. */
    settleWriting(): void {
      if (writing !== null) written(writing);
    },

    /** Tells `listener` of every write that settled rows: its duration (seconds) and row count. Returns its removal. */
    onCommit(listener: (seconds: number, rows: number) => void): () => void {
      commitListeners.push(listener);
      return () => {
        const index = commitListeners.indexOf(listener);
        if (index >= 0) commitListeners.splice(index, 1);
      };
    },

    /** Queues a generation (ignored when its id is already queued) and arms the commit. */
    record(g: Generation): void {
      if (!pending.add(g)) return;
      recorded += 1;
      // A full batch is written at once, unless writes are failing: then the backoff timer paces retries.
      if (pending.size >= maxBatch && failures === 0) immediate ??= setImmediate(onImmediate);
      else schedule(flushIntervalMs);
    },

    /** Done once everything queued before the call is written; UnavailableError (queue kept, retried) when it cannot be. */
    flush(): Step {
      return flushTo(recorded);
    },

    /** Final flush (a few attempts), then no more timers. What cannot be written is logged whole. */
    async stop(): Promise<void> {
      let attempts = 0;
      while (pending.size > 0) {
        try {
          await writeOnce();
        } catch (error) {
          attempts += 1;
          if (attempts >= 3) {
            log.error("closing with generations that could not be written; logged here instead", {
              generations: pending.queue,
              error: String(error),
            });
            break;
          }
          await Bun.sleep(100 * attempts);
        }
      }
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      if (immediate !== null) clearImmediate(immediate);
      timer = null;
      immediate = null;
      await inFlight?.catch(() => {});
    },
  };
}

export type GroupCommit = ReturnType<typeof createGroupCommit>;
