import type { GatewayContext } from "../../core/context.ts";
import type { RelayedFrame, StreamRelay } from "../../core/format.ts";
import { UpstreamError } from "../../core/errors.ts";
import type { SseFrame } from "../../core/sse.ts";
import type { Usage } from "../../core/canonical.ts";
import { anthropicStreamErrorFrame } from "./errors.ts";
import { redact } from "../../core/secrets.ts";
import { isWrappedSignature } from "./signature.ts";
import { createMessagesStreamDecoder, frameType } from "./stream-decoder.ts";
import { readMessagesUsage } from "./usage.ts";
import { isJsonObject, objectOf, type JsonObject } from "../json.ts";
import { thinkingWouldBeRejected } from "./translation/history.ts";

/**
 * The upstream body for a Messages client on an Anthropic upstream: the client's body, model renamed.
 * Thinking blocks the gateway wrapped for another provider's reasoning are dropped: Anthropic would reject them.
 */
export function relayMessagesRequestBody(ctx: GatewayContext, upstreamModel: string): Record<string, unknown> {
  const body: Record<string, unknown> = { ...ctx.body, model: upstreamModel };
  const messages = withoutForeignThinking(ctx.body.messages);
  if (messages !== ctx.body.messages) {
    body.messages = messages;
    // History from another model mid tool loop: Anthropic would refuse thinking without a leading thinking block.
    if (Array.isArray(messages) && thinkingWouldBeRejected(messages)) delete body.thinking;
  }
  return body;
}

/** The messages without gateway-wrapped thinking blocks (the same array when there are none). */
export function withoutForeignThinking(messages: unknown): unknown {
  if (!Array.isArray(messages)) return messages;
  const list: readonly unknown[] = messages;
  const foreign = (block: unknown) => {
    const { type, signature } = objectOf(block);
    return (type === "thinking" || type === "redacted_thinking") && isWrappedSignature(signature);
  };
  if (!list.some((message) => isAssistantTurn(message) && message.content.some(foreign))) return messages;
  const kept: unknown[] = [];
  for (const message of list) {
    if (!isAssistantTurn(message)) {
      kept.push(message);
      continue;
    }
    const content = message.content.filter((block) => !foreign(block));
    if (content.length > 0) kept.push({ ...message, content });
  }
  return kept;
}

/** An assistant message with an array of content blocks. */
function isAssistantTurn(message: unknown): message is JsonObject & { content: unknown[] } {
  return isJsonObject(message) && message.role === "assistant" && Array.isArray(message.content);
}

/** Usage and id of a non-streaming Anthropic answer. */
export function readMessagesResponse(body: Record<string, unknown>): { usage?: Usage; id?: string } {
  // No id: a Messages id is not a lookup key (spec); the request id header is.
  return { usage: readMessagesUsage(body.usage) };
}

/** The client's body: the model the client asked for; undefined when the upstream text can go as is. */
export function relayMessagesResponse(body: Record<string, unknown>, ctx: GatewayContext): unknown {
  if (body.model === ctx.request.model) return undefined;
  body.model = ctx.request.model;
  return body;
}

/**
 * Relays Anthropic frames as they came, always with their `event:` line (the SDK dispatches on it),
 * rewriting only message_start's model; reads usage, deltas and the finish for plugins and metering.
 * An `error` event, or a frame that is not a JSON object, may echo the upstream's key: those (never the others) are redacted.
 * One error event reaches the client, whatever the upstream's error frame held: an `error` frame that is not a JSON
 * object is answered with a well-formed one, and end() adds its own only when the upstream sent none and stopped
 * before message_stop (a stream the gateway itself stopped owes nothing).
 */
export function createMessagesStreamRelay(ctx: GatewayContext): StreamRelay {
  const clientModel = ctx.request.model;
  const decoder = createMessagesStreamDecoder();
  return {
    onFrame(frame: SseFrame): RelayedFrame {
      let data: Record<string, unknown>;
      try {
        data = JSON.parse(frame.data);
      } catch {
        return notAnObject(frame);
      }
      if (!data || typeof data !== "object") return notAnObject(frame);
      const type = frameType(frame, data);
      const events = decoder.decodeData(type, data);
      if (type === "error") return { out: sseText(type, redact(frame.data)), events };
      const message = data.message;
      if (type === "message_start" && isJsonObject(message) && message.model !== clientModel) {
        message.model = clientModel;
        return { out: sseText(type, JSON.stringify(data)), events };
      }
      return { out: sseText(type || undefined, frame.data), events };
    },
    end(): RelayedFrame {
      if (ctx.signal.aborted) return { out: null, events: [] };
      const events = decoder.end();
      const error = events.find((event) => event.type === "error");
      return { out: error ? anthropicStreamErrorFrame(new UpstreamError(error.message)) : null, events };
    },
  };

  /** A frame whose data is not a JSON object: relayed as it came, unless it is the upstream's error (then a well-formed one). */
  function notAnObject(frame: SseFrame): RelayedFrame {
    const text = redact(frame.data);
    if (frame.event !== "error") return { out: sseText(frame.event, text), events: [] };
    const message = text.trim() || "upstream stream error";
    return { out: anthropicStreamErrorFrame(new UpstreamError(message)), events: decoder.decodeData("error", { error: { message } }) };
  }
}

function sseText(event: string | undefined, data: string): string {
  return event ? `event: ${event}\ndata: ${data}\n\n` : `data: ${data}\n\n`;
}
