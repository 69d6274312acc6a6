import type { GatewayContext } from "../../core/context.ts";
import type { RelayedFrame, StreamRelay } from "../../core/format.ts";
import type { SseFrame } from "../../core/sse.ts";
import { redact } from "../../core/secrets.ts";
import { errorBody, UpstreamError } from "../../core/errors.ts";
import type { JsonObject } from "../json.ts";
import { usableCounts, type FinishReason, type StreamEvent, type Usage } from "../../core/canonical.ts";
import { cacheWrites } from "../anthropic-messages/usage.ts";

interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** `cache_creation`: the writes by lifetime, in Anthropic's names (what this gateway emits; docs/api.md). */
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number; cache_creation?: unknown } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
  /** DeepSeek's names for cache hits. */
  prompt_cache_hit_tokens?: number;
}

/**
 * Chat usage -> canonical usage: prompt_tokens already includes cached tokens (docs/wire-formats.md#usage).
 * Undefined when the upstream reported none usable (absent, null, no count, a count negative or absurd).
 */
export function readChatUsage(wire: unknown): Usage | undefined {
  if (!wire || typeof wire !== "object") return undefined;
  const usage = wire as ChatUsage; // its counts are checked by usableCounts before any is read
  if (!usableCounts(usage.prompt_tokens, usage.completion_tokens)) return undefined;
  const details = usage.prompt_tokens_details ?? undefined;
  const read: Usage = {
    inputTokens: usage.prompt_tokens ?? 0,
    cacheReadTokens: details?.cached_tokens ?? usage.prompt_cache_hit_tokens ?? 0,
    cacheWriteTokens: details?.cache_write_tokens ?? 0,
    outputTokens: usage.completion_tokens ?? 0,
    reasoningTokens: usage.completion_tokens_details?.reasoning_tokens ?? 0,
  };
  if (details?.cache_creation != null) {
    const { total, oneHour } = cacheWrites(details.cache_write_tokens, details.cache_creation);
    read.cacheWriteTokens = total;
    if (oneHour > 0) read.cacheWrite1hTokens = oneHour;
  }
  return read;
}

/** The upstream body for a chat client on a chat upstream: model renamed, usage always requested on streams. */
export function relayChatRequestBody(ctx: GatewayContext, upstreamModel: string): Record<string, unknown> {
  const body: Record<string, unknown> = { ...ctx.body, model: upstreamModel };
  if (ctx.request.stream) {
    const options = ctx.body.stream_options;
    body.stream_options = { ...(typeof options === "object" && options !== null ? options : {}), include_usage: true };
  }
  return body;
}

/**
 * The client's body: the request id as the completion's id (OpenRouter's convention: the id the
 * generation lookup takes) and the model the client asked for; spliced into the upstream's text when
 * only the id differs.
 */
export function relayChatResponse(body: Record<string, unknown>, ctx: GatewayContext, text: string): unknown {
  if (body.model === ctx.request.model && typeof body.id === "string") {
    const spliced = spliceChunkId(text, body.id, ctx.requestId);
    if (spliced !== null) return spliced;
  }
  body.id = ctx.requestId;
  body.model = ctx.request.model;
  return body;
}

/**
 * A chunk's (or completion's) text with its top-level id replaced by the request id, without
 * re-serializing it: only when the id is the object's first member (as every OpenAI-compatible upstream
 * sends it) and needs no escaping; null otherwise (the caller re-serializes).
 */
function spliceChunkId(data: string, upstreamId: string, requestId: string): string | null {
  // The compact form every mainstream upstream sends, checked without a regex (this runs per chunk). The
  // text after `{"id":"` being the parsed id itself and then a quote means its JSON text has no escape:
  // each escape is longer than the character it stands for, and an unescaped quote would have ended it.
  const end = COMPACT_HEAD.length + upstreamId.length;
  if (data.startsWith(COMPACT_HEAD) && data.startsWith(upstreamId, COMPACT_HEAD.length) && data.charCodeAt(end) === QUOTE) {
    return COMPACT_HEAD + requestId + data.slice(end);
  }
  const head = LEADING_ID.exec(data);
  if (head === null || head[1] !== upstreamId) return null;
  const valueStart = head[0].length - upstreamId.length - 1;
  return data.slice(0, valueStart) + requestId + data.slice(valueStart + upstreamId.length);
}

/** `{"id": "<id>"` at the start of a chunk, the id free of escapes. */
const LEADING_ID = /^\{\s*"id"\s*:\s*"([\w.:-]*)"/;
const COMPACT_HEAD = '{"id":"';
const QUOTE = 34;

const DONE: RelayedFrame = { out: "data: [DONE]\n\n", events: [] };

const FINISH: Record<string, FinishReason> = {
  stop: "stop",
  length: "length",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  content_filter: "content_filter",
};

/**
 * Relays chat chunks as they came; reads usage, deltas and finish; drops the usage chunk the client did not ask for.
 * An error chunk, or a frame that is not JSON, may echo the upstream's key: those (never the others) are redacted.
 * A stream that ends before a finish_reason (or `[DONE]`) was cut: it gets an error chunk, never a clean end.
 *
 * Content chunks are relayed without `JSON.parse` once one has been read (see ContentShape): a 300-chunk stream's
 * parses were half of its relay's time.
 */
export function createChatStreamRelay(ctx: GatewayContext): StreamRelay {
  const clientModel = ctx.request.model;
  const keepUsage = ctx.request.clientWantsStreamUsage;
  const requestId = ctx.requestId;
  let started = false;
  /** The upstream reached its end (a finish_reason or `[DONE]`) or failed in band: end() owes nothing. */
  let terminal = false;
  /** The text around the content of the last content chunk read, when it can stand for the next ones. */
  let shape: ContentShape | undefined;

  function readFrame(data: string): RelayedFrame {
    if (data === "[DONE]") {
      terminal = true;
      return DONE;
    }
    let chunk: JsonObject;
    try {
      chunk = JSON.parse(data);
    } catch {
      return { out: `data: ${redact(data)}\n\n`, events: [] };
    }
    const events: StreamEvent[] = [];
    if (chunk.error) {
      terminal = true;
      events.push({ type: "error", message: String((chunk.error as { message?: unknown }).message ?? "upstream stream error") });
      return { out: `data: ${redact(data)}\n\n`, events };
    }
    if (!started) {
      started = true;
      events.push({ type: "message_start", id: requestId });
    }
    const first: unknown = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    const choice = first ? (first as JsonObject) : undefined;
    if (choice) {
      readDelta(choice, events);
      if (choice.finish_reason) terminal = true;
    }
    const usage = readChatUsage(chunk.usage);
    let rewrite = chunk.model !== undefined && chunk.model !== clientModel;
    let spliced: string | null = data;
    if (chunk.id !== requestId) {
      spliced = typeof chunk.id === "string" ? spliceChunkId(data, chunk.id, requestId) : null;
      if (spliced === null) rewrite = true;
    }
    if (usage) {
      events.push({ type: "usage", usage });
      if (!keepUsage) {
        if (!choice) return { out: null, events };
        delete chunk.usage;
        rewrite = true;
      }
    }
    if (rewrite) {
      chunk.id = requestId;
      if (chunk.model !== undefined) chunk.model = clientModel;
      return { out: `data: ${JSON.stringify(chunk)}\n\n`, events };
    }
    // A chunk that only carried text, relayed as it came but for its id: the next ones may share its text around the content.
    if (events.length === 1 && events[0]!.type === "text_delta") shape = contentShape(data, spliced!, chunk);
    return { out: `data: ${spliced}\n\n`, events };
  }

  return {
    onFrame(frame: SseFrame): RelayedFrame {
      const data = frame.data;
      return (shape !== undefined ? relayLikeShape(shape, data, 0, data.length) : undefined) ?? readFrame(data);
    },
    onData(text: string, start: number, end: number): RelayedFrame {
      return (shape !== undefined ? relayLikeShape(shape, text, start, end) : undefined) ?? readFrame(text.slice(start, end));
    },
    end(): RelayedFrame {
      if (terminal || ctx.signal.aborted) return { out: null, events: [] };
      const message = "upstream stream ended before finish_reason";
      return { out: `data: ${JSON.stringify(errorBody(new UpstreamError(message)))}\n\n`, events: [{ type: "error", message, status: 502 }] };
    },
  };
}

/**
 * A content chunk's text cut around the string that is its `choices[0].delta.content`: `prefix` + a JSON string +
 * `suffix`. Any text of that form is valid JSON whose tree is the read chunk's with only that string changed, so
 * it carries what the read chunk carried (no usage, error, finish, other delta, same id and model) and its own
 * text: it needs no parse, and its client text is `head` + the string + `tail`, as the read chunk's splice made.
 */
interface ContentShape {
  prefix: string;
  suffix: string;
  /** `data: ` and the prefix as the client gets it (the request id spliced in). */
  head: string;
  /** The suffix and the frame's end. */
  tail: string;
}

/** The chunk's content shape, or undefined when its content is not found as `"delta":{"content":"…"` in its text. */
function contentShape(data: string, spliced: string, chunk: JsonObject): ContentShape | undefined {
  const key = data.indexOf(DELTA_CONTENT);
  if (key === -1) return undefined;
  const start = key + DELTA_CONTENT.length; // the string's opening quote
  const end = stringTokenEnd(data, start);
  if (end === -1) return undefined;
  const prefix = data.slice(0, start);
  const suffix = data.slice(end);
  // The key found may belong to another object (a second choice, a duplicate key): the shape holds only if a
  // probe put in the string's place comes back as choices[0].delta.content.
  const content = ((chunk.choices as JsonObject[])[0]!.delta as JsonObject).content;
  const probe = content === "a" ? "b" : "a";
  try {
    const probed = JSON.parse(`${prefix}"${probe}"${suffix}`) as { choices?: { delta?: { content?: unknown } }[] };
    if (probed.choices?.[0]?.delta?.content !== probe) return undefined;
  } catch {
    return undefined;
  }
  // The splice changed only the id, which lies inside the prefix: the client's prefix is the spliced text's start.
  const headLength = spliced.length - data.length + start;
  return { prefix, suffix, head: `data: ${spliced.slice(0, headLength)}`, tail: `${suffix}\n\n` };
}

/** The frame whose data is text[start, end) relayed as the shape says, or undefined when it is not the shape's (it is read instead). */
function relayLikeShape(shape: ContentShape, text: string, start: number, end: number): RelayedFrame | undefined {
  const tokenStart = start + shape.prefix.length;
  const tokenEnd = end - shape.suffix.length;
  if (tokenEnd - tokenStart < 2 || !text.startsWith(shape.prefix, start) || !text.startsWith(shape.suffix, tokenEnd)) return undefined;
  const value = stringTokenValue(text, tokenStart, tokenEnd);
  if (value === undefined) return undefined;
  const out = shape.head + text.slice(tokenStart, tokenEnd) + shape.tail;
  return { out, events: value === "" ? [] : [{ type: "text_delta", text: value }] };
}

/**
 * The value of the JSON string token that is exactly text[start, end), or undefined when it is not one. Text
 * without escapes is its own value; one with escapes is parsed.
 */
function stringTokenValue(text: string, start: number, end: number): string | undefined {
  if (text.charCodeAt(start) !== QUOTE || text.charCodeAt(end - 1) !== QUOTE) return undefined;
  for (let i = start + 1; i < end - 1; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH || c < 32) return parsedString(text.slice(start, end));
  }
  return text.slice(start + 1, end - 1);
}

function parsedString(token: string): string | undefined {
  try {
    const value: unknown = JSON.parse(token);
    return typeof value === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The index after the JSON string token opening at text[start] (a quote), or -1 when it does not close. */
function stringTokenEnd(text: string, start: number): number {
  if (text.charCodeAt(start) !== QUOTE) return -1;
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i + 1;
  }
  return -1;
}

const DELTA_CONTENT = '"delta":{"content":';
const BACKSLASH = 92;

/** The fields of a streamed chat tool call this relay reads (unchecked wire values). */
interface ChatToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

function readDelta(choice: JsonObject, events: StreamEvent[]): void {
  const delta = choice.delta ? (choice.delta as JsonObject) : undefined;
  if (delta) {
    if (typeof delta.content === "string" && delta.content !== "") events.push({ type: "text_delta", text: delta.content });
    if (typeof delta.reasoning_content === "string" && delta.reasoning_content !== "") {
      events.push({ type: "reasoning_delta", text: delta.reasoning_content });
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls as ChatToolCallDelta[]) {
        const index = call.index ?? 0;
        if (call.id) events.push({ type: "tool_call_start", index, id: call.id, name: call.function?.name ?? "" });
        if (call.function?.arguments) events.push({ type: "tool_call_delta", index, arguments: call.function.arguments });
      }
    }
  }
  if (choice.finish_reason) events.push({ type: "message_end", finishReason: FINISH[String(choice.finish_reason)] ?? "stop" });
}
