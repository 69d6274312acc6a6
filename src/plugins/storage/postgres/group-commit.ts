import { UnavailableError } from "../../../core/errors.ts";
import type { Logger } from "../../../core/log.ts";
import type { Generation } from "../repository.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import { isPermanent } from "./errors.ts";

const MAX_RETRY_DELAY_MS = 1000;

export interface GroupCommitOptions {
  pending: PendingGenerations;
  /** Writes a batch in one transaction, all or nothing. */
  write(batch: readonly Generation[]): Promise<void>;
  flushIntervalMs: number;
  maxBatch: number;
  log: Logger;
}

/**
 * Group commit of metered generations, asynchronous sibling of `sqlite/group-commit.ts`: queued in
 * `pending` (visible to reads at once), written every `flushIntervalMs` or as soon as `maxBatch` are
 * queued, in transactions of at most `maxBatch`. One write is in flight at a time; what is queued
 * meanwhile goes in the next one. A failed write keeps the batch and retries with backoff; a row the
 * schema refuses is logged whole and set aside so it cannot block the rows behind it.
 */
export function createGroupCommit({ pending, write, flushIntervalMs, maxBatch, log }: GroupCommitOptions) {
  let stopped = false;
  let draining = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let immediate: ReturnType<typeof setImmediate> | null = null;
  let failures = 0;
  let inFlight: Promise<void> | null = null;
  // Monotonic counts: the queue is FIFO, so everything recorded before a flush is settled once
  // `settled` reaches the `recorded` the flush saw.
  let recorded = 0;
  let settled = 0;

  function settle(count: number): void {
    pending.settle(count);
    settled += count;
  }

  function deadLetter(g: Generation, error: unknown): void {
    log.error("generation rejected by the store; logged here instead", { generation: g, error: String(error) });
    settle(1);
  }

  /** Writes the head of the queue (one batch); throws on a failure that may pass (the queue is kept). */
  async function writeHead(): Promise<void> {
    const batch = pending.queue.slice(0, maxBatch);
    if (batch.length === 0) return;
    try {
      await write(batch);
      settle(batch.length);
    } catch (error) {
      if (!isPermanent(error)) throw error;
      // A poison row: write this batch one by one so only the bad rows are set aside.
      for (const g of batch) {
        try {
          await write([g]);
          settle(1);
        } catch (rowError) {
          if (!isPermanent(rowError)) throw rowError;
          deadLetter(g, rowError);
        }
      }
    }
  }

  /** The write in flight, or a new one: never two at once, so batches settle in queue order. */
  function writeOnce(): Promise<void> {
    inFlight ??= writeHead().finally(() => {
      inFlight = null;
    });
    return inFlight;
  }

  async function drain(): Promise<void> {
    try {
      while (!stopped && pending.size > 0) await writeOnce();
      if (failures > 0) log.info("metering writes resumed", { afterFailures: failures });
      failures = 0;
    } catch (error) {
      failures += 1;
      const retryMs = Math.min(MAX_RETRY_DELAY_MS, flushIntervalMs * 2 ** failures);
      log.error("metering flush failed; batch kept, retrying", { queued: pending.size, failures, retryMs, error: String(error) });
      schedule(retryMs);
    }
  }

  function tick(): void {
    if (stopped || draining || pending.size === 0) return;
    draining = true;
    void drain().finally(() => {
      draining = false;
    });
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

  return {
    /** Queues a generation (ignored when its id is already queued) and arms the commit. */
    record(g: Generation): void {
      if (!pending.add(g)) return;
      recorded += 1;
      // A full batch is written at once, unless writes are failing: then the backoff timer paces retries.
      if (pending.size >= maxBatch && failures === 0) immediate ??= setImmediate(onImmediate);
      else schedule(flushIntervalMs);
    },

    /** Resolves once everything queued before the call is written; UnavailableError (queue kept, retried) when it cannot be. */
    async flush(): Promise<void> {
      const target = recorded;
      while (settled < target) {
        try {
          await writeOnce();
        } catch (error) {
          schedule(flushIntervalMs);
          throw new UnavailableError("storage could not write metered generations; they stay queued", { cause: error });
        }
      }
    },

    /** Final flush (a few attempts), then no more timers. What cannot be written is logged whole. */
    async stop(): Promise<void> {
      let attempt = 0;
      while (pending.size > 0) {
        try {
          await writeOnce();
        } catch (error) {
          attempt += 1;
          if (attempt >= 3) {
            log.error("closing with generations that could not be written; logged here instead", {
              generations: pending.queue,
              error: String(error),
            });
            break;
          }
          await Bun.sleep(100 * attempt);
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
