/**
 * The WAL checkpointer's thread (see checkpointer.ts): its own connection to the file, a PASSIVE
 * checkpoint every `intervalMs`. PASSIVE never waits for the writer and never blocks it.
 */
import { Database } from "bun:sqlite";

declare const self: Worker;

export interface CheckpointWorkerStart {
  path: string;
  intervalMs: number;
}

export type CheckpointWorkerMessage = { type: "ready" } | { type: "failed"; error: string } | { type: "stopped" };

interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

/** Passes a checkpoint can take to catch up with commits made while it copied (each pass copies only the new frames). */
const MAX_PASSES = 8;

let db: Database | null = null;
let timer: ReturnType<typeof setInterval> | null = null;

function send(message: CheckpointWorkerMessage): void {
  self.postMessage(message);
}

/**
 * Copies the WAL into the file. The writer restarts the WAL from its beginning only when every frame
 * has been copied, and a pass copies only the frames committed before it started (its `log`): passes
 * repeat, each copying what landed during the one before, until one finds no new frame.
 */
function checkpoint(): void {
  let previousLog = -1;
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    const result = db!.query("PRAGMA wal_checkpoint(PASSIVE)").get() as CheckpointResult;
    if (result.busy !== 0 || result.log <= 0 || result.log === previousLog) return;
    previousLog = result.log;
  }
}

/** Failed checkpoints in a row after which the thread gives up and the writer checkpoints itself again. */
const MAX_FAILURES = 10;

function start(options: CheckpointWorkerStart): void {
  try {
    db = new Database(options.path);
    db.exec("PRAGMA busy_timeout = 1000");
  } catch (error) {
    send({ type: "failed", error: String((error as Error)?.message ?? error) });
    return;
  }
  let failures = 0;
  timer = setInterval(() => {
    try {
      checkpoint();
      failures = 0;
    } catch (error) {
      // Busy or a transient I/O error: the next interval tries again, and the WAL keeps every commit meanwhile.
      if (++failures < MAX_FAILURES) return;
      clearInterval(timer!);
      db?.close();
      db = null;
      send({ type: "failed", error: String((error as Error)?.message ?? error) });
    }
  }, options.intervalMs);
  send({ type: "ready" });
}

function stop(): void {
  if (timer !== null) clearInterval(timer);
  try {
    if (db) checkpoint();
  } catch {
    // The writer's own close checkpoints what is left.
  }
  db?.close();
  db = null;
  send({ type: "stopped" });
}

self.onmessage = (event: MessageEvent<{ type: "start"; options: CheckpointWorkerStart } | { type: "stop" }>) => {
  if (event.data.type === "start") start(event.data.options);
  else stop();
};
