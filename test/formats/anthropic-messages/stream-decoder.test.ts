import { describe, expect, it } from "bun:test";
import type { StreamEvent } from "../../../src/core/canonical.ts";
import { createMessagesStreamDecoder } from "../../../src/formats/anthropic-messages/stream-decoder.ts";
import { decodeAll, sseFrames } from "./helpers.ts";

const START = ["message_start", { type: "message_start", message: { id: "msg_01", type: "message", role: "assistant", model: "claude-up", content: [], stop_reason: null, usage: { input_tokens: 472, cache_creation_input_tokens: 100, cache_read_input_tokens: 2000, output_tokens: 1 } } }] as [string, Record<string, unknown>];
const block = (index: number, content_block: Record<string, unknown>) => ["content_block_start", { type: "content_block_start", index, content_block }] as [string, Record<string, unknown>];
const delta = (index: number, d: Record<string, unknown>) => ["content_block_delta", { type: "content_block_delta", index, delta: d }] as [string, Record<string, unknown>];
const stop = (index: number) => ["content_block_stop", { type: "content_block_stop", index }] as [string, Record<string, unknown>];
const messageDelta = (stop_reason: string, usage: Record<string, unknown>) => ["message_delta", { type: "message_delta", delta: { stop_reason, stop_sequence: null }, usage }] as [string, Record<string, unknown>];
const END = ["message_stop", { type: "message_stop" }] as [string, Record<string, unknown>];

describe("anthropic-messages stream decoder (Messages SSE -> canonical)", () => {
  it("reads thinking with its signature, text, and tool calls numbered by tool ordinal (not block index)", () => {
    const events = decodeAll(
      createMessagesStreamDecoder(),
      sseFrames(
        START,
        block(0, { type: "thinking", thinking: "", signature: "" }),
        delta(0, { type: "thinking_delta", thinking: "Let me…" }),
        delta(0, { type: "signature_delta", signature: "EqQB" }),
        stop(0),
        block(1, { type: "text", text: "" }),
        ["ping", { type: "ping" }],
        delta(1, { type: "text_delta", text: "Okay" }),
        stop(1),
        block(2, { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} }),
        delta(2, { type: "input_json_delta", partial_json: "" }),
        delta(2, { type: "input_json_delta", partial_json: '{"location": "SF"}' }),
        stop(2),
        messageDelta("tool_use", { output_tokens: 89 }),
        END,
      ),
    );
    expect(events).toEqual([
      { type: "message_start", id: "msg_01", model: "claude-up" },
      { type: "usage", usage: { inputTokens: 2572, cacheReadTokens: 2000, cacheWriteTokens: 100, outputTokens: 1, reasoningTokens: 0 } },
      { type: "reasoning_delta", text: "Let me…" },
      { type: "reasoning_signature", signature: "EqQB", origin: { format: "anthropic-messages", model: "claude-up" } } as StreamEvent,
      { type: "text_delta", text: "Okay" },
      { type: "tool_call_start", index: 0, id: "toolu_1", name: "get_weather" },
      { type: "tool_call_delta", index: 0, arguments: '{"location": "SF"}' },
      { type: "usage", usage: { inputTokens: 2572, cacheReadTokens: 2000, cacheWriteTokens: 100, outputTokens: 89, reasoningTokens: 0 } },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
  });

  it("takes cumulative input and cache totals from message_delta when only it reports them", () => {
    const start: [string, Record<string, unknown>] = ["message_start", { type: "message_start", message: { id: "m", model: "x", usage: { input_tokens: 10, output_tokens: 1 } } }];
    const events = decodeAll(
      createMessagesStreamDecoder(),
      sseFrames(start, messageDelta("end_turn", { input_tokens: 10, cache_read_input_tokens: 500, cache_creation_input_tokens: 40, output_tokens: 7 }), END),
    );
    const usages = events.filter((event) => event.type === "usage");
    expect(usages.at(-1)).toEqual({ type: "usage", usage: { inputTokens: 550, cacheReadTokens: 500, cacheWriteTokens: 40, outputTokens: 7, reasoningTokens: 0 } });
  });

  it("maps stop reasons, demoting a tool_use stop with no tool block to stop", () => {
    const finish = (reason: string) =>
      decodeAll(createMessagesStreamDecoder(), sseFrames(START, messageDelta(reason, { output_tokens: 2 }), END)).find((event) => event.type === "message_end");
    expect(finish("end_turn")).toEqual({ type: "message_end", finishReason: "stop" });
    expect(finish("tool_use")).toEqual({ type: "message_end", finishReason: "stop" });
    expect(finish("max_tokens")).toEqual({ type: "message_end", finishReason: "length" });
    expect(finish("model_context_window_exceeded")).toEqual({ type: "message_end", finishReason: "length" });
    expect(finish("refusal")).toEqual({ type: "message_end", finishReason: "content_filter" });
  });

  it("reads a frame without an event line by its data type", () => {
    const events = createMessagesStreamDecoder().decode({ data: JSON.stringify(START[1]) });
    expect(events[0]).toEqual({ type: "message_start", id: "msg_01", model: "claude-up" });
  });

  it("turns an in-band error into an error event with its status, and a stream cut before message_stop into an error", () => {
    const decoder = createMessagesStreamDecoder();
    const events = decodeAll(decoder, sseFrames(START, ["error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }]));
    expect(events.at(-1)).toEqual({ type: "error", message: "Overloaded", status: 529, code: "overloaded_error" });
    const cut = decodeAll(createMessagesStreamDecoder(), sseFrames(START, block(0, { type: "text", text: "" }), delta(0, { type: "text_delta", text: "par" })));
    expect(cut.at(-1)).toMatchObject({ type: "error", status: 502 });
  });

  it("skips redacted thinking, server-tool blocks and unknown deltas", () => {
    const events = decodeAll(
      createMessagesStreamDecoder(),
      sseFrames(
        START,
        block(0, { type: "redacted_thinking", data: "xyz" }),
        stop(0),
        block(1, { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} }),
        delta(1, { type: "input_json_delta", partial_json: '{"q":1}' }),
        stop(1),
        block(2, { type: "text", text: "" }),
        delta(2, { type: "citations_delta", citation: {} }),
        stop(2),
        messageDelta("end_turn", { output_tokens: 3 }),
        END,
      ),
    );
    expect(events.map((event) => event.type)).toEqual(["message_start", "usage", "usage", "message_end"]);
  });
});
