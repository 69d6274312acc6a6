/** One JSON object per line on stdout; `tag` is the plugin name or "core". */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /**
   * A request's line (message "request"): one per request, written by the core (the pipeline for inference
   * requests, the app for other routes); fields in docs/operations.md. Plugins add fields through `ctx.log`
   * (inference) or `annotateRequestLine` (core/request-line.ts, other routes).
   */
  request(fields: Record<string, unknown>): void;
  /**
   * An audit line (message "audit", level info): who did what to which ids, for operator actions (admin
   * routes). Scrubbed like diagnostic lines. Absent only in loggers built by hand in tests.
   */
  audit?(fields: Record<string, unknown>): void;
  child(tag: string): Logger;
  /**
   * A warning written unredacted: only for a secret the operator must see once, on purpose (the admin token
   * generated at the first start). Absent in a logger that does not redact.
   */
  reveal?(message: string, fields: Record<string, unknown>): void;
  /** Lines are dropped (GATEWAY_LOG=silent): a caller may skip building them. */
  readonly quiet?: boolean;
}

import { writeSync } from "node:fs";
import { REDACTED, redact } from "./secrets.ts";

const silent = process.env.GATEWAY_LOG === "silent";

/**
 * Lines are gathered and written once per turn of the event loop (setImmediate, even for a request alone: a line
 * need not go out before the answer it logs), or every 64 KB: one write for all the
 * requests of a turn instead of one per request (a write per access line cost a measurable share of the
 * throughput, stdout being a pipe). They go to stdout through one Bun FileSink, whose writes a graceful stop waits
 * for (`flushLogs`): `process.stdout.write` keeps what a slow pipe did not take yet where `process.exit` drops it.
 * What is gathered when the process exits is written synchronously on the way out; a process killed outright
 * loses at most the lines of its last turn and what the pipe had not taken.
 */
let gathered = "";
let flushScheduled = false;
let sink: import("bun").FileSink | null = null;

/** Hands `data` to stdout after everything handed before it; resolves once written (a promise only while some is pending). */
export function writeStdout(data: string | Uint8Array): Promise<number> | number {
  const writer = (sink ??= Bun.stdout.writer());
  writer.write(data);
  const flushed = writer.flush();
  if (flushed instanceof Promise) flushed.catch(() => {}); // a closed stdout (EPIPE) is no reason to stop serving
  return flushed;
}

function flushLines(): void {
  flushScheduled = false;
  if (gathered === "") return;
  const text = gathered;
  gathered = "";
  writeStdout(text);
}

/** Writes every gathered line and waits (at most `timeoutMs`) until stdout has taken them: before a graceful exit. */
export async function flushLogs(timeoutMs = 30_000): Promise<void> {
  flushLines();
  const flushed = sink?.flush();
  if (flushed instanceof Promise) await Promise.race([flushed.catch(() => {}), Bun.sleep(timeoutMs)]);
}

function emit(line: string): void {
  gathered += line;
  if (gathered.length >= 65_536) flushLines();
  else if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushLines);
  }
}

process.on("exit", () => {
  if (gathered === "") return;
  try {
    writeSync(1, gathered);
  } catch {}
  gathered = "";
});

/** Drizzle's failed-query errors end their message with the bound values ("params: …"): key hashes, names, ids. */
const QUERY_PARAMS = /(\\nparams: )(?:[^"\\]|\\[^n])*/g;
/** A SHA-256 in hex: what the store keeps of a client key and of the admin token. */
const SHA256_HEX = /\b[0-9a-f]{64}\b/g;

/**
 * A diagnostic line (not an access line) as it may be written: secrets masked, and what error texts carry of
 * the store's data, bound query values and key hashes, left out. These lines are rare: a regex or two is fine.
 */
function scrubDiagnostic(line: string): string {
  let out = redact(line);
  if (out.includes("params: ")) out = out.replace(QUERY_PARAMS, `$1${REDACTED}`);
  return out.replace(SHA256_HEX, REDACTED);
}

/** The worker index of this process (core/workers.ts), on every line; undefined (left out of the JSON) in a gateway of one process. */
let workerField: number | undefined;

/** Every line of this process names its worker from now on. */
export function logAsWorker(index: number): void {
  workerField = index;
}

export interface LoggerOptions {
  silent?: boolean;
  /** Where lines go (each a JSON object and a newline); default stdout, gathered per turn of the event loop. */
  sink?: (line: string) => void;
}

export function createLogger(tag = "core", options: LoggerOptions = {}): Logger {
  const quiet = options.silent ?? silent;
  const out = options.sink ?? emit;
  function write(level: string, message: string, fields?: Record<string, unknown>) {
    if (quiet) return;
    out(scrubDiagnostic(JSON.stringify({ time: new Date().toISOString(), level, tag, worker: workerField, message, ...fields })) + "\n");
  }
  return {
    info: (message, fields) => write("info", message, fields),
    warn: (message, fields) => write("warn", message, fields),
    error: (message, fields) => write("error", message, fields),
    // The access line, once per request: only the substring searches of `redact` (no regex unless a key shape is there).
    request(fields) {
      if (quiet) return;
      out(redact(JSON.stringify({ time: new Date().toISOString(), level: "info", tag, worker: workerField, message: "request", ...fields })) + "\n");
    },
    audit: (fields) => write("info", "audit", fields),
    reveal(message, fields) {
      if (quiet) return;
      out(JSON.stringify({ time: new Date().toISOString(), level: "warn", tag, worker: workerField, message, ...fields }) + "\n");
    },
    child: (child) => createLogger(child, options),
    quiet,
  };
}
