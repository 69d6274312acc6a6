/**
 * The metering thread (see metering-thread.ts): its own connection to the file, on which it writes the
 * batches of generations the event loop sends, each in one transaction that also stores the metering
 * cursor. It answers every batch with the cursor now stored, so the event loop settles exactly what is
 * written, whatever happened.
 */
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import type { Generation } from "../repository.ts";
import { WRITER_AUTOCHECKPOINT_PAGES } from "./checkpointer.ts";
import { isPermanentWriteError } from "./group-commit.ts";
import { unpackBatch, type PackedBatch } from "./batch-codec.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import { sqliteSchema } from "./schema.ts";

declare const self: Worker;

export type MeteringThreadRequest =
  | { type: "start"; path: string; busyTimeoutMs: number }
  /** `seqs[i]`: the queue number of the i-th generation of the packed batch. */
  | { type: "write"; batch: PackedBatch; seqs: number[] }
  | { type: "stop" };

export type MeteringThreadReply =
  | { type: "ready" }
  | { type: "failed"; error: string }
  /** The batch is stored through `cursor`; `rejected`: rows the schema refused (set aside, logged by the event loop). */
  | { type: "written"; cursor: number; rejected: { generation: Generation; error: string }[] }
  /** A failure that may pass (busy, I/O): stored through `cursor` (the rows before it, when written one by one). */
  | { type: "retry"; cursor: number; error: string; rejected: { generation: Generation; error: string }[] }
  | { type: "stopped" };

let client: Database | null = null;
let writer: ReturnType<typeof createMeteringWriter> | null = null;
let cursor = -1;

function reply(message: MeteringThreadReply): void {
  self.postMessage(message);
}

function start(path: string, busyTimeoutMs: number): void {
  try {
    // The event loop opened the file first (migrations applied, WAL on): only this connection's settings here.
    client = new Database(path);
    client.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    client.exec("PRAGMA synchronous = NORMAL");
    client.exec("PRAGMA cache_size = -8192");
    // Off the event loop already: its own automatic checkpoint stays, as a backstop to the checkpointer thread.
    client.exec(`PRAGMA wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
    client.exec("PRAGMA foreign_keys = ON");
    writer = createMeteringWriter(drizzle({ client, schema: sqliteSchema }), client, { holdsInTable: false });
    cursor = (client.query("select seq from metering_cursor where id = 1").get() as { seq: number } | null)?.seq ?? -1;
  } catch (error) {
    client?.close();
    client = null;
    reply({ type: "failed", error: String((error as Error)?.message ?? error) });
    return;
  }
  reply({ type: "ready" });
}

function write(batch: Generation[], seqs: number[]): MeteringThreadReply {
  const through = seqs[seqs.length - 1]!;
  try {
    writer!.write(batch, through);
    cursor = through;
    return { type: "written", cursor, rejected: [] };
  } catch (error) {
    if (!isPermanentWriteError(error)) return { type: "retry", cursor, error: String(error), rejected: [] };
  }
  // A row the schema refuses: one by one, so only the bad rows are set aside.
  const rejected: { generation: Generation; error: string }[] = [];
  for (let index = 0; index < batch.length; index++) {
    try {
      writer!.write([batch[index]!], seqs[index]!);
      cursor = seqs[index]!;
    } catch (error) {
      if (!isPermanentWriteError(error)) return { type: "retry", cursor, error: String(error), rejected };
      rejected.push({ generation: batch[index]!, error: String(error) });
    }
  }
  try {
    writer!.write([], through); // past the rows set aside at the end
    cursor = through;
  } catch (error) {
    return { type: "retry", cursor, error: String(error), rejected };
  }
  return { type: "written", cursor, rejected };
}

self.onmessage = (event: MessageEvent<MeteringThreadRequest>) => {
  const message = event.data;
  if (message.type === "start") start(message.path, message.busyTimeoutMs);
  else if (message.type === "write") reply(write(unpackBatch(message.batch), message.seqs));
  else {
    client?.close();
    client = null;
    reply({ type: "stopped" });
  }
};
