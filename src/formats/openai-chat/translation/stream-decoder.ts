import type { StreamDecoder } from "../../../core/format.ts";
import type { SseFrame } from "../../../core/sse.ts";
import type { FinishReason, StreamEvent, Usage } from "../../../core/canonical.ts";
import { readChatUsage } from "../relay.ts";
import { objectOf, type JsonObject } from "../../json.ts";
import { finishFromChat, settleFinish } from "./finish.ts";

type Json = JsonObject;

interface ToolCallState {
  ordinal: number;
  id: string;
  hasArguments: boolean;
}

/**
 * Chat chunks from an upstream -> canonical events (docs/wire-formats.md#openai-chat-completions,
 * docs/wire-formats.md#streams). Tool calls are keyed by `index` (falling back to the id, then to the current call)
 * and renumbered 0.. in start order, so upstreams that interleave calls or reuse an index with a new id still give
 * one call each. The finish is held until the usage chunk, `[DONE]` or the end of the stream, so usage comes before
 * `message_end`. A stream that ends before any finish_reason (or `[DONE]`) was cut: it ends with an error, never a
 * made-up finish.
 */
export function createChatStreamDecoder(): StreamDecoder {
  let started = false;
  let failed = false;
  let ended = false;
  /** `[DONE]` arrived: the upstream said the stream is whole, with or without a finish_reason. */
  let done = false;
  let pendingFinish: FinishReason | undefined;
  let lastUsage = "";
  const byIndex = new Map<number, ToolCallState>();
  const byId = new Map<string, ToolCallState>();
  const calls: ToolCallState[] = [];

  function toolCall(entry: Json, events: StreamEvent[]): ToolCallState {
    const id = typeof entry.id === "string" && entry.id !== "" ? entry.id : undefined;
    const index = typeof entry.index === "number" ? entry.index : undefined;
    let call = index !== undefined ? byIndex.get(index) : id !== undefined ? byId.get(id) : calls.at(-1);
    if (call && id !== undefined && call.id !== id) call = byId.get(id); // a reused index with a new id is a new call
    if (!call) {
      call = { ordinal: calls.length, id: id ?? `call_${calls.length}`, hasArguments: false };
      calls.push(call);
      byId.set(call.id, call);
      events.push({ type: "tool_call_start", index: call.ordinal, id: call.id, name: String(objectOf(entry.function).name ?? objectOf(entry.custom).name ?? "") });
    }
    if (index !== undefined) byIndex.set(index, call);
    return call;
  }

  function readChoice(choice: Json, events: StreamEvent[]): void {
    const delta: Json = (choice.delta as Json | null | undefined) ?? {};
    const reasoning = typeof delta.reasoning_content === "string" ? delta.reasoning_content : delta.reasoning;
    if (typeof reasoning === "string" && reasoning !== "") events.push({ type: "reasoning_delta", text: reasoning });
    if (typeof delta.content === "string" && delta.content !== "") events.push({ type: "text_delta", text: delta.content });
    if (typeof delta.refusal === "string" && delta.refusal !== "") events.push({ type: "text_delta", text: delta.refusal });
    if (Array.isArray(delta.tool_calls)) {
      for (const entry of delta.tool_calls as Json[]) {
        const call = toolCall(entry ?? {}, events);
        const args = objectOf(entry?.function).arguments ?? objectOf(entry?.custom).input;
        if (typeof args === "string" && args !== "") {
          call.hasArguments = true;
          events.push({ type: "tool_call_delta", index: call.ordinal, arguments: args });
        }
      }
    }
    if (choice.finish_reason && pendingFinish === undefined && !ended) pendingFinish = finishFromChat(choice.finish_reason, calls.length > 0);
  }

  /** message_end (once), after "{}" for every call that streamed no arguments. */
  function finish(events: StreamEvent[], reason: FinishReason): void {
    if (ended) return;
    ended = true;
    for (const call of calls) {
      if (!call.hasArguments) events.push({ type: "tool_call_delta", index: call.ordinal, arguments: "{}" });
    }
    events.push({ type: "message_end", finishReason: settleFinish(reason, calls.length > 0) });
  }

  function pushUsage(usage: Usage | undefined, events: StreamEvent[]): void {
    if (!usage) return;
    const key = JSON.stringify(usage);
    if (key === lastUsage) return; // upstreams that repeat usage on every chunk: one event per change
    lastUsage = key;
    events.push({ type: "usage", usage });
  }

  return {
    decode(frame: SseFrame): StreamEvent[] {
      if (failed) return [];
      const events: StreamEvent[] = [];
      if (frame.data.trim() === "[DONE]") {
        done = true;
        if (pendingFinish !== undefined) finish(events, pendingFinish);
        return events;
      }
      let chunk: Json;
      try {
        chunk = JSON.parse(frame.data);
      } catch {
        return events;
      }
      if (chunk === null || typeof chunk !== "object") return events;
      if (chunk.error) {
        failed = true;
        const error = chunk.error as Json;
        const status = typeof error.code === "number" ? error.code : typeof error.status === "number" ? error.status : undefined;
        const code = typeof error.code === "string" ? error.code : typeof error.type === "string" ? error.type : undefined;
        events.push({ type: "error", message: String(error.message ?? "upstream stream error"), ...(status ? { status } : {}), ...(code ? { code } : {}) });
        return events;
      }
      if (!started) {
        started = true;
        events.push({
          type: "message_start",
          ...(typeof chunk.id === "string" ? { id: chunk.id } : {}),
          ...(typeof chunk.model === "string" ? { model: chunk.model } : {}),
        });
      }
      const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
      if (choice) readChoice(choice, events);
      const usage = readChatUsage(chunk.usage);
      pushUsage(usage, events);
      // The usage-only chunk (choices [] / null / absent) closes the answer. A finish chunk that carries usage does not:
      // upstreams that repeat usage on every chunk still send the final one after it.
      if (pendingFinish !== undefined && !choice) finish(events, pendingFinish);
      return events;
    },
    end(): StreamEvent[] {
      if (failed || ended) return [];
      const events: StreamEvent[] = [];
      if (!started) {
        events.push({ type: "error", message: "upstream stream ended before sending any data", status: 502 });
        return events;
      }
      if (pendingFinish === undefined && !done) {
        events.push({ type: "error", message: "upstream stream ended before finish_reason", status: 502 });
        return events;
      }
      finish(events, pendingFinish ?? "stop");
      return events;
    },
  };
}
