/**
 * Fake upstream LLM provider for tests and benchmarks (real HTTP via Bun.serve).
 *
 * Routing, request recording, scenario control (directives, delays, stalls, mid-stream errors) live here;
 * wire-format rendering lives in per-format modules (openai.ts; Anthropic/Gemini to be added alongside).
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
import {
  INVALID_API_KEY_JSON,
  MODELS_LIST_JSON,
  FAKE_MODELS,
  buildChatCompletion,
  buildErrorBody,
  buildModelObject,
  buildReplySpec,
  buildStreamErrorEvent,
  buildStreamEvents,
  parseDirective,
  type FakeDirective,
} from "./openai.ts";
import { handleResponses } from "./responses.ts";
import { handleImages } from "./images.ts";
import { geminiModels } from "./gemini.ts";
import { handleAnthropicMessages } from "./anthropic.ts";

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

type Handler = (ctx: Ctx) => Response | Promise<Response>;

let reqCounter = 0;
const REQ_PREFIX = Math.random().toString(36).slice(2, 10);

function baseHeaders(contentType: string, extra?: Record<string, string>): Record<string, string> {
  const h: Record<string, string> = {
    "content-type": contentType,
    "x-request-id": `req_${REQ_PREFIX}${(++reqCounter).toString(36)}`,
    "openai-processing-ms": "1",
    "openai-version": "2020-10-01",
  };
  if (extra) for (const k in extra) h[k.toLowerCase()] = String(extra[k]);
  return h;
}

const JSON_CT = "application/json";
const SSE_CT = "text/event-stream; charset=utf-8";

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
// OpenAI Chat Completions
// ---------------------------------------------------------------------------------------------

function hasBearer(req: Request): boolean {
  const a = req.headers.get("authorization");
  if (!a || a.length <= 7) return false;
  if (!(a.startsWith("Bearer ") || a.startsWith("bearer "))) return false;
  return a.slice(7).trim().length > 0;
}

function openaiError(status: number, err: FakeDirective["error"], extraHeaders?: Record<string, string>): Response {
  return jsonResponse(status, JSON.stringify(buildErrorBody(status, err)), extraHeaders);
}

async function chatCompletions(ctx: Ctx): Promise<Response> {
  if (!hasBearer(ctx.req)) return jsonResponse(401, INVALID_API_KEY_JSON);
  if (ctx.jsonError || !ctx.body || typeof ctx.body !== "object") {
    return openaiError(400, {
      message:
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
    });
  }
  const body = ctx.body;
  if (typeof body.model !== "string" || body.model === "") {
    return openaiError(400, { message: "you must provide a model parameter", code: null });
  }
  if (!Array.isArray(body.messages)) {
    return openaiError(400, { message: "Missing required parameter: 'messages'.", param: "messages", code: "missing_required_parameter" });
  }

  // Directive: cheap substring check on the raw body before any parsing work.
  let d: FakeDirective | null = null;
  if (ctx.rawBody.includes("[[fake")) {
    try {
      d = parseDirective(body);
    } catch (e) {
      return openaiError(400, { message: `fake upstream: ${(e as Error).message}`, code: "fake_directive_error" });
    }
  }

  const stream = body.stream === true;
  const includeUsage = stream && body.stream_options?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);

  if (d === null) {
    // Hot path: no directive.
    const spec = buildReplySpec(body, null, created);
    if (!stream) return jsonResponse(200, JSON.stringify(buildChatCompletion(spec)));
    return new Response(buildStreamEvents(spec, includeUsage).join(""), { status: 200, headers: baseHeaders(SSE_CT) });
  }

  const extraHeaders = d.headers;
  if (d.delay_ms) await sleep(d.delay_ms, ctx.signal);

  const status = d.status ?? 0;
  if (status >= 400 || (d.error !== undefined && d.stream_error_after_chunks === undefined)) {
    return openaiError(status >= 400 ? status : 500, d.error, extraHeaders);
  }

  const spec = buildReplySpec(body, d, created);

  if (!stream) {
    if (d.hang_after_chunks !== undefined) {
      // Headers go out, the body never arrives.
      return new Response(controlledStream([""], { hangAfter: 0, signal: ctx.signal }), {
        status: 200,
        headers: baseHeaders(JSON_CT, extraHeaders),
      });
    }
    return jsonResponse(200, JSON.stringify(buildChatCompletion(spec)), extraHeaders);
  }

  const events = buildStreamEvents(spec, includeUsage);
  const controlled = d.chunk_delay_ms || d.hang_after_chunks !== undefined || d.stream_error_after_chunks !== undefined || d.drop_after_chunks !== undefined;
  if (!controlled) return new Response(events.join(""), { status: 200, headers: baseHeaders(SSE_CT, extraHeaders) });
  const bodyStream = controlledStream(events, {
    chunkDelayMs: d.chunk_delay_ms,
    hangAfter: d.hang_after_chunks,
    errorAfter: d.hang_after_chunks === undefined ? d.stream_error_after_chunks : undefined,
    dropAfter: d.drop_after_chunks,
    errorEvent: buildStreamErrorEvent(d.error),
    signal: ctx.signal,
  });
  return new Response(bodyStream, { status: 200, headers: baseHeaders(SSE_CT, extraHeaders) });
}

function listModels(ctx: Ctx): Response {
  if (!hasBearer(ctx.req)) return jsonResponse(401, INVALID_API_KEY_JSON);
  return jsonResponse(200, MODELS_LIST_JSON);
}

function retrieveModel(ctx: Ctx): Response {
  if (!hasBearer(ctx.req)) return jsonResponse(401, INVALID_API_KEY_JSON);
  const id = decodeURIComponent(ctx.path.slice("/v1/models/".length).split("?")[0]!);
  if (!FAKE_MODELS.includes(id)) {
    return openaiError(404, { message: `The model '${id}' does not exist`, code: "model_not_found" });
  }
  return jsonResponse(200, JSON.stringify(buildModelObject(id)));
}

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------

/** Exact routes, keyed by "METHOD /path" (path without query string). */
const ROUTES = new Map<string, Handler>([
  ["POST /v1/chat/completions", chatCompletions],
  ["POST /v1/responses", handleResponses],
  ["POST /v1/images/generations", handleImages],
  ["POST /v1/messages", handleAnthropicMessages],
  ["GET /v1/models", listModels],
]);

/** Prefix routes, checked in order after exact routes miss. */
const PREFIX_ROUTES: { method: string; prefix: string; handler: Handler }[] = [
  { method: "GET", prefix: "/v1/models/", handler: retrieveModel },
  { method: "POST", prefix: "/v1beta/models/", handler: geminiModels },
];

function notFound(method: string, path: string): Response {
  return openaiError(404, { message: `Invalid URL (${method} ${path})`, type: "invalid_request_error", code: null });
}

/** Extracts "/path?query" from an absolute request URL without constructing a URL object. */
function pathOf(url: string): string {
  const p = url.indexOf("/", url.indexOf("//") + 2);
  return p < 0 ? "/" : url.slice(p);
}

export async function startFakeUpstream(options: StartOptions = {}): Promise<FakeUpstream> {
  const record = options.record ?? true;
  const requests: RecordedRequest[] = [];

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
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
      let handler = ROUTES.get(method + " " + path);
      if (!handler) {
        for (const r of PREFIX_ROUTES) {
          if (r.method === method && path.startsWith(r.prefix)) {
            handler = r.handler;
            break;
          }
        }
      }
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
// Standalone: npx bun test/fake-upstream/server.ts --port 9100
// ---------------------------------------------------------------------------------------------

if (import.meta.main) {
  const args = process.argv.slice(2);
  let port = 9100;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--port" && args[i + 1]) port = Number(args[++i]);
    else if (a.startsWith("--port=")) port = Number(a.slice("--port=".length));
  }
  const fake = await startFakeUpstream({ port, record: false });
  console.log(`fake upstream listening on ${fake.url}`);
}
