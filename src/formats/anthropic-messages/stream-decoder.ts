import type { StreamDecoder } from "../../core/format.ts";
import type { SseFrame } from "../../core/sse.ts";
import type { FinishReason, StreamEvent } from "../../core/canonical.ts";
import { mergeMessagesUsage, readMessagesUsage, type MessagesUsage } from "./usage.ts";
import { ANTHROPIC_MESSAGES } from "./signature.ts";
import { isJsonObject, objectOf, stringOf, type JsonObject } from "../json.ts";

/**
 * Anthropic stop_reason -> canonical finish; tool use is derived from what was emitted
 * (docs/wire-formats.md#finish-reasons).
 */
export function finishFromStopReason(stopReason: unknown, sawTool: boolean): FinishReason {
  switch (stopReason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "refusal":
      return "content_filter";
    default:
      // end_turn, stop_sequence, pause_turn, tool_use (without a tool block: demoted) and unknown values.
      return sawTool ? "tool_calls" : "stop";
  }
}

/** HTTP status of an Anthropic error type, for the request's recorded outcome. */
export function statusOfErrorType(type: unknown): number {
  switch (type) {
    case "invalid_request_error":
      return 400;
    case "rate_limit_error":
      return 429;
    case "overloaded_error":
      return 529;
    case "timeout_error":
      return 504;
    default:
      return 502;
  }
}

type BlockKind = "text" | "thinking" | "tool" | "other";

/** The event name of a frame: the SSE `event:` line, as the SDK dispatches on it, else the JSON `type`. */
export function frameType(frame: SseFrame, data: JsonObject): string {
  return frame.event ?? (typeof data.type === "string" ? data.type : "");
}

/**
 * Anthropic SSE frames -> canonical events (docs/wire-formats.md#anthropic-messages): usage from message_start and
 * message_delta (the latter's cumulative fields replace the former's), deltas by block kind, tool calls numbered 0..
 * in start order.
 */
export function createMessagesStreamDecoder(): StreamDecoder & { decodeData(type: string, data: JsonObject): StreamEvent[] } {
  let usage: MessagesUsage = {};
  /** Keyed by the frame's `index` as sent (a number from Anthropic; not checked). */
  const blocks = new Map<unknown, { kind: BlockKind; tool?: number }>();
  let tools = 0;
  let finished = false;
  let failed = false;
  let received = false;
  /** The model that signs this stream's thinking (message_start), named in each signature event's origin. */
  let model = "";

  function usageEvent(next: unknown): StreamEvent[] {
    if (!next || typeof next !== "object") return [];
    // Its counts are read through readMessagesUsage, which takes only finite non-negative numbers.
    usage = mergeMessagesUsage(usage, next as MessagesUsage);
    const read = readMessagesUsage(usage);
    return read ? [{ type: "usage", usage: read }] : []; // `usage: {}` reports nothing
  }

  function decodeData(type: string, data: JsonObject): StreamEvent[] {
    received = true;
    switch (type) {
      case "message_start": {
        const message = objectOf(data.message);
        if (typeof message.model === "string") model = message.model;
        const start: StreamEvent = { type: "message_start", id: stringOf(message.id), model: stringOf(message.model) };
        return [start, ...usageEvent(message.usage)];
      }
      case "content_block_start":
        return blockStart(data.index, objectOf(data.content_block));
      case "content_block_delta":
        return blockDelta(blocks.get(data.index), objectOf(data.delta));
      case "message_delta": {
        const events = usageEvent(data.usage);
        const stopReason = objectOf(data.delta).stop_reason;
        if (stopReason !== undefined && stopReason !== null && !finished) {
          finished = true;
          events.push({ type: "message_end", finishReason: finishFromStopReason(stopReason, tools > 0) });
        }
        return events;
      }
      case "message_stop":
        if (finished || failed) return [];
        finished = true;
        return [{ type: "message_end", finishReason: finishFromStopReason(undefined, tools > 0) }];
      case "error": {
        failed = true;
        const error = objectOf(data.error);
        const message = typeof error.message === "string" ? error.message : "upstream stream error";
        return [{ type: "error", message, status: statusOfErrorType(error.type), code: typeof error.type === "string" ? error.type : undefined }];
      }
      default:
        // ping, content_block_stop and event types this gateway does not know yet.
        return [];
    }
  }

  function blockStart(index: unknown, block: JsonObject): StreamEvent[] {
    switch (block.type) {
      case "text":
        blocks.set(index, { kind: "text" });
        return typeof block.text === "string" && block.text ? [{ type: "text_delta", text: block.text }] : [];
      case "thinking":
        blocks.set(index, { kind: "thinking" });
        return typeof block.thinking === "string" && block.thinking ? [{ type: "reasoning_delta", text: block.thinking }] : [];
      case "tool_use": {
        const tool = tools++;
        blocks.set(index, { kind: "tool", tool });
        const events: StreamEvent[] = [{ type: "tool_call_start", index: tool, id: String(block.id ?? ""), name: String(block.name ?? "") }];
        const input = block.input;
        if (isJsonObject(input) && Object.keys(input).length > 0) {
          events.push({ type: "tool_call_delta", index: tool, arguments: JSON.stringify(input) });
        }
        return events;
      }
      default:
        // redacted_thinking and server-tool blocks have no canonical stream form.
        blocks.set(index, { kind: "other" });
        return [];
    }
  }

  function blockDelta(block: { kind: BlockKind; tool?: number } | undefined, delta: JsonObject): StreamEvent[] {
    switch (delta.type) {
      case "text_delta":
        return block?.kind === "text" && typeof delta.text === "string" && delta.text ? [{ type: "text_delta", text: delta.text }] : [];
      case "thinking_delta":
        return block?.kind === "thinking" && typeof delta.thinking === "string" && delta.thinking ? [{ type: "reasoning_delta", text: delta.thinking }] : [];
      case "signature_delta":
        return block?.kind === "thinking" && typeof delta.signature === "string" && delta.signature ? [signatureEvent(delta.signature)] : [];
      case "input_json_delta":
        return block?.kind === "tool" && block.tool !== undefined && typeof delta.partial_json === "string" && delta.partial_json
          ? [{ type: "tool_call_delta", index: block.tool, arguments: delta.partial_json }]
          : [];
      default:
        return [];
    }
  }

  /** Thinking signatures are bound to the model that signed them: the event says which, for other encoders. */
  function signatureEvent(signature: string): StreamEvent {
    const event: Extract<StreamEvent, { type: "reasoning_signature" }> & { origin: { format: string; model: string } } = {
      type: "reasoning_signature",
      signature,
      origin: { format: ANTHROPIC_MESSAGES, model },
    };
    return event;
  }

  return {
    decodeData,
    decode(frame: SseFrame): StreamEvent[] {
      let data: unknown;
      try {
        data = JSON.parse(frame.data);
      } catch {
        return [];
      }
      if (!data || typeof data !== "object") return [];
      const object = data as JsonObject; // an array reads as an object without a frame's fields, as before
      return decodeData(frameType(frame, object), object);
    },
    end(): StreamEvent[] {
      if (finished || failed) return [];
      const message = received ? "upstream stream ended before message_stop" : "upstream stream ended without any event";
      return [{ type: "error", message, status: 502 }];
    },
  };
}
