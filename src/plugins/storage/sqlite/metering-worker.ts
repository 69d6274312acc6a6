/**
 * The metering writer's thread (see metering-thread.ts): its own connection to the file, one transaction per
 * batch the event loop sends, the same writer as on the event loop (metering-writer.ts).
 */
import type { Generation } from "../repository.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import { openSqlite } from "./open.ts";

declare const self: Worker;

/** Tests only: what happens between a batch's COMMIT and its reply. */
export interface MeteringThreadFaults {
  /** The reply comes this much later: the window in which a read must find the batch stored. */
  replyDelayMs?: number;
  /** The thread dies instead of replying: the event loop must not write the batch's debits a second time. */
  dieAfterCommit?: boolean;
}

export interface MeteringWorkerStart {
  path: string;
  busyTimeoutMs: number;
  faults: MeteringThreadFaults;
}

/** The event loop's messages: open the file, then batches as JSON text (cheaper to send than cloned objects). */
export type MeteringWorkerRequest = { type: "start"; options: MeteringWorkerStart } | { type: "write"; seq: number; batch: string } | { type: "stop" };

/** A driver error as the event loop's checks read it (errors.ts: `code`). */
export interface WorkerError {
  message: string;
  code?: string;
  errno?: number;
}

export type MeteringWorkerReply =
  | { type: "ready" }
  | { type: "failed"; error: WorkerError }
  | { type: "written"; seq: number }
  | { type: "refused"; seq: number; error: WorkerError }
  | { type: "stopped" };

let writer: ReturnType<typeof createMeteringWriter> | null = null;
let close: (() => void) | null = null;
let faults: MeteringThreadFaults = {};

function send(message: MeteringWorkerReply): void {
  self.postMessage(message);
}

function asWorkerError(error: unknown): WorkerError {
  const { message, code, errno } = (error ?? {}) as { message?: unknown; code?: unknown; errno?: unknown };
  return {
    message: typeof message === "string" ? message : String(error),
    ...(typeof code === "string" ? { code } : {}),
    ...(typeof errno === "number" ? { errno } : {}),
  };
}

function start(options: MeteringWorkerStart): void {
  try {
    const { client, db } = openSqlite(options.path, { busyTimeoutMs: options.busyTimeoutMs });
    writer = createMeteringWriter(db, client, { holdsInTable: false });
    close = () => client.close();
    faults = options.faults;
  } catch (error) {
    send({ type: "failed", error: asWorkerError(error) });
    return;
  }
  send({ type: "ready" });
}

function write(seq: number, batch: string): void {
  try {
    writer!.write(JSON.parse(batch) as Generation[]);
  } catch (error) {
    send({ type: "refused", seq, error: asWorkerError(error) });
    return;
  }
  if (faults.replyDelayMs) Bun.sleepSync(faults.replyDelayMs);
  if (faults.dieAfterCommit) throw new Error("metering thread died after a COMMIT (test fault)");
  send({ type: "written", seq });
}

self.onmessage = (event: MessageEvent<MeteringWorkerRequest>) => {
  const request = event.data;
  if (request.type === "start") start(request.options);
  else if (request.type === "write") write(request.seq, request.batch);
  else {
    close?.();
    send({ type: "stopped" });
  }
};
