import type { SQLiteError } from "bun:sqlite";
import { UnavailableError } from "../../../core/errors.ts";
import type { Logger } from "../../../core/log.ts";
import type { Generation } from "../repository.ts";
import type { PendingGenerations } from "../shared/pending.ts";

const MAX_RETRY_DELAY_MS = 1000;

/** SQLite errors that say "this row can never be written"; every other failure is retried. */
function isPermanent(error: unknown): boolean {
  const code = (error as Partial<SQLiteError> | null)?.code;
  if (typeof code !== "string") return !(error instanceof Error && /closed database/i.test(error.message));
  return /^SQLITE_(CONSTRAINT|MISMATCH|TOOBIG|RANGE)/.test(code);
}

export interface GroupCommitOptions {
  pending: PendingGenerations;
  /** Writes a batch in one transaction, all or nothing. */
  write(batch: readonly Generation[]): void;
  flushIntervalMs: number;
  maxBatch: number;
  log: Logger;
}

/**
 * Group commit of metered generations: queued in `pending` (visible to reads at once), written every
 * `flushIntervalMs` or as soon as `maxBatch` are queued, in transactions of at most `maxBatch`. A commit
 * has a large fixed part (the WAL pages it dirties: ~0.25 ms here), so the interval sets what a row costs.
 * A failed write keeps the batch and retries with backoff; a row the schema refuses is logged whole and set
 * aside so it cannot block the rows behind it.
 */
export function createGroupCommit({ pending, write, flushIntervalMs, maxBatch, log }: GroupCommitOptions) {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let immediate: ReturnType<typeof setImmediate> | null = null;
  let failures = 0;

  function deadLetter(g: Generation, error: unknown): void {
    log.error("generation rejected by the store; logged here instead", { generation: g, error: String(error) });
    pending.settle(1);
  }

  /** Commits the queue (at most `batches` transactions); throws on a failure that may pass (the queue is kept). */
  function writeQueued(batches = Infinity): void {
    for (let written = 0; pending.size > 0 && written < batches; written++) {
      const batch = pending.queue.slice(0, maxBatch);
      try {
        write(batch);
        pending.settle(batch.length);
      } catch (error) {
        if (!isPermanent(error)) throw error;
        // A poison row: write this batch one by one so only the bad rows are set aside.
        for (const g of batch) {
          try {
            write([g]);
            pending.settle(1);
          } catch (rowError) {
            if (!isPermanent(rowError)) throw rowError;
            deadLetter(g, rowError);
          }
        }
      }
    }
    if (failures > 0) log.info("metering writes resumed", { afterFailures: failures });
    failures = 0;
  }

  function tick(): void {
    if (stopped || pending.size === 0) return;
    try {
      // One transaction per turn of the event loop: a backlog (a burst, writes resumed after a failure) never stalls it long.
      writeQueued(1);
      if (pending.size > 0) immediate ??= setImmediate(onImmediate);
    } catch (error) {
      failures += 1;
      const retryMs = Math.min(MAX_RETRY_DELAY_MS, flushIntervalMs * 2 ** failures);
      log.error("metering flush failed; batch kept, retrying", { queued: pending.size, failures, retryMs, error: String(error) });
      schedule(retryMs);
    }
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
      // A full batch is written at once, unless writes are failing: then the backoff timer paces retries.
      if (pending.size >= maxBatch && failures === 0) immediate ??= setImmediate(onImmediate);
      else schedule(flushIntervalMs);
    },

    /** Writes everything queued now; throws UnavailableError (queue kept, retried) when it cannot. */
    flush(): void {
      if (pending.size === 0) return;
      try {
        writeQueued();
      } catch (error) {
        schedule(flushIntervalMs);
        throw new UnavailableError("storage could not write metered generations; they stay queued", { cause: error });
      }
    },

    /** Final flush (a few attempts), then no more timers. What cannot be written is logged whole. */
    async stop(): Promise<void> {
      for (let attempt = 1; pending.size > 0; attempt += 1) {
        try {
          writeQueued();
        } catch (error) {
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
    },
  };
}
