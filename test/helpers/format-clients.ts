/**
 * One request in each client format through its official SDK (chat completions and Responses via `openai`,
 * Messages via `@anthropic-ai/sdk`), with the raw bytes the SDK read captured beside what it made of them,
 * so a test can judge both: did the SDK get a well-formed answer, and what exactly went over the wire.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

export type ClientFormat = "chat" | "messages" | "responses";

/** What one request came to, seen from the client. */
export interface Exchange {
  /** HTTP status; null when no response arrived at all. */
  status: number | null;
  headers: Record<string, string>;
  requestId: string | null;
  /** The body bytes the SDK read, as text. */
  raw: string;
  /** The answer's text as the SDK delivered it (a stream: the text deltas seen before it ended or failed). */
  text: string;
  /** The answer came to its well-formed end (a complete JSON answer; a stream's finish and terminator). */
  completed: boolean;
  /** What the SDK threw, if anything (an HTTP error, an in-stream error event, a malformed frame, a broken connection). */
  sdkError: unknown;
  /** The SDK's streamed events / chunks (streams only). */
  events: any[];
  /** Milliseconds from sending to the end of the answer. */
  elapsedMs: number;
}

interface Capture {
  status: number | null;
  headers: Record<string, string>;
  raw: string;
}

/** A fetch that hands the SDK the response while copying every body byte it reads into `capture`. */
function capturingFetch(capture: Capture): typeof fetch {
  const wrapped = async (input: any, init?: any) => {
    const response = await fetch(input, init);
    capture.status = response.status;
    response.headers.forEach((value, name) => {
      capture.headers[name] = value;
    });
    if (!response.body) return response;
    const decoder = new TextDecoder();
    const copy = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        capture.raw += decoder.decode(chunk, { stream: true });
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(copy), { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  return wrapped as typeof fetch;
}

export interface FormatRequest {
  url: string;
  key: string;
  model: string;
  /** The user's message text. */
  text: string;
  stream: boolean;
  maxTokens: number;
  /** The SDK's own timeout (ms). */
  timeoutMs?: number;
}

/** Sends one request in `format` through its SDK; never throws (what went wrong is in the Exchange). */
export async function sendInFormat(format: ClientFormat, request: FormatRequest): Promise<Exchange> {
  const capture: Capture = { status: null, headers: {}, raw: "" };
  const options = { apiKey: request.key, maxRetries: 0, timeout: request.timeoutMs ?? 15_000, fetch: capturingFetch(capture) };
  const started = performance.now();
  const exchange: Exchange = { status: null, headers: {}, requestId: null, raw: "", text: "", completed: false, sdkError: undefined, events: [], elapsedMs: 0 };
  try {
    if (format === "chat") {
      const client = new OpenAI({ ...options, baseURL: `${request.url}/v1` });
      const params = { model: request.model, max_tokens: request.maxTokens, messages: [{ role: "user" as const, content: request.text }] };
      if (!request.stream) {
        const completion = await client.chat.completions.create(params);
        exchange.text = completion.choices[0]?.message?.content ?? "";
        exchange.completed = typeof completion.choices[0]?.finish_reason === "string";
      } else {
        const stream = await client.chat.completions.create({ ...params, stream: true });
        let finished = false;
        for await (const chunk of stream) {
          exchange.events.push(chunk);
          exchange.text += chunk.choices[0]?.delta?.content ?? "";
          if (chunk.choices[0]?.finish_reason) finished = true;
        }
        exchange.completed = finished && /data: \[DONE\]\s*$/.test(capture.raw);
      }
    } else if (format === "messages") {
      const client = new Anthropic({ ...options, baseURL: request.url });
      const params = { model: request.model, max_tokens: request.maxTokens, messages: [{ role: "user" as const, content: request.text }] };
      if (!request.stream) {
        const message = await client.messages.create(params);
        exchange.text = message.content.map((block: any) => (block.type === "text" ? block.text : "")).join("");
        exchange.completed = typeof message.stop_reason === "string";
      } else {
        const stream = await client.messages.create({ ...params, stream: true });
        for await (const event of stream) {
          exchange.events.push(event);
          if (event.type === "content_block_delta" && event.delta.type === "text_delta") exchange.text += event.delta.text;
          if (event.type === "message_stop") exchange.completed = true;
        }
      }
    } else {
      const client = new OpenAI({ ...options, baseURL: `${request.url}/v1` });
      const params = { model: request.model, max_output_tokens: request.maxTokens, input: request.text };
      if (!request.stream) {
        const response = await client.responses.create(params);
        exchange.text = response.output_text ?? "";
        exchange.completed = response.status === "completed";
      } else {
        const stream = await client.responses.create({ ...params, stream: true });
        for await (const event of stream) {
          exchange.events.push(event);
          if (event.type === "response.output_text.delta") exchange.text += event.delta;
          if (event.type === "response.completed") exchange.completed = true;
        }
      }
    }
  } catch (error) {
    exchange.sdkError = error;
  }
  exchange.elapsedMs = performance.now() - started;
  exchange.status = capture.status;
  exchange.headers = capture.headers;
  exchange.raw = capture.raw;
  exchange.requestId = capture.headers["x-gateway-request-id"] ?? null;
  return exchange;
}

/** An SSE body's events: `event:` name (or null) and data text; `malformed` lists data that is neither JSON nor [DONE]. */
export function sseEvents(raw: string): { events: { event: string | null; data: any }[]; malformed: string[] } {
  const events: { event: string | null; data: any }[] = [];
  const malformed: string[] = [];
  for (const block of raw.split(/\r?\n\r?\n/)) {
    if (block.trim() === "") continue;
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length === 0) continue;
    const text = data.join("\n");
    if (text === "[DONE]") {
      events.push({ event, data: "[DONE]" });
      continue;
    }
    try {
      events.push({ event, data: JSON.parse(text) });
    } catch {
      malformed.push(text.slice(0, 200));
    }
  }
  return { events, malformed };
}

/**
 * The in-stream error event of a format's stream, if the body has one: chat `data: {"error":{...}}`,
 * Messages `event: error` with `{type:"error", error:{type, message}}`, Responses `response.failed` (error in
 * `response.error`) or an `error` event. Returns its message and code; null when there is none.
 */
export function streamErrorEvent(format: ClientFormat, raw: string): { message: string; code: string | null; type: string | null } | null {
  for (const { event, data } of sseEvents(raw).events) {
    if (typeof data !== "object" || data === null) continue;
    if (format === "chat" && data.error && typeof data.error.message === "string") {
      return { message: data.error.message, code: data.error.code ?? null, type: data.error.type ?? null };
    }
    if (format === "messages" && event === "error" && data.type === "error" && typeof data.error?.message === "string" && typeof data.error?.type === "string") {
      return { message: data.error.message, code: data.error.code ?? null, type: data.error.type };
    }
    if (format === "responses") {
      if (data.type === "response.failed" && data.response?.status === "failed" && typeof data.response?.error?.message === "string") {
        return { message: data.response.error.message, code: data.response.error.code ?? null, type: null };
      }
      if (data.type === "error" && typeof data.message === "string") return { message: data.message, code: data.code ?? null, type: null };
    }
  }
  return null;
}

/**
 * A format's HTTP error body: chat and Responses `{error:{message, type, code}}`, Messages
 * `{type:"error", error:{type, message, code}}`. Null when the body is not that shape.
 */
export function httpErrorBody(format: ClientFormat, raw: string): { message: string; code: string | null; type: string } | null {
  let body: any;
  try {
    body = JSON.parse(raw);
  } catch {
    return null;
  }
  const error = body?.error;
  if (!error || typeof error.message !== "string" || typeof error.type !== "string") return null;
  if (format === "messages" && body.type !== "error") return null;
  return { message: error.message, code: error.code ?? null, type: error.type };
}
