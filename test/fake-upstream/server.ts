/**
 * Fake upstream LLM provider for tests and benchmarks (real HTTP via Bun.serve).
 *
 * Request recording and the shared helpers (responses, pacing, stalls, mid-stream errors) live here. The routes
 * come from the vendors' fake modules, which register themselves (registry.ts): every test/fake-upstream/*.ts
 * and test/plugins/providers/<vendor>/fake.ts is loaded at start, so a new vendor's fake edits nothing here.
 *
 * Library use:
 *   const fake = await startFakeUpstream();          // random port, recording on
 *   new OpenAI({ apiKey: "sk-x", baseURL: fake.url + "/v1" })
 *   fake.requests / fake.reset() / await fake.stop()
 *
 * Standalone (benchmarks, recording off):
 *   npx bun test/fake-upstream/server.ts --port 9100
 *   → prints "fake upstream listening on http://127.0.0.1:9100"
 *
 * Scenario control: put `[[fake {json}]]` in the LAST user message's text. See FakeDirective in openai.ts:
 *   usage{prompt_tokens,completion_tokens,total_tokens,cached_tokens,cache_write_tokens,reasoning_tokens}, text,
 *   status + error, delay_ms, chunk_delay_ms, tool_calls[{name,arguments}], no_usage, usage_null, hang_after_chunks,
 *   stream_error_after_chunks, drop_after_chunks, finish_reason, headers.
 */
import { buildErrorBody, buildStreamErrorEvent, type FakeDirective } from "./openai.ts";
import { join } from "node:path";
import { fakeRouteFor } from "./registry.ts";

export interface RecordedRequest {
  method: string;
  /** Path including the query string if any, e.g. "/v1/chat/completions". */
  path: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** Parsed JSON body; the raw text if it is not JSON; null when empty. */
  body: any;
}

export interface FakeUpstream {
  /** e.g. "http://127.0.0.1:PORT" (no trailing slash). OpenAI base URL for clients is url + "/v1". */
  url: string;
  port: number;
  /** Every request received, in order (stays empty when record is false). */
  requests: RecordedRequest[];
  /** Clears `requests` (in place: the same array object stays valid). */
  reset(): void;
  /** Stops the server and closes open connections (including stalled streams). */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** 0 / omitted → random free port. */
  port?: number;
  /** Record requests (default true). Use false for benchmarks. */
  record?: boolean;
  /** Share the port with other processes (SO_REUSEPORT): several fakes on one port, so a benchmark's upstream is not one core. */
  reusePort?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Generic helpers (shared by all wire formats)
// ---------------------------------------------------------------------------------------------

/** Per-request context handed to route handlers. */
export interface Ctx {
  req: Request;
  path: string;
  rawBody: string;
  /** Parsed JSON body (undefined if the body is empty or not JSON; see jsonError). */
  body: any;
  jsonError: boolean;
  /** Aborts when the client disconnects. */
  signal: AbortSignal;
}

let reqCounter = 0;
const REQ_PREFIX = Math.random().toString(36).slice(2, 10);

export function baseHeaders(contentType: string, extra?: Record<string, string>): Record<string, string> {
  const h: Record<string, string> = {
    "content-type": contentType,
    "x-request-id": `req_${REQ_PREFIX}${(++reqCounter).toString(36)}`,
    "openai-processing-ms": "1",
    "openai-version": "2020-10-01",
  };
  if (extra) for (const k in extra) h[k.toLowerCase()] = String(extra[k]);
  return h;
}

export const JSON_CT = "application/json";
export const SSE_CT = "text/event-stream; charset=utf-8";

export function jsonResponse(status: number, body: string, extraHeaders?: Record<string, string>): Response {
  return new Response(body, { status, headers: baseHeaders(JSON_CT, extraHeaders) });
}

/** Sleep that ends early when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (!(ms > 0)) return Promise.resolve();
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export interface StreamControl {
  /** Delay before every event except the first. */
  chunkDelayMs?: number;
  /** Send this many events (excluding the final terminator), then stall forever without closing. */
  hangAfter?: number;
  /** Send this many events (excluding the final terminator), then `errorEvent`, then close. */
  errorAfter?: number;
  /** Send this many events (excluding the final terminator), then, 20 ms later, drop the connection (no end of body). */
  dropAfter?: number;
  errorEvent?: string;
  signal: AbortSignal;
}

const encoder = new TextEncoder();

/**
 * Body stream that emits pre-rendered SSE event strings with optional pacing, stalling or a mid-stream error.
 * The last element of `events` is treated as the terminator (e.g. "data: [DONE]\n\n") for hang/error counting.
 * Client disconnects (cancel or request abort) end all pending waits, so nothing leaks or throws.
 */
export function controlledStream(events: string[], ctl: StreamControl): ReadableStream<Uint8Array> {
  let i = 0;
  let done = false;
  let wake: (() => void) | null = null;
  const dataEvents = events.length - 1;
  const stopAfter = ctl.hangAfter ?? ctl.errorAfter ?? ctl.dropAfter;
  const stopAt = stopAfter === undefined ? -1 : Math.max(0, Math.min(stopAfter, dataEvents));
  const finish = () => {
    done = true;
    const w = wake;
    wake = null;
    w?.();
  };
  ctl.signal.addEventListener("abort", finish, { once: true });
  const wait = (ms: number | null) =>
    new Promise<void>((resolve) => {
      if (done) return resolve();
      const t = ms === null ? null : setTimeout(() => ((wake = null), resolve()), ms);
      wake = () => {
        if (t) clearTimeout(t);
        resolve();
      };
    });

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        if (done) return;
        if (i > 0 && ctl.chunkDelayMs && ctl.chunkDelayMs > 0) {
          await wait(ctl.chunkDelayMs);
          if (done) return;
        }
        if (i === stopAt) {
          if (ctl.hangAfter !== undefined) {
            await wait(null); // stall until the client goes away or the server stops
            return;
          }
          if (ctl.dropAfter !== undefined) {
            // A moment first: an error right behind the events would drop them unsent.
            await wait(20);
            done = true;
            controller.error(new Error("fake upstream dropped the connection"));
            return;
          }
          controller.enqueue(encoder.encode(ctl.errorEvent ?? buildStreamErrorEvent()));
          done = true;
          controller.close();
          return;
        }
        controller.enqueue(encoder.encode(events[i++]!));
        if (i >= events.length) {
          done = true;
          controller.close();
        }
      } catch {
        // Client went away between checks; enqueue/close on a cancelled stream is harmless to ignore.
        done = true;
      }
    },
    cancel() {
      finish();
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Routing: the vendors' fakes register their routes (registry.ts); this file names none of them
// ---------------------------------------------------------------------------------------------

export function openaiError(status: number, err: FakeDirective["error"], extraHeaders?: Record<string, string>): Response {
  return jsonResponse(status, JSON.stringify(buildErrorBody(status, err)), extraHeaders);
}

let fakesLoaded: Promise<void> | undefined;

/**
 * Loads every vendor's fake module once: test/fake-upstream/*.ts (not tests, not this file or the registry) and
 * test/plugins/providers/<vendor>/fake.ts. Each registers its routes when it is evaluated.
 */
export function loadFakes(): Promise<void> {
  fakesLoaded ??= (async () => {
    const here = import.meta.dir;
    const modules: string[] = [];
    for (const file of new Bun.Glob("*.ts").scanSync({ cwd: here })) {
      if (file.endsWith(".test.ts") || file === "server.ts" || file === "registry.ts" || file.endsWith(".d.ts")) continue;
      modules.push(join(here, file));
    }
    const testRoot = join(here, "..");
    for (const file of new Bun.Glob("plugins/providers/*/fake.ts").scanSync({ cwd: testRoot })) modules.push(join(testRoot, file));
    modules.sort();
    for (const module of modules) await import(module);
  })();
  return fakesLoaded;
}

function notFound(method: string, path: string): Response {
  return openaiError(404, { message: `Invalid URL (${method} ${path})`, type: "invalid_request_error", code: null });
}

/** Extracts "/path?query" from an absolute request URL without constructing a URL object. */
function pathOf(url: string): string {
  const p = url.indexOf("/", url.indexOf("//") + 2);
  return p < 0 ? "/" : url.slice(p);
}

export async function startFakeUpstream(options: StartOptions = {}): Promise<FakeUpstream> {
  await loadFakes();
  const record = options.record ?? true;
  const requests: RecordedRequest[] = [];

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    reusePort: options.reusePort ?? false,
    development: false,
    idleTimeout: 0, // stalled streams / long delays must not be cut by Bun's 10 s default
    async fetch(req) {
      const method = req.method;
      const fullPath = pathOf(req.url);
      const q = fullPath.indexOf("?");
      const path = q < 0 ? fullPath : fullPath.slice(0, q);

      const rawBody = method === "GET" || method === "HEAD" ? "" : await req.text();
      let body: any = undefined;
      let jsonError = false;
      if (rawBody !== "") {
        try {
          body = JSON.parse(rawBody);
        } catch {
          jsonError = true;
        }
      }
      if (record) {
        const headers: Record<string, string> = {};
        req.headers.forEach((v, k) => {
          headers[k] = v;
        });
        requests.push({ method, path: fullPath, headers, body: jsonError ? rawBody : rawBody === "" ? null : body });
      }

      const ctx: Ctx = { req, path: fullPath, rawBody, body, jsonError, signal: req.signal };
      const handler = fakeRouteFor(method, path);
      if (!handler) return notFound(method, path);
      try {
        return await handler(ctx);
      } catch (e) {
        return openaiError(500, { message: `fake upstream internal error: ${(e as Error)?.message ?? e}` });
      }
    },
    error(e) {
      return openaiError(500, { message: `fake upstream internal error: ${e?.message ?? e}` });
    },
  });

  const port = server.port as number;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    reset() {
      requests.length = 0;
    },
    async stop() {
      await server.stop(true);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Standalone: npx bun test/fake-upstream/server.ts --port 9100 [--reuse-port]
// ---------------------------------------------------------------------------------------------

if (import.meta.main) {
  const args = process.argv.slice(2);
  let port = 9100;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--port" && args[i + 1]) port = Number(args[++i]);
    else if (a.startsWith("--port=")) port = Number(a.slice("--port=".length));
  }
  const fake = await startFakeUpstream({ port, record: false, reusePort: args.includes("--reuse-port") });
  console.log(`fake upstream listening on ${fake.url}`);
}
