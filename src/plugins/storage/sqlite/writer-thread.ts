import type { Logger } from "../../../core/log.ts";
import type { Generation } from "../repository.ts";
import {
  ABANDONED,
  COMMITTED,
  DECISION,
  GO,
  NONE,
  RESULT,
  WAITING,
  type SentError,
  type WriterReply,
  type WriterRequest,
} from "./writer-worker.ts";

/** How long the thread keeps a prepared batch (and the write lock) waiting for the event loop before it rolls back. */
const GO_TIMEOUT_MS = 10;
/** How long the event loop waits for a COMMIT it allowed; past it the batch is retried (a stored id is skipped). */
const COMMIT_TIMEOUT_MS = 5_000;
/** How long a stop waits for the thread to close its connection. */
const STOP_TIMEOUT_MS = 5_000;

/** The writer thread is gone (could not start, or crashed): retried, on the event loop's own writer. */
export class WriterThreadLost extends Error {}

/** A failure of the thread's transaction, with the SQLite code that says retry or dead letter. */
function received(error: SentError): Error {
  return Object.assign(new Error(error.message), error.code === undefined ? {} : { code: error.code });
}

export interface WriterThread {
  /** False once the thread is gone: the caller writes on the event loop instead. */
  readonly running: boolean;
  /**
   * Writes the batch in one transaction on the thread; `committed` runs on the event loop right after
   * the COMMIT, before anything else there can read. Rejects (nothing written) on a failure.
   */
  write(batch: readonly Generation[], committed: () => void): Promise<void>;
  /** Closes the thread's connection; writes in flight must be done (the group commit's stop). */
  stop(): Promise<void>;
}

interface InFlight {
  seq: number;
  batch: readonly Generation[];
  committed: () => void;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Moves the group commit's transaction off the event loop (issue 32): a Bun Worker with its own
 * connection to the file applies each batch. The batch stays queued (visible to reads) until the thread
 * committed it; so that no read sees it twice, the thread COMMITs only on "go" from the event loop,
 * which then waits for the COMMIT alone (Atomics.wait, far shorter than the inserts) and settles the
 * batch before it runs anything else. A prepared batch holds the write lock: if the event loop does not
 * answer within GO_TIMEOUT_MS (it may be waiting for that very lock, for a write of its own), the
 * thread rolls back and the batch is sent again.
 */
export function startWriterThread(path: string, options: { busyTimeoutMs: number; holdsInTable: boolean; log: Logger }): WriterThread {
  const worker = new Worker(new URL("./writer-worker.ts", import.meta.url));
  const control = new Int32Array(new SharedArrayBuffer(8));
  let running = true;
  let seq = 0;
  let inFlight: InFlight | null = null;
  let onStopped: (() => void) | null = null;

  const post = (message: WriterRequest) => worker.postMessage(message);

  function lost(reason: string, error: unknown): void {
    if (!running) return;
    running = false;
    options.log.warn(`metering writer thread ${reason}; the event loop writes metering itself`, { error: String(error) });
    worker.terminate();
    const failed = inFlight;
    inFlight = null;
    failed?.reject(new WriterThreadLost(`metering writer thread ${reason}`, { cause: error }));
    onStopped?.();
  }

  /** The thread prepared the batch: let it commit, wait for the COMMIT, settle at once. */
  function prepared(current: InFlight): void {
    if (Atomics.compareExchange(control, DECISION, WAITING, GO) !== WAITING) return; // abandoned: it is sent again
    Atomics.notify(control, DECISION);
    if (Atomics.wait(control, RESULT, NONE, COMMIT_TIMEOUT_MS) === "timed-out") {
      finish(current)?.reject(new Error("metering writer thread: COMMIT did not finish in time"));
      return;
    }
    if (Atomics.load(control, RESULT) !== COMMITTED) return; // its "failed" message follows
    const done = finish(current);
    if (done === null) return;
    done.committed();
    done.resolve();
  }

  /** The batch in flight if it is still `current`, no longer in flight. */
  function finish(current: InFlight): InFlight | null {
    if (inFlight !== current) return null;
    inFlight = null;
    if (running) worker.unref();
    return current;
  }

  worker.onmessage = (event: MessageEvent<WriterReply>) => {
    const message = event.data;
    if (message.type === "start-failed") return lost("could not start", message.error.message);
    if (message.type === "stopped") return onStopped?.();
    if (message.type === "ready") return;
    const current = inFlight;
    if (current === null || current.seq !== message.seq) return; // a batch given up on
    if (message.type === "prepared") prepared(current);
    else if (message.type === "abandoned") sendBatch(current);
    else finish(current)?.reject(received(message.error));
  };
  worker.onerror = (event) => lost("failed", event.message ?? event);
  // A thread that ends without an error event would leave the batch in flight unanswered: it is lost too.
  worker.addEventListener("close", () => lost("exited", "closed"));
  worker.unref();
  post({ type: "start", options: { path, busyTimeoutMs: options.busyTimeoutMs, holdsInTable: options.holdsInTable, control: control.buffer as SharedArrayBuffer, goTimeoutMs: GO_TIMEOUT_MS } });

  function sendBatch(current: InFlight): void {
    current.seq = ++seq;
    // Structured clone: the batch's generations are copied to the thread.
    post({ type: "write", seq: current.seq, batch: current.batch as Generation[] });
  }

  return {
    get running() {
      return running;
    },

    write(batch, committed) {
      if (!running) return Promise.reject(new WriterThreadLost("metering writer thread stopped"));
      if (inFlight !== null) return Promise.reject(new Error("metering writer thread: a write is already in flight"));
      return new Promise<void>((resolve, reject) => {
        inFlight = { seq: 0, batch, committed, resolve, reject };
        // Referenced while a batch is in flight: a process must not exit with it half done.
        worker.ref();
        sendBatch(inFlight);
      });
    },

    async stop() {
      if (!running) return;
      // Referenced until it is done: the process must not exit before the thread closed its connection.
      worker.ref();
      await new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, STOP_TIMEOUT_MS);
        onStopped = () => {
          clearTimeout(giveUp);
          resolve();
        };
        post({ type: "stop" });
      });
      running = false; // before terminate: its close event is no loss
      worker.terminate();
    },
  };
}
