import { describe, expect, it } from "bun:test";
import type { StreamEvent } from "../../../src/core/canonical.ts";
import { openaiChatTranslation } from "../../../src/formats/openai-chat/translation/index.ts";
import { chatContext, chunk, decodeAll, encodeAll, frames, payloads, sdkReading } from "./helpers.ts";

const USAGE = { inputTokens: 1200, cacheReadTokens: 1000, cacheWriteTokens: 150, outputTokens: 80, reasoningTokens: 30 };

/** An answer as a Messages upstream would give it: leading text and thinking, then two tool calls. */
const EVENTS: StreamEvent[] = [
  { type: "message_start", id: "msg_01", model: "claude-up" },
  { type: "reasoning_delta", text: "plan" },
  { type: "reasoning_signature", signature: "SIG" },
  { type: "text_delta", text: "Checking " },
  { type: "text_delta", text: "both." },
  { type: "tool_call_start", index: 0, id: "toolu_a", name: "weather" },
  { type: "tool_call_delta", index: 0, arguments: '{"city":' },
  { type: "tool_call_delta", index: 0, arguments: '"Paris"}' },
  { type: "tool_call_start", index: 1, id: "toolu_b", name: "now" },
  { type: "tool_call_delta", index: 1, arguments: "{}" },
  { type: "usage", usage: USAGE },
  { type: "message_end", finishReason: "tool_calls" },
];

describe("openai-chat stream encoder", () => {
  it("writes the role chunk first, the request id on every chunk, the client's model, tool calls 0.., one finish, then [DONE]", () => {
    const sse = encodeAll(openaiChatTranslation.createStreamEncoder(chatContext({ model: "claude-sonnet-5-5" })), EVENTS);
    const out = payloads(sse);
    expect(out.at(-1)).toBe("[DONE]");
    const chunks = out.slice(0, -1);
    expect(new Set(chunks.map((c) => c.id))).toEqual(new Set(["gen-0123456789abcdef0123456789abcdef"]));
    expect(new Set(chunks.map((c) => c.model))).toEqual(new Set(["claude-sonnet-5-5"]));
    expect(chunks.map((c) => c.choices[0].delta)).toEqual([
      { role: "assistant", content: "" },
      { reasoning_content: "plan" },
      { content: "Checking " },
      { content: "both." },
      { tool_calls: [{ index: 0, id: "toolu_a", type: "function", function: { name: "weather", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] },
      { tool_calls: [{ index: 1, id: "toolu_b", type: "function", function: { name: "now", arguments: "" } }] },
      { tool_calls: [{ index: 1, function: { arguments: "{}" } }] },
      {},
    ]);
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([...Array(9).fill(null), "tool_calls"]);
    expect(sse).not.toContain("SIG");
    expect(sse).not.toContain("usage");
  });

  it("sends the usage chunk with choices [] just before [DONE] when the client asked for it", () => {
    const out = payloads(encodeAll(openaiChatTranslation.createStreamEncoder(chatContext({ wantsUsage: true })), EVENTS));
    expect(out.at(-1)).toBe("[DONE]");
    expect(out.at(-2)).toMatchObject({
      id: "gen-0123456789abcdef0123456789abcdef",
      choices: [],
      usage: {
        prompt_tokens: 1200,
        completion_tokens: 80,
        total_tokens: 1280,
        prompt_tokens_details: { cached_tokens: 1000, cache_write_tokens: 150 },
        completion_tokens_details: { reasoning_tokens: 30 },
      },
    });
    expect(out.at(-3).choices[0].finish_reason).toBe("tool_calls");
  });

  it("writes an error as a chat error chunk and sends no [DONE] after it", () => {
    const encoder = openaiChatTranslation.createStreamEncoder(chatContext());
    const sse = encodeAll(encoder, [
      { type: "message_start" },
      { type: "text_delta", text: "par" },
      { type: "error", message: "Overloaded", status: 529, code: "overloaded_error" },
      { type: "message_end", finishReason: "stop" },
    ]);
    const out = payloads(sse);
    expect(out.at(-1)).toEqual({ error: { message: "Overloaded", type: "upstream_error", code: "overloaded_error" } });
    expect(sse).not.toContain("[DONE]");
    expect(out[0].id).toBe("gen-0123456789abcdef0123456789abcdef");
  });

  it("demotes a tool_calls finish to stop when no tool call was sent", () => {
    const out = payloads(encodeAll(openaiChatTranslation.createStreamEncoder(chatContext()), [{ type: "text_delta", text: "hi" }, { type: "message_end", finishReason: "tool_calls" }]));
    expect(out[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(out.at(-2).choices[0].finish_reason).toBe("stop");
  });

  it("is read by the official openai SDK into the whole message, tool calls and usage", async () => {
    const sse = encodeAll(openaiChatTranslation.createStreamEncoder(chatContext({ model: "claude-sonnet-5-5", wantsUsage: true })), EVENTS);
    const stream = sdkReading(sse).chat.completions.stream({ model: "claude-sonnet-5-5", messages: [{ role: "user", content: "x" }], stream_options: { include_usage: true } });
    const final = await stream.finalChatCompletion();
    expect(final.model).toBe("claude-sonnet-5-5");
    expect(final.choices[0]!.message.content).toBe("Checking both.");
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(final.choices[0]!.message.tool_calls?.map((call) => call.type === "function" && [call.id, call.function.name, JSON.parse(call.function.arguments)])).toEqual([
      ["toolu_a", "weather", { city: "Paris" }],
      ["toolu_b", "now", {}],
    ]);
    expect(final.usage?.prompt_tokens).toBe(1200);
    expect(final.usage?.prompt_tokens_details?.cached_tokens).toBe(1000);
  });

  it("relays an interleaving chat upstream through decoder and encoder to a result the SDK assembles", async () => {
    const upstream = frames(
      chunk({ role: "assistant", content: "" }),
      chunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "a", arguments: "" } }, { index: 1, id: "call_b", type: "function", function: { name: "b", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '{"y":2}' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"x":1}' } }] }),
      chunk({}, "stop"),
      { id: "chatcmpl-up", choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } },
      "[DONE]",
    );
    const events = decodeAll(openaiChatTranslation.createStreamDecoder(), upstream);
    const sse = encodeAll(openaiChatTranslation.createStreamEncoder(chatContext({ wantsUsage: true })), events);
    const final = await sdkReading(sse).chat.completions.stream({ model: "client-model", messages: [{ role: "user", content: "x" }] }).finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(final.choices[0]!.message.tool_calls?.map((call) => call.type === "function" && call.function.arguments)).toEqual(['{"x":1}', '{"y":2}']);
    expect(final.usage?.total_tokens).toBe(15);
  });
});
