/**
 * The group commit's writer thread (see writer-thread.ts): its own connection to the file, one batch at
 * a time. A batch is applied in an IMMEDIATE transaction, then the thread tells the event loop it is
 * ready and waits for "go" before COMMIT: the event loop is blocked (Atomics.wait) only for the COMMIT
 * and settles the batch right after it, so no read ever sees the batch both committed and queued.
 */
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import type { Generation } from "../repository.ts";
import { WRITER_AUTOCHECKPOINT_PAGES } from "./checkpointer.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import * as sqliteSchema from "./schema.ts";

declare const self: Worker;

export interface WriterWorkerStart {
  path: string;
  busyTimeoutMs: number;
  holdsInTable: boolean;
  /** Two slots: the decision on a prepared batch, and the result of its COMMIT (see the constants below). */
  control: SharedArrayBuffer;
  /** How long a prepared batch waits for "go" before it is rolled back (its write lock released). */
  goTimeoutMs: number;
}

/** control[DECISION]: WAITING once a batch is prepared; the event loop swaps it to GO, or this thread to ABANDONED. */
export const DECISION = 0;
/** control[RESULT]: NONE until the COMMIT is done, then COMMITTED or FAILED. */
export const RESULT = 1;
export const NONE = 0;
export const WAITING = 1;
export const GO = 2;
export const ABANDONED = 3;
export const COMMITTED = 1;
export const FAILED = 2;

/** An error as it crosses threads: its SQLite code decides retry or dead letter (errors.ts isPermanent). */
export interface SentError {
  message: string;
  code?: string;
}

export type WriterRequest = { type: "start"; options: WriterWorkerStart } | { type: "write"; seq: number; batch: Generation[] } | { type: "stop" };

export type WriterReply =
  | { type: "ready" }
  | { type: "start-failed"; error: SentError }
  | { type: "prepared"; seq: number }
  | { type: "abandoned"; seq: number }
  | { type: "failed"; seq: number; error: SentError }
  | { type: "stopped" };

let db: Database | null = null;
let writer: ReturnType<typeof createMeteringWriter> | null = null;
let control: Int32Array | null = null;
let goTimeoutMs = 10;

function send(message: WriterReply): void {
  self.postMessage(message);
}

function sent(error: unknown): SentError {
  const code = (error as { code?: unknown } | null)?.code;
  return { message: String((error as Error)?.message ?? error), ...(typeof code === "string" ? { code } : {}) };
}

function start(options: WriterWorkerStart): void {
  try {
    db = new Database(options.path);
    // The same per-connection settings as the event loop's connection (open.ts); the file is already WAL.
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs))}`);
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA cache_size = -8192");
    db.exec("PRAGMA foreign_keys = ON");
    // A backstop: the checkpointer thread keeps the WAL far below this.
    db.exec(`PRAGMA wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
    writer = createMeteringWriter(drizzle({ client: db, schema: sqliteSchema }), db, { holdsInTable: options.holdsInTable });
    control = new Int32Array(options.control);
    goTimeoutMs = options.goTimeoutMs;
  } catch (error) {
    db?.close();
    db = null;
    send({ type: "start-failed", error: sent(error) });
    return;
  }
  send({ type: "ready" });
}

/** Prepares the batch, waits for "go", commits; or rolls back when the event loop does not answer in time. */
function write(seq: number, batch: Generation[]): void {
  if (writer === null) return; // could not start: the event loop writes itself (it was told)
  try {
    writer!.begin(batch);
  } catch (error) {
    send({ type: "failed", seq, error: sent(error) });
    return;
  }
  const c = control!;
  Atomics.store(c, RESULT, NONE);
  Atomics.store(c, DECISION, WAITING);
  send({ type: "prepared", seq });
  Atomics.wait(c, DECISION, WAITING, goTimeoutMs);
  // The event loop may be blocked on our write lock (its own write, busy-waiting): give the lock back.
  if (Atomics.compareExchange(c, DECISION, WAITING, ABANDONED) === WAITING) {
    writer!.rollback();
    send({ type: "abandoned", seq });
    return;
  }
  try {
    writer!.commit();
    Atomics.store(c, RESULT, COMMITTED);
  } catch (error) {
    writer!.rollback();
    Atomics.store(c, RESULT, FAILED);
    send({ type: "failed", seq, error: sent(error) });
  }
  Atomics.notify(c, RESULT);
}

function stop(): void {
  db?.close();
  db = null;
  send({ type: "stopped" });
}

self.onmessage = (event: MessageEvent<WriterRequest>) => {
  const message = event.data;
  if (message.type === "start") start(message.options);
  else if (message.type === "write") write(message.seq, message.batch);
  else stop();
};
