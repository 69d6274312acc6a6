/**
 * A misbehaving LLM provider for fault tests: a raw TCP server (node:net) that reads an HTTP/1.1 request and
 * answers it the way a broken provider, a proxy or a captive portal would. Raw TCP because most faults are
 * below what an HTTP server library lets one write: a reset in the middle of the status line, a body
 * shorter or longer than its content-length, a stream that stops without closing.
 *
 * Wire formats, chosen by the path: `.../chat/completions` (OpenAI chat), `.../messages` (Anthropic
 * Messages), `.../responses` (OpenAI Responses). Point a provider's base URL at `url + "/v1"` (OpenAI and
 * OpenAI-compatible vendors) or at `url` (Anthropic).
 *
 * The scenario is chosen per request by a directive in the request's text (the last one wins):
 * `[[fault <scenario> <tag>]]`, e.g. `[[fault reset_mid_stream t42]]`. The tag is free (letters, digits,
 * `-`, `_`); tests give every request its own so they can assert it reached the upstream exactly once.
 * No directive: `normal`.
 *
 * Every request is recorded (`requests`, `count(tag)`), with the provider key it carried, so a test can
 * assert that no request was sent twice and that the key it received never reaches a client.
 *
 * The server keeps connections alive after complete answers (so a client's connection pool reuses them,
 * as with a real provider), and closes, resets or stalls them as the scenario says.
 */
import net from "node:net";
import { gzipSync } from "node:zlib";

/** keepalive_lines: how often, and for how long (longer than the fault test's idle timeout, 300 ms). */
const KEEPALIVE_EVERY_MS = 100;
const KEEPALIVE_FOR_MS = 700;

/** What the upstream does with one request. Each has a streaming and a non-streaming form (see SCENARIOS). */
export type FaultScenario = keyof typeof SCENARIOS;

/** One line per scenario: what a stream request and a non-stream request receive. */
export const SCENARIOS = {
  normal: "a complete, honest answer (the control case)",
  reset_before_headers: "the request is read, then the connection is reset: not a byte of answer",
  reset_mid_headers: "half a status line and header block, then a reset",
  reset_mid_body: "headers, then half the JSON body (stream: half the first SSE frame), then a reset",
  reset_mid_stream: "stream: headers and the first text frames, then a reset; non-stream: a chunked JSON body reset after its first chunk",
  stall_mid_body: "headers and half the JSON body (stream: half the first SSE frame), then silence with the connection open",
  stall_mid_stream: "stream: headers and the first text frames, then silence; non-stream: a chunked JSON body that stops after its first chunk",
  short_body: "content-length larger than the body sent, then the connection closes (stream: the frames stop before the end)",
  long_body: "content-length smaller than the body sent: the declared length ends inside the JSON (stream: inside a frame); the extra bytes follow on a kept-alive connection",
  gzip: "content-encoding: gzip, a valid gzip of a complete answer (JSON or the whole SSE stream)",
  html_200: "200 with an HTML page (a captive portal / CDN error page) instead of the API answer",
  wrong_mode: "the other mode's answer: a complete JSON answer (application/json) to a stream request, a complete SSE stream to a non-stream one",
  no_usage: "a complete answer with no usage at all (no usage field; no usage frame)",
  null_usage: "a complete answer whose usage is null",
  usage_negative: "usage with negative token counts",
  usage_fractional: "usage with fractional token counts",
  usage_1e15: "usage claiming 1e15 output tokens",
  usage_1e308: "usage claiming 1e308 input and output tokens",
  usage_negative_cached: "usage with a negative cached-token count (input - cached would bill more input than sent)",
  error_401_echo_key: "401 whose error message echoes the provider key the request carried",
  keepalive_lines: `DeepSeek's way of waiting: headers, then an empty line (stream: an SSE comment) every ${KEEPALIVE_EVERY_MS} ms for ${KEEPALIVE_FOR_MS} ms, then the complete answer (non-stream: chunked, no content-length)`,
} as const;

export type UpstreamWire = "chat" | "anthropic" | "responses";

export interface FaultyRequest {
  scenario: FaultScenario;
  tag: string | null;
  wire: UpstreamWire | null;
  path: string;
  stream: boolean;
  /** The provider key the request carried (Bearer token or x-api-key), "" when none. */
  key: string;
  headers: Record<string, string>;
  body: any;
}

export interface FaultyUpstream {
  /** http://127.0.0.1:PORT, no trailing slash. */
  url: string;
  port: number;
  /** Every request received, in order. */
  requests: FaultyRequest[];
  /** How many requests carried this tag. */
  count(tag: string): number;
  /** Every provider key a request carried. */
  keysSeen(): Set<string>;
  reset(): void;
  /** Closes the listener and every connection (stalled ones included). */
  stop(): Promise<void>;
}

/** The answer's text, word by word in streams. */
export const FAULTY_TEXT = "The faulty upstream answers in nine short words.";
/** The text frames every partial-stream scenario sends before it fails: a non-empty prefix of FAULTY_TEXT. */
export const PARTIAL_TEXT_FRAMES = 2;
/** Honest usage: what `normal`, `gzip`, `wrong_mode` report. */
export const HONEST_USAGE = { prompt: 20, completion: 10 } as const;

/** The directive that selects a scenario, to put in the request's (last) user text. */
export function faultDirective(scenario: FaultScenario, tag: string): string {
  return `[[fault ${scenario} ${tag}]]`;
}

const DIRECTIVE = /\[\[fault ([a-z0-9_]+)(?: ([A-Za-z0-9_-]+))?\]\]/g;

/** Usage numbers as JSON source text, so out-of-range values (1e308) go out literally. */
type UsageSpec = { prompt: string; completion: string; total: string; cached: string } | "none" | "null";

function usageOf(scenario: FaultScenario): UsageSpec {
  switch (scenario) {
    case "no_usage":
      return "none";
    case "null_usage":
      return "null";
    case "usage_negative":
      return { prompt: "-5", completion: "-7", total: "-12", cached: "0" };
    case "usage_fractional":
      return { prompt: "20.5", completion: "10.25", total: "30.75", cached: "0" };
    case "usage_1e15":
      return { prompt: "20", completion: "1e15", total: "1000000000000020", cached: "0" };
    case "usage_1e308":
      return { prompt: "1e308", completion: "1e308", total: "1e308", cached: "0" };
    case "usage_negative_cached":
      return { prompt: "20", completion: "10", total: "30", cached: "-1000" };
    default:
      return { prompt: String(HONEST_USAGE.prompt), completion: String(HONEST_USAGE.completion), total: String(HONEST_USAGE.prompt + HONEST_USAGE.completion), cached: "0" };
  }
}

const WORDS = FAULTY_TEXT.split(" ").map((word, index) => (index === 0 ? word : " " + word));

// ---------------------------------------------------------------------------------------------
// Wire formats: a complete JSON answer and the SSE frames of a complete stream, with the usage spliced in
// as source text. `textFrames` is the index just past the PARTIAL_TEXT_FRAMES-th text frame.
// ---------------------------------------------------------------------------------------------

interface Rendered {
  json: string;
  frames: string[];
  /** Frames [0, cut) carry PARTIAL_TEXT_FRAMES words and nothing final. */
  cut: number;
}

let serial = 0;
const RUN = Math.random().toString(36).slice(2, 8);
const nextId = () => `${RUN}${(++serial).toString(36)}`;
const USAGE = '"__USAGE__"';
const withUsage = (json: string, usage: string) => json.replace(USAGE, usage);

function renderChat(model: string, spec: UsageSpec): Rendered {
  const id = `chatcmpl-faulty${nextId()}`;
  const created = Math.floor(Date.now() / 1000);
  const usage =
    typeof spec === "string"
      ? spec
      : `{"prompt_tokens":${spec.prompt},"completion_tokens":${spec.completion},"total_tokens":${spec.total},"prompt_tokens_details":{"cached_tokens":${spec.cached},"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`;
  const answer: Record<string, unknown> = {
    id,
    object: "chat.completion",
    created,
    model,
    choices: [{ index: 0, message: { role: "assistant", content: FAULTY_TEXT, refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }],
  };
  if (spec !== "none") answer.usage = "__USAGE__";
  const json = withUsage(JSON.stringify(answer), usage);
  const head = { id, object: "chat.completion.chunk", created, model, system_fingerprint: "fp_faulty" };
  const frame = (choices: unknown[], extra = "") => `data: ${JSON.stringify({ ...head, choices }).slice(0, -1)}${extra}}\n\n`;
  const usageNull = spec === "none" ? "" : ',"usage":null';
  const frames = [frame([{ index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }], usageNull)];
  for (const word of WORDS) frames.push(frame([{ index: 0, delta: { content: word }, logprobs: null, finish_reason: null }], usageNull));
  frames.push(frame([{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }], usageNull));
  if (spec !== "none") frames.push(frame([], `,"usage":${usage}`));
  frames.push("data: [DONE]\n\n");
  return { json, frames, cut: 1 + PARTIAL_TEXT_FRAMES };
}

function renderAnthropic(model: string, spec: UsageSpec): Rendered {
  const id = `msg_faulty${nextId()}`;
  const full = typeof spec === "string" ? spec : `{"input_tokens":${spec.prompt},"cache_creation_input_tokens":0,"cache_read_input_tokens":${spec.cached},"output_tokens":${spec.completion},"service_tier":"standard"}`;
  const start = typeof spec === "string" ? spec : `{"input_tokens":${spec.prompt},"cache_creation_input_tokens":0,"cache_read_input_tokens":${spec.cached},"output_tokens":1}`;
  const final = typeof spec === "string" ? spec : `{"output_tokens":${spec.completion}}`;
  const message = (content: unknown[], stopReason: string | null) => {
    const value: Record<string, unknown> = { id, type: "message", role: "assistant", model, content, stop_reason: stopReason, stop_sequence: null };
    if (spec !== "none") value.usage = "__USAGE__";
    return value;
  };
  const json = withUsage(JSON.stringify(message([{ type: "text", text: FAULTY_TEXT }], "end_turn")), full);
  const event = (name: string, data: unknown, usage?: string) => `event: ${name}\ndata: ${usage === undefined ? JSON.stringify(data) : withUsage(JSON.stringify(data), usage)}\n\n`;
  const frames = [
    event("message_start", { type: "message_start", message: message([], null) }, start),
    event("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
    event("ping", { type: "ping" }),
  ];
  for (const word of WORDS) frames.push(event("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: word } }));
  frames.push(event("content_block_stop", { type: "content_block_stop", index: 0 }));
  const delta: Record<string, unknown> = { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null } };
  if (spec !== "none") delta.usage = "__USAGE__";
  frames.push(event("message_delta", delta, final));
  frames.push(event("message_stop", { type: "message_stop" }));
  return { json, frames, cut: 3 + PARTIAL_TEXT_FRAMES };
}

function renderResponses(model: string, spec: UsageSpec): Rendered {
  const id = `resp_faulty${nextId()}`;
  const messageId = `msg_faulty${nextId()}`;
  const usage =
    typeof spec === "string"
      ? spec
      : `{"input_tokens":${spec.prompt},"input_tokens_details":{"cached_tokens":${spec.cached}},"output_tokens":${spec.completion},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":${spec.total}}`;
  const part = { type: "output_text", text: FAULTY_TEXT, annotations: [], logprobs: [] };
  const item = { type: "message", id: messageId, status: "completed", role: "assistant", content: [part] };
  const response = (status: string, output: unknown[], withUsageField: boolean) => {
    const value: Record<string, unknown> = {
      id, object: "response", created_at: Math.floor(Date.now() / 1000), status, error: null, incomplete_details: null, instructions: null,
      max_output_tokens: null, model, output, parallel_tool_calls: true, previous_response_id: null, reasoning: { effort: null, summary: null },
      store: false, temperature: 1, text: { format: { type: "text" } }, tool_choice: "auto", tools: [], top_p: 1, truncation: "disabled", metadata: {},
    };
    if (withUsageField) value.usage = "__USAGE__";
    return value;
  };
  const json = withUsage(JSON.stringify(response("completed", [item], spec !== "none")), usage);
  let sequence = 0;
  const event = (type: string, payload: Record<string, unknown>, usageText?: string) => {
    const text = JSON.stringify({ type, sequence_number: sequence++, ...payload });
    return `event: ${type}\ndata: ${usageText === undefined ? text : withUsage(text, usageText)}\n\n`;
  };
  const at = { item_id: messageId, output_index: 0, content_index: 0 };
  const frames = [
    event("response.created", { response: response("in_progress", [], true) }, "null"),
    event("response.in_progress", { response: response("in_progress", [], true) }, "null"),
    event("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }),
    event("response.content_part.added", { ...at, part: { ...part, text: "" } }),
  ];
  for (const word of WORDS) frames.push(event("response.output_text.delta", { ...at, delta: word, logprobs: [] }));
  frames.push(event("response.output_text.done", { ...at, text: FAULTY_TEXT, logprobs: [] }));
  frames.push(event("response.content_part.done", { ...at, part }));
  frames.push(event("response.output_item.done", { output_index: 0, item }));
  frames.push(event("response.completed", { response: response("completed", [item], spec !== "none") }, spec === "none" ? undefined : usage));
  return { json, frames, cut: 4 + PARTIAL_TEXT_FRAMES };
}

function render(wire: UpstreamWire, model: string, scenario: FaultScenario): Rendered {
  const spec = usageOf(scenario);
  return wire === "chat" ? renderChat(model, spec) : wire === "anthropic" ? renderAnthropic(model, spec) : renderResponses(model, spec);
}

function echoKeyError(wire: UpstreamWire, key: string): string {
  if (wire === "anthropic") return JSON.stringify({ type: "error", error: { type: "authentication_error", message: `invalid x-api-key: ${key}` }, request_id: `req_faulty${nextId()}` });
  return JSON.stringify({
    error: {
      message: `Incorrect API key provided: ${key}. You can find your API key at https://platform.openai.com/account/api-keys.`,
      type: "invalid_request_error",
      param: null,
      code: "invalid_api_key",
    },
  });
}

const HTML_PAGE =
  "<!DOCTYPE html><html><head><title>Sign in to the network</title></head><body><h1>Welcome to Hotel Wi-Fi</h1>" +
  '<p>Please accept the terms of use to continue.</p><form method="post" action="/login"><button>Accept</button></form></body></html>';

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 on a raw socket
// ---------------------------------------------------------------------------------------------

interface ParsedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** One complete request from the front of `buffer`, and how many bytes it took; null while incomplete. */
function parseRequest(buffer: Buffer): { request: ParsedRequest; used: number } | null {
  const end = buffer.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = buffer.subarray(0, end).toString("latin1").split("\r\n");
  const [method = "", path = ""] = lines[0]!.split(" ");
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const start = end + 4;
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    const parts: Buffer[] = [];
    let at = start;
    for (;;) {
      const lineEnd = buffer.indexOf("\r\n", at);
      if (lineEnd < 0) return null;
      const size = parseInt(buffer.subarray(at, lineEnd).toString("latin1"), 16);
      if (!(size >= 0)) throw new Error("bad chunk size");
      if (buffer.length < lineEnd + 2 + size + 2) return null;
      if (size === 0) {
        const trailerEnd = buffer.indexOf("\r\n\r\n", lineEnd);
        const used = buffer.subarray(lineEnd, lineEnd + 4).toString("latin1") === "\r\n\r\n" ? lineEnd + 4 : trailerEnd < 0 ? -1 : trailerEnd + 4;
        if (used < 0) return null;
        return { request: { method, path, headers, body: Buffer.concat(parts) }, used };
      }
      parts.push(buffer.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = Number(headers["content-length"] ?? 0);
  if (buffer.length < start + length) return null;
  return { request: { method, path, headers, body: buffer.subarray(start, start + length) }, used: start + length };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Time for the peer to read what was written before the next blow (a reset discards unread data). */
const SETTLE_MS = 40;

function head(status: string, headers: Record<string, string | number>): string {
  let text = `HTTP/1.1 ${status}\r\n`;
  for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
  return text + "\r\n";
}

const chunk = (data: Buffer | string) => {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  return Buffer.concat([Buffer.from(bytes.length.toString(16) + "\r\n"), bytes, Buffer.from("\r\n")]);
};
const LAST_CHUNK = "0\r\n\r\n";
const JSON_TYPE = "application/json";
const SSE_TYPE = "text/event-stream; charset=utf-8";

function wireOf(path: string): UpstreamWire | null {
  const bare = path.split("?")[0]!;
  if (bare.endsWith("/chat/completions")) return "chat";
  if (bare.endsWith("/messages")) return "anthropic";
  if (bare.endsWith("/responses")) return "responses";
  return null;
}

/** Starts the faulty upstream on a random port of 127.0.0.1. */
export async function startFaultyUpstream(): Promise<FaultyUpstream> {
  const requests: FaultyRequest[] = [];
  const sockets = new Set<net.Socket>();

  /** Answers one request; resolves true when the connection stays usable for the next one. */
  async function answer(socket: net.Socket, request: ParsedRequest): Promise<boolean> {
    const raw = request.body.toString("utf8");
    let body: any = null;
    try {
      body = raw === "" ? null : JSON.parse(raw);
    } catch {
      body = raw;
    }
    let scenario: FaultScenario = "normal";
    let tag: string | null = null;
    for (const match of raw.matchAll(DIRECTIVE)) {
      if (match[1]! in SCENARIOS) scenario = match[1] as FaultScenario;
      tag = match[2] ?? null;
    }
    const wire = wireOf(request.path);
    const stream = body?.stream === true;
    const auth = request.headers.authorization ?? "";
    const key = request.headers["x-api-key"] ?? (/^bearer /i.test(auth) ? auth.slice(7).trim() : "");
    requests.push({ scenario, tag, wire, path: request.path, stream, key, headers: request.headers, body });

    const write = (data: string | Buffer) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.write(data, () => resolve())));
    const reset = async () => {
      await sleep(SETTLE_MS);
      if (!socket.destroyed) socket.resetAndDestroy();
    };
    const stall = () => new Promise<boolean>((resolve) => socket.once("close", () => resolve(false)));

    if (!wire) {
      const text = JSON.stringify({ error: { message: `faulty upstream: no route ${request.method} ${request.path}`, type: "invalid_request_error", code: null } });
      await write(head("404 Not Found", { "content-type": JSON_TYPE, "content-length": Buffer.byteLength(text) }) + text);
      return true;
    }
    const model = typeof body?.model === "string" ? body.model : "unknown";
    const rendered = render(wire, model, scenario);
    const json = Buffer.from(rendered.json);
    const sse = Buffer.from(rendered.frames.join(""));
    const partialFrames = rendered.frames.slice(0, rendered.cut).join("");
    const jsonHead = (length: number, extra: Record<string, string> = {}) =>
      head("200 OK", { "content-type": JSON_TYPE, "content-length": length, "x-request-id": `req_${nextId()}`, ...extra });
    const sseHead = (extra: Record<string, string | number> = { "transfer-encoding": "chunked" }) =>
      head("200 OK", { "content-type": SSE_TYPE, "cache-control": "no-cache", "x-request-id": `req_${nextId()}`, ...extra });
    const half = (bytes: Buffer) => bytes.subarray(0, Math.floor(bytes.length / 2));
    const fullJson = async () => {
      await write(jsonHead(json.length) + rendered.json);
      return true;
    };
    const fullStream = async () => {
      await write(sseHead());
      for (const frame of rendered.frames) await write(chunk(frame));
      await write(LAST_CHUNK);
      return true;
    };

    switch (scenario) {
      case "reset_before_headers":
        await reset();
        return false;
      case "reset_mid_headers":
        await write(`HTTP/1.1 200 OK\r\ncontent-type: ${stream ? SSE_TYPE : JSON_TYPE}\r\ncontent-le`);
        await reset();
        return false;
      case "reset_mid_body":
      case "stall_mid_body":
        if (stream) {
          await write(sseHead());
          await write(chunk(half(Buffer.from(rendered.frames[0]!))));
        } else {
          await write(jsonHead(json.length));
          await write(half(json));
        }
        if (scenario === "stall_mid_body") return stall();
        await reset();
        return false;
      case "reset_mid_stream":
      case "stall_mid_stream":
        if (stream) {
          await write(sseHead());
          for (const frame of rendered.frames.slice(0, rendered.cut)) await write(chunk(frame));
        } else {
          await write(head("200 OK", { "content-type": JSON_TYPE, "transfer-encoding": "chunked" }));
          await write(chunk(half(json)));
        }
        if (scenario === "stall_mid_stream") return stall();
        await reset();
        return false;
      case "short_body":
        if (stream) {
          await write(sseHead({ "content-length": sse.length }));
          await write(partialFrames);
        } else {
          await write(jsonHead(json.length + 64));
          await write(json);
        }
        await sleep(SETTLE_MS);
        socket.end();
        return false;
      case "long_body":
        if (stream) {
          const declared = Buffer.byteLength(partialFrames) + Math.floor(Buffer.byteLength(rendered.frames[rendered.cut]!) / 2);
          await write(sseHead({ "content-length": declared }));
          await write(sse);
        } else {
          await write(jsonHead(json.length - 24));
          await write(json);
        }
        // The connection stays open: a client that reuses it reads the extra bytes as its next answer.
        return true;
      case "gzip":
        if (stream) {
          const zipped = gzipSync(sse);
          await write(sseHead({ "transfer-encoding": "chunked", "content-encoding": "gzip" }));
          const third = Math.ceil(zipped.length / 3);
          for (let at = 0; at < zipped.length; at += third) await write(chunk(zipped.subarray(at, at + third)));
          await write(LAST_CHUNK);
        } else {
          const zipped = gzipSync(json);
          await write(jsonHead(zipped.length, { "content-encoding": "gzip" }));
          await write(zipped);
        }
        return true;
      case "keepalive_lines":
        await write(stream ? sseHead() : head("200 OK", { "content-type": JSON_TYPE, "transfer-encoding": "chunked", "x-request-id": `req_${nextId()}` }));
        for (let waited = 0; waited < KEEPALIVE_FOR_MS; waited += KEEPALIVE_EVERY_MS) {
          await write(chunk(stream ? ": keep-alive\n\n" : "\n"));
          await sleep(KEEPALIVE_EVERY_MS);
        }
        if (stream) for (const frame of rendered.frames) await write(chunk(frame));
        else await write(chunk(json));
        await write(LAST_CHUNK);
        return true;
      case "html_200":
        await write(head("200 OK", { "content-type": "text/html; charset=utf-8", "content-length": Buffer.byteLength(HTML_PAGE) }) + HTML_PAGE);
        return true;
      case "wrong_mode":
        return stream ? fullJson() : fullStream();
      case "error_401_echo_key": {
        const text = echoKeyError(wire, key);
        await write(head("401 Unauthorized", { "content-type": JSON_TYPE, "content-length": Buffer.byteLength(text) }) + text);
        return true;
      }
      default:
        // normal, and the usage scenarios (complete answers with the scenario's usage).
        return stream ? fullStream() : fullJson();
    }
  }

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let buffer = Buffer.alloc(0);
    let busy = false;
    const serve = async () => {
      if (busy) return;
      busy = true;
      try {
        for (;;) {
          let parsed: ReturnType<typeof parseRequest>;
          try {
            parsed = parseRequest(buffer);
          } catch {
            socket.destroy();
            return;
          }
          if (!parsed) return;
          buffer = buffer.subarray(parsed.used);
          const usable = await answer(socket, parsed.request);
          if (!usable || socket.destroyed) return;
        }
      } finally {
        busy = false;
      }
    };
    socket.on("data", (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      void serve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    count: (tag) => requests.filter((request) => request.tag === tag).length,
    keysSeen: () => new Set(requests.map((request) => request.key).filter((key) => key !== "")),
    reset() {
      requests.length = 0;
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
