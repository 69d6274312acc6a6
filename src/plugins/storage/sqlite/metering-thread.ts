import type { Logger } from "../../../core/log.ts";
import { UnavailableError } from "../../../core/errors.ts";
import type { Generation } from "../repository.ts";
import type { GroupCommit } from "./group-commit.ts";
import type { MeteringThreadReply, MeteringThreadRequest } from "./metering-thread-worker.ts";
import type { PendingGenerations } from "./pending.ts";
import { packBatch } from "./batch-codec.ts";

const MAX_RETRY_DELAY_MS = 1000;
/** How long a stop waits for the thread to close its connection. */
const STOP_TIMEOUT_MS = 5_000;

export interface MeteringThreadOptions {
  path: string;
  busyTimeoutMs: number;
  pending: PendingGenerations;
  flushIntervalMs: number;
  maxBatch: number;
  log: Logger;
  /** Generations now stored (or set aside): the queue no longer holds them. */
  onSettled(settled: readonly Generation[]): void;
  /** The metering cursor as the event loop's connection reads it (to settle a batch the lost thread may have written). */
  readCursor(): number;
  /** The group commit on the event loop, for when the thread cannot start or is lost. */
  fallback: GroupCommit;
}

/**
 * The group commit on a thread of its own: at c=64 the commit was ~15-20% of the event loop's time, and at
 * c=1 its ~0.5 ms every 5 ms delayed ~10% of requests. Generations are queued in `pending` as before
 * (visible to reads at once) and sent in batches of at most `maxBatch`, one batch at a time, every
 * `flushIntervalMs` or as soon as a batch is full. The thread stores each batch with the metering cursor
 * in one transaction and answers with the cursor; reads take the cursor with their figures (one snapshot),
 * so a batch the thread has stored but the queue has not settled yet is never counted twice (pending.ts).
 * If the thread cannot start or fails, the event loop's group commit takes over, after settling what the
 * thread had stored.
 */
export function startMeteringThread(options: MeteringThreadOptions): GroupCommit {
  const { pending, log, fallback } = options;
  const worker = new Worker(new URL("./metering-thread-worker.ts", import.meta.url));
  let state: "starting" | "running" | "lost" = "starting";
  let inflight = false;
  let stopping = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let waiters: { resolve(): void; reject(error: unknown): void }[] = [];
  let onStopped: (() => void) | null = null;

  const post = (message: MeteringThreadRequest) => worker.postMessage(message);

  function settle(cursor: number, rejected: readonly { generation: Generation; error: string }[]): void {
    for (const { generation, error } of rejected) {
      log.error("generation rejected by the store; logged here instead", { generation, error });
    }
    const settled = pending.settleThrough(cursor);
    if (settled.length > 0) options.onSettled(settled);
  }

  function send(): void {
    if (state !== "running" || inflight || pending.size === 0) return;
    const count = Math.min(options.maxBatch, pending.size);
    const seqs = new Array<number>(count);
    for (let index = 0; index < count; index++) seqs[index] = pending.seqAt(index);
    inflight = true;
    const batch = packBatch(pending.queue.slice(0, count));
    worker.postMessage({ type: "write", batch, seqs } satisfies MeteringThreadRequest, [batch.numbers.buffer as ArrayBuffer]);
  }

  function schedule(delayMs: number): void {
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      send();
    }, delayMs);
    timer.unref?.();
  }

  function answerWaiters(error?: unknown): void {
    if (waiters.length === 0) return;
    if (error === undefined && pending.size > 0) return;
    const answered = waiters;
    waiters = [];
    if (!stopping) worker.unref();
    for (const waiter of answered) error === undefined ? waiter.resolve() : waiter.reject(error);
  }

  function written(reply: Extract<MeteringThreadReply, { type: "written" | "retry" }>): void {
    inflight = false;
    settle(reply.cursor, reply.rejected);
    if (reply.type === "retry") {
      failures += 1;
      const retryMs = Math.min(MAX_RETRY_DELAY_MS, options.flushIntervalMs * 2 ** failures);
      log.error("metering flush failed; batch kept, retrying", { queued: pending.size, failures, retryMs, error: reply.error });
      answerWaiters(new UnavailableError("storage could not write metered generations; they stay queued", { cause: reply.error }));
      return schedule(retryMs);
    }
    if (failures > 0) log.info("metering writes resumed", { afterFailures: failures });
    failures = 0;
    answerWaiters();
    // A full batch, or someone waiting for the queue to empty: at once; otherwise on the next period.
    if (pending.size >= options.maxBatch || waiters.length > 0) send();
    else if (pending.size > 0) schedule(options.flushIntervalMs);
  }

  /** The thread is gone: settle what it stored, and the event loop's group commit takes the queue. */
  function lost(reason: string, error: unknown): void {
    if (state === "lost") return;
    const wasRunning = state === "running";
    state = "lost";
    worker.terminate();
    if (timer !== null) clearTimeout(timer);
    timer = null;
    log.warn(`metering thread ${reason}; the event loop writes metering`, { error: String(error) });
    if (inflight) {
      inflight = false;
      try {
        settle(options.readCursor(), []);
      } catch (readError) {
        log.error("could not read the metering cursor after losing the thread", { error: String(readError) });
      }
    }
    onStopped?.();
    if (!wasRunning && pending.size === 0) return answerWaiters();
    try {
      fallback.flush();
      answerWaiters();
    } catch (flushError) {
      answerWaiters(flushError);
    }
  }

  worker.onmessage = (event: MessageEvent<MeteringThreadReply>) => {
    const reply = event.data;
    if (reply.type === "ready") {
      if (state !== "starting") return;
      state = "running";
      if (pending.size >= options.maxBatch || waiters.length > 0) send();
      else if (pending.size > 0) schedule(options.flushIntervalMs);
    } else if (reply.type === "failed") lost("could not start", reply.error);
    else if (reply.type === "stopped") onStopped?.();
    else written(reply);
  };
  worker.onerror = (event) => lost("failed", event.message ?? event);
  worker.unref();
  post({ type: "start", path: options.path, busyTimeoutMs: options.busyTimeoutMs });

  function flush(): Promise<void> {
    if (state === "lost") return Promise.resolve().then(() => fallback.flush());
    if (pending.size === 0 && !inflight) return Promise.resolve();
    // Referenced while someone waits: a process with nothing else left (a gateway stopping) would exit here.
    worker.ref();
    return new Promise<void>((resolve, reject) => {
      waiters.push({ resolve, reject });
      send();
    });
  }

  return {
    record(g: Generation): void {
      if (state === "lost") return fallback.record(g);
      if (!pending.add(g)) return;
      if (pending.size >= options.maxBatch && failures === 0) send();
      else schedule(options.flushIntervalMs);
    },

    flush,

    /** Final flush (a few attempts), then the thread closes its connection. What cannot be written is logged whole. */
    async stop(): Promise<void> {
      if (stopping) return;
      stopping = true;
      worker.ref(); // an unreferenced worker would let a stopping process exit before the queue is written
      for (let attempt = 1; state !== "lost"; attempt += 1) {
        try {
          await flush();
          break;
        } catch (error) {
          if (attempt >= 3) {
            log.error("closing with generations that could not be written; logged here instead", { generations: pending.queue, error: String(error) });
            break;
          }
          await Bun.sleep(100 * attempt);
        }
      }
      if (timer !== null) clearTimeout(timer);
      timer = null;
      if (state === "lost") return fallback.stop();
      await new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, STOP_TIMEOUT_MS);
        onStopped = () => {
          clearTimeout(giveUp);
          resolve();
        };
        post({ type: "stop" });
      });
      state = "lost"; // nothing more goes to the thread
      worker.terminate();
    },
  };
}
