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
 */
export function createChatStreamRelay(ctx: GatewayContext): StreamRelay {
  const clientModel = ctx.request.model;
  const keepUsage = ctx.request.clientWantsStreamUsage;
  const requestId = ctx.requestId;
  let started = false;
  /** The upstream reached its end (a finish_reason or `[DONE]`) or failed in band: end() owes nothing. */
  let terminal = false;
  return {
    onFrame(frame: SseFrame): RelayedFrame {
      if (frame.data === "[DONE]") {
        terminal = true;
        return DONE;
      }
      let chunk: JsonObject;
      try {
        chunk = JSON.parse(frame.data);
      } catch {
        return { out: `data: ${redact(frame.data)}\n\n`, events: [] };
      }
      const events: StreamEvent[] = [];
      if (chunk.error) {
        terminal = true;
        events.push({ type: "error", message: String((chunk.error as { message?: unknown }).message ?? "upstream stream error") });
        return { out: `data: ${redact(frame.data)}\n\n`, events };
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
      let data: string | null = frame.data;
      if (chunk.id !== requestId) {
        data = typeof chunk.id === "string" ? spliceChunkId(data, chunk.id, requestId) : null;
        if (data === null) rewrite = true;
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
      return { out: `data: ${data}\n\n`, events };
    },
    end(): RelayedFrame {
      if (terminal || ctx.signal.aborted) return { out: null, events: [] };
      const message = "upstream stream ended before finish_reason";
      return { out: `data: ${JSON.stringify(errorBody(new UpstreamError(message)))}\n\n`, events: [{ type: "error", message, status: 502 }] };
    },
  };
}

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
