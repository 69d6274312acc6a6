import { describe, expect, it } from "bun:test";
import { openaiChatTranslation } from "../../../src/formats/openai-chat/translation/index.ts";
import { chunk, decodeAll, frames } from "./helpers.ts";

const decode = (...list: Parameters<typeof frames>) => decodeAll(openaiChatTranslation.createStreamDecoder(), frames(...list));
const USAGE = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120, prompt_tokens_details: { cached_tokens: 60 } };
const CANONICAL_USAGE = { inputTokens: 100, cacheReadTokens: 60, cacheWriteTokens: 0, outputTokens: 20, reasoningTokens: 0 };

describe("openai-chat stream decoder", () => {
  it("starts with the first chunk's id and model, then text and reasoning deltas, usage, and the finish", () => {
    const events = decode(
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning_content: "let me think" }),
      chunk({ reasoning: "more" }),
      chunk({ content: "Hel" }),
      chunk({ content: "lo" }),
      chunk({}, "stop"),
      { id: "chatcmpl-up", object: "chat.completion.chunk", model: "up-model", choices: [], usage: USAGE },
      "[DONE]",
    );
    expect(events).toEqual([
      { type: "message_start", id: "chatcmpl-up", model: "up-model" },
      { type: "reasoning_delta", text: "let me think" },
      { type: "reasoning_delta", text: "more" },
      { type: "text_delta", text: "Hel" },
      { type: "text_delta", text: "lo" },
      { type: "usage", usage: CANONICAL_USAGE },
      { type: "message_end", finishReason: "stop" },
    ]);
  });

  it("keys interleaved tool calls by index and numbers them 0.. in start order", () => {
    const events = decode(
      chunk({ content: "Checking." }),
      chunk({ tool_calls: [{ index: 3, id: "call_a", type: "function", function: { name: "weather", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 5, id: "call_b", type: "function", function: { name: "time", arguments: '{"tz"' } }] }),
      chunk({ tool_calls: [{ index: 3, function: { arguments: '{"city":' } }, { index: 5, function: { arguments: ':"UTC"}' } }] }),
      chunk({ tool_calls: [{ index: 3, function: { arguments: '"Paris"}' } }] }),
      chunk({}, "tool_calls"),
      "[DONE]",
    );
    expect(events.slice(1)).toEqual([
      { type: "text_delta", text: "Checking." },
      { type: "tool_call_start", index: 0, id: "call_a", name: "weather" },
      { type: "tool_call_start", index: 1, id: "call_b", name: "time" },
      { type: "tool_call_delta", index: 1, arguments: '{"tz"' },
      { type: "tool_call_delta", index: 0, arguments: '{"city":' },
      { type: "tool_call_delta", index: 1, arguments: ':"UTC"}' },
      { type: "tool_call_delta", index: 0, arguments: '"Paris"}' },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
  });

  it("opens a new call when an upstream reuses an index with a new id, and falls back to the id or the current call without an index", () => {
    const events = decode(
      chunk({ tool_calls: [{ index: 0, id: "call_a", function: { name: "a", arguments: "{}" } }] }),
      chunk({ tool_calls: [{ index: 0, id: "call_b", function: { name: "b", arguments: '{"x":' } }] }),
      chunk({ tool_calls: [{ index: 0, id: "call_b", function: { arguments: "1}" } }] }),
      chunk({ tool_calls: [{ id: "call_c", function: { name: "c", arguments: '{"y"' } }] }),
      chunk({ tool_calls: [{ function: { arguments: ":2}" } }] }),
      chunk({}, "tool_calls"),
    );
    expect(events.filter((event) => event.type.startsWith("tool_call"))).toEqual([
      { type: "tool_call_start", index: 0, id: "call_a", name: "a" },
      { type: "tool_call_delta", index: 0, arguments: "{}" },
      { type: "tool_call_start", index: 1, id: "call_b", name: "b" },
      { type: "tool_call_delta", index: 1, arguments: '{"x":' },
      { type: "tool_call_delta", index: 1, arguments: "1}" },
      { type: "tool_call_start", index: 2, id: "call_c", name: "c" },
      { type: "tool_call_delta", index: 2, arguments: '{"y"' },
      { type: "tool_call_delta", index: 2, arguments: ":2}" },
    ]);
  });

  it("gives a tool call that streamed no arguments {} before the finish", () => {
    const events = decode(chunk({ tool_calls: [{ index: 0, id: "call_a", function: { name: "now", arguments: "" } }] }), chunk({}, "tool_calls"), "[DONE]");
    expect(events.slice(1)).toEqual([
      { type: "tool_call_start", index: 0, id: "call_a", name: "now" },
      { type: "tool_call_delta", index: 0, arguments: "{}" },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
  });

  it("reports tool_calls when tool calls end with finish_reason stop, and stop when tool_calls comes with none", () => {
    const withCalls = decode(chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: "{}" } }] }), chunk({}, "stop"));
    expect(withCalls.at(-1)).toEqual({ type: "message_end", finishReason: "tool_calls" });
    const phantom = decode(chunk({ content: "done" }), chunk({}, "tool_calls"));
    expect(phantom.at(-1)).toEqual({ type: "message_end", finishReason: "stop" });
  });

  it("reads the usage-only chunk whether choices is [], null or absent, before the finish event", () => {
    for (const choices of [[], null, undefined]) {
      const usageChunk: Record<string, unknown> = { id: "chatcmpl-up", usage: USAGE };
      if (choices !== undefined) usageChunk.choices = choices;
      const events = decode(chunk({ content: "x" }), chunk({}, "length"), usageChunk, "[DONE]");
      expect(events.slice(-2)).toEqual([
        { type: "usage", usage: CANONICAL_USAGE },
        { type: "message_end", finishReason: "length" },
      ]);
    }
  });

  it("does not repeat usage an upstream sends on every chunk, and keeps tool arguments flowing past it", () => {
    const events = decode(
      chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: '{"a"' } }] }, null, { usage: USAGE }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }, null, { usage: USAGE }),
      chunk({}, "tool_calls", { usage: { ...USAGE, completion_tokens: 25 } }),
      { id: "chatcmpl-up", choices: [], usage: { ...USAGE, completion_tokens: 25 } },
      "[DONE]",
    );
    const usages = events.filter((event) => event.type === "usage");
    expect(usages).toHaveLength(2);
    expect(usages.at(-1)).toEqual({ type: "usage", usage: { ...CANONICAL_USAGE, outputTokens: 25 } });
    expect(events.filter((event) => event.type === "tool_call_delta").map((event) => (event as { arguments: string }).arguments).join("")).toBe('{"a":1}');
    expect(events.at(-1)).toEqual({ type: "message_end", finishReason: "tool_calls" });
  });

  it("turns an error chunk into an error event and ignores everything after it", () => {
    const events = decode(chunk({ content: "par" }), { error: { message: "overloaded", type: "server_error", code: 503 } }, chunk({ content: "tial" }), "[DONE]");
    expect(events.slice(1)).toEqual([
      { type: "text_delta", text: "par" },
      { type: "error", message: "overloaded", status: 503, code: "server_error" },
    ]);
  });

  it("a chat stream cut before its finish_reason ends with an error event, not a finish", () => {
    const cutError = { type: "error", message: "upstream stream ended before finish_reason", status: 502 } as const;
    const cut = decode(chunk({ content: "The faulty" }));
    expect(cut).toEqual([{ type: "message_start", id: "chatcmpl-up", model: "up-model" }, { type: "text_delta", text: "The faulty" }, cutError]);
    const cutCall = decode(chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: '{"a":1' } }] }));
    expect(cutCall.at(-1)).toEqual(cutError);
    expect(cutCall.some((event) => event.type === "message_end")).toBe(false);
    // Usage without a finish is not an end either.
    expect(decode(chunk({ content: "hi" }), { id: "chatcmpl-up", choices: [], usage: USAGE }).at(-1)).toEqual(cutError);
    expect(decode("[DONE]")).toEqual([{ type: "error", message: "upstream stream ended before sending any data", status: 502 }]);
  });

  it("a chat stream that sent its finish_reason (or [DONE]) and then ended without more is a clean end", () => {
    expect(decode(chunk({ content: "hi" }), chunk({}, "stop")).at(-1)).toEqual({ type: "message_end", finishReason: "stop" });
    const call = decode(chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: '{"a":1}' } }] }), chunk({}, "tool_calls"));
    expect(call.at(-1)).toEqual({ type: "message_end", finishReason: "tool_calls" });
    expect(decode(chunk({ content: "hi" }), "[DONE]").at(-1)).toEqual({ type: "message_end", finishReason: "stop" });
  });
});
