import type { Logger } from "../../../core/log.ts";
import type { Generation } from "../repository.ts";
import type { MeteringThreadFaults, MeteringWorkerReply, MeteringWorkerRequest, WorkerError } from "./metering-worker.ts";

/** How long a stop waits for the thread to close its connection. */
const STOP_TIMEOUT_MS = 5_000;

export interface MeteringThreadOptions {
  busyTimeoutMs: number;
  /** Tests only: what the thread does between a batch's COMMIT and its reply. */
  faults?: MeteringThreadFaults;
  log: Logger;
}

export interface MeteringThread {
  /** False once the thread is gone (failed to open, crashed): the event loop writes the batches itself again. */
  readonly alive: boolean;
  /** The batch in one transaction on the thread; rejects with the driver's error (its `code` kept) or when the thread is lost. */
  write(batch: readonly Generation[]): Promise<void>;
  stop(): Promise<void>;
}

/** A driver error from the thread, with the fields errors.ts reads (`isBusy`, `isPermanent`). */
function driverError(error: WorkerError): Error {
  return Object.assign(new Error(error.message), { code: error.code, errno: error.errno });
}

/**
 * The group commit's transactions on a thread of their own (storage `sqlite_metering_thread`), so that the event loop
 * never runs one: a commit of a few hundred rows takes ~1 ms, and every request that arrives meanwhile waits for it
 * (docs/performance.md, "The c=1 tail"). The thread has its own connection; the event loop's reads that add queued
 * generations to stored figures check whether the batch in flight is stored yet (repository.ts, `storedView`).
 */
export function startMeteringThread(path: string, options: MeteringThreadOptions): MeteringThread {
  const worker = new Worker(new URL("./metering-worker.ts", import.meta.url));
  const waiting = new Map<number, { resolve(): void; reject(error: unknown): void }>();
  let alive = true;
  let seq = 0;
  let onStopped: (() => void) | null = null;

  function lost(reason: string, error: unknown): void {
    if (!alive) return;
    alive = false;
    options.log.warn(`metering thread ${reason}; the event loop writes the metering batches itself`, { error: String(error) });
    worker.terminate();
    const gone = new Error(`metering thread ${reason}`);
    for (const write of waiting.values()) write.reject(gone);
    waiting.clear();
    onStopped?.();
  }

  function settled(id: number): { resolve(): void; reject(error: unknown): void } | undefined {
    const write = waiting.get(id);
    waiting.delete(id);
    // Unreferenced while idle, so the thread alone never keeps the process up; referenced while a batch is on it.
    if (waiting.size === 0) worker.unref();
    return write;
  }

  worker.onmessage = (event: MessageEvent<MeteringWorkerReply>) => {
    const reply = event.data;
    if (reply.type === "written") settled(reply.seq)?.resolve();
    else if (reply.type === "refused") settled(reply.seq)?.reject(driverError(reply.error));
    else if (reply.type === "failed") lost("could not open the file", reply.error.message);
    else if (reply.type === "stopped") onStopped?.();
  };
  worker.onerror = (event) => lost("failed", event.message ?? event);
  worker.unref();
  const start: MeteringWorkerRequest = { type: "start", options: { path, busyTimeoutMs: options.busyTimeoutMs, faults: options.faults ?? {} } };
  worker.postMessage(start);

  return {
    get alive() {
      return alive;
    },

    write(batch) {
      if (!alive) return Promise.reject(new Error("metering thread lost"));
      const id = ++seq;
      const request: MeteringWorkerRequest = { type: "write", seq: id, batch: JSON.stringify(batch) };
      return new Promise<void>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        worker.ref();
        worker.postMessage(request);
      });
    },

    async stop() {
      if (!alive) return;
      worker.ref();
      await new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, STOP_TIMEOUT_MS);
        onStopped = () => {
          clearTimeout(giveUp);
          resolve();
        };
        const stop: MeteringWorkerRequest = { type: "stop" };
        worker.postMessage(stop);
      });
      alive = false;
      worker.terminate();
    },
  };
}
