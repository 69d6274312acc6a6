import { describe, expect, it } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import type { StreamEvent } from "../../../src/core/canonical.ts";
import { messagesTranslation } from "../../../src/formats/anthropic-messages/translation/index.ts";
import { fromAnthropicToolId } from "../../../src/formats/anthropic-messages/ids.ts";
import { unwrapForeignSignature } from "../../../src/formats/anthropic-messages/signature.ts";
import { openaiChatTranslation } from "../../../src/formats/openai-chat/translation/index.ts";
import { assertMessagesStreamInvariants, encodeAll, messagesContext, sdkReading } from "./helpers.ts";

const USAGE = { inputTokens: 1200, cacheReadTokens: 1000, cacheWriteTokens: 150, outputTokens: 80, reasoningTokens: 30 };

function encode(events: StreamEvent[], options: Parameters<typeof messagesContext>[0] = {}): string {
  return encodeAll(messagesTranslation.createStreamEncoder(messagesContext({ model: "gpt-6-luna", ...options })), events);
}

async function finalMessage(sse: string): Promise<Anthropic.Message> {
  return sdkReading(sse).messages.stream({ model: "gpt-6-luna", max_tokens: 100, messages: [{ role: "user", content: "x" }] }).finalMessage();
}

describe("anthropic-messages stream encoder (canonical -> Messages SSE)", () => {
  it("opens with message_start carrying the prompt estimate and a ping, and closes with one message_delta then message_stop", async () => {
    const sse = encode(
      [
        { type: "message_start", id: "chatcmpl-1" },
        { type: "text_delta", text: "Hello" },
        { type: "text_delta", text: " there" },
        { type: "message_end", finishReason: "stop" },
        { type: "usage", usage: USAGE },
      ],
      { promptTokenBound: 4321 },
    );
    const frames = assertMessagesStreamInvariants(sse);
    expect(frames.map((frame) => frame.event)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(frames[0]!.data.message).toMatchObject({ model: "gpt-6-luna", role: "assistant", content: [], stop_reason: null, usage: { input_tokens: 4321 } });
    expect(frames[0]!.data.message.id).toBe("msg_0123456789abcdef0123456789abcdef");
    const message = await finalMessage(sse);
    expect(message.content).toHaveLength(1);
    expect(message.content[0]).toMatchObject({ type: "text", text: "Hello there" });
    expect(message.stop_reason).toBe("end_turn");
  });

  it("reports usage once, normalized back: input_tokens excludes cache reads and writes (never double counted)", () => {
    const frames = assertMessagesStreamInvariants(encode([{ type: "text_delta", text: "x" }, { type: "usage", usage: USAGE }, { type: "message_end", finishReason: "stop" }]));
    const delta = frames.find((frame) => frame.event === "message_delta")!.data;
    expect(delta.usage).toEqual({ input_tokens: 50, cache_read_input_tokens: 1000, cache_creation_input_tokens: 150, cache_creation: { ephemeral_5m_input_tokens: 150, ephemeral_1h_input_tokens: 0 }, output_tokens: 80 });
    expect(delta.usage.input_tokens + delta.usage.cache_read_input_tokens + delta.usage.cache_creation_input_tokens).toBe(USAGE.inputTokens);
  });

  it("never opens a text block for empty text, and an empty answer is still a well-formed message", async () => {
    const sse = encode([{ type: "message_start" }, { type: "text_delta", text: "" }, { type: "message_end", finishReason: "stop" }]);
    const frames = assertMessagesStreamInvariants(sse);
    expect(frames.some((frame) => frame.event === "content_block_start")).toBe(false);
    expect(frames.at(-2)!.data.usage).toEqual({ input_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, output_tokens: 0 });
    expect((await finalMessage(sse)).content).toEqual([]);
  });

  it("streams reasoning live in a thinking block closed by a gateway-wrapped signature naming the upstream model", async () => {
    const sse = encode([
      { type: "reasoning_delta", text: "think " },
      { type: "reasoning_delta", text: "hard" },
      { type: "text_delta", text: "Answer." },
      { type: "message_end", finishReason: "stop" },
    ]);
    const frames = assertMessagesStreamInvariants(sse);
    const signature = frames.find((frame) => frame.data.delta?.type === "signature_delta")!.data.delta.signature;
    expect(unwrapForeignSignature(signature)).toEqual({ origin: { format: "unknown", model: "up-model" } });
    const message = await finalMessage(sse);
    expect(message.content.map((block) => block.type)).toEqual(["thinking", "text"]);
    expect((message.content[0] as Anthropic.ThinkingBlock).thinking).toBe("think hard");
  });

  it("carries another provider's reasoning signature inside the envelope, byte for byte", () => {
    const frames = assertMessagesStreamInvariants(
      encode([{ type: "reasoning_delta", text: "t" }, { type: "reasoning_signature", signature: "Gem+Sig/==" }, { type: "text_delta", text: "a" }]),
    );
    const signature = frames.find((frame) => frame.data.delta?.type === "signature_delta")!.data.delta.signature;
    expect(unwrapForeignSignature(signature)).toEqual({ signature: "Gem+Sig/==", origin: { format: "unknown", model: "up-model" } });
    expect(frames.filter((frame) => frame.event === "content_block_start").map((frame) => frame.data.content_block.type)).toEqual(["thinking", "text"]);
  });

  it("records the origin a signature event names (a decoder that knows its format says so)", () => {
    const signed = { type: "reasoning_signature", signature: "S", origin: { format: "gemini-generate-content", model: "gemini-4-argon" } } as StreamEvent;
    const frames = assertMessagesStreamInvariants(encode([{ type: "reasoning_delta", text: "t" }, signed]));
    const signature = frames.find((frame) => frame.data.delta?.type === "signature_delta")!.data.delta.signature;
    expect(unwrapForeignSignature(signature)).toEqual({ signature: "S", origin: { format: "gemini-generate-content", model: "gemini-4-argon" } });
  });

  it("buffers interleaved parallel tool calls: each tool block gets exactly its own arguments", async () => {
    const sse = encode([
      { type: "text_delta", text: "Let me check." },
      { type: "tool_call_start", index: 0, id: "call_a", name: "weather" },
      { type: "tool_call_delta", index: 0, arguments: '{"city":' },
      { type: "tool_call_start", index: 1, id: "call_b", name: "time" },
      { type: "tool_call_delta", index: 1, arguments: '{"tz":' },
      { type: "tool_call_delta", index: 0, arguments: '"Paris"}' },
      { type: "usage", usage: USAGE },
      { type: "tool_call_delta", index: 1, arguments: '"UTC"}' },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
    const frames = assertMessagesStreamInvariants(sse);
    expect(frames.filter((frame) => frame.event === "content_block_start").map((frame) => frame.data.index)).toEqual([0, 1, 2]);
    const message = await finalMessage(sse);
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content.slice(1)).toEqual([
      { type: "tool_use", id: "call_a", name: "weather", input: { city: "Paris" } },
      { type: "tool_use", id: "call_b", name: "time", input: { tz: "UTC" } },
    ] as never);
  });

  it("does not close a tool block because a usage event arrived", async () => {
    const sse = encode([
      { type: "tool_call_start", index: 0, id: "call_a", name: "f" },
      { type: "tool_call_delta", index: 0, arguments: '{"a":' },
      { type: "usage", usage: USAGE },
      { type: "tool_call_delta", index: 0, arguments: "1}" },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
    assertMessagesStreamInvariants(sse);
    expect(((await finalMessage(sse)).content[0] as Anthropic.ToolUseBlock).input).toEqual({ a: 1 });
  });

  it("derives stop_reason from the blocks emitted: tool_use whatever upstream said, end_turn for a phantom tool finish", () => {
    const stopOf = (events: StreamEvent[]) => assertMessagesStreamInvariants(encode(events)).at(-2)!.data.delta.stop_reason;
    expect(stopOf([{ type: "tool_call_start", index: 0, id: "c", name: "f" }, { type: "message_end", finishReason: "stop" }])).toBe("tool_use");
    expect(stopOf([{ type: "text_delta", text: "x" }, { type: "message_end", finishReason: "tool_calls" }])).toBe("end_turn");
    expect(stopOf([{ type: "text_delta", text: "x" }, { type: "message_end", finishReason: "length" }])).toBe("max_tokens");
    expect(stopOf([{ type: "text_delta", text: "x" }, { type: "message_end", finishReason: "content_filter" }])).toBe("refusal");
    expect(stopOf([{ type: "text_delta", text: "x" }])).toBe("end_turn");
  });

  it("gives tool ids Anthropic refuses a valid, reversible id, and a missing id a deterministic one", () => {
    const frames = assertMessagesStreamInvariants(
      encode([
        { type: "tool_call_start", index: 0, id: "Bash:0", name: "bash" },
        { type: "tool_call_start", index: 1, id: "", name: "other" },
      ]),
    );
    const ids = frames.filter((frame) => frame.event === "content_block_start").map((frame) => frame.data.content_block.id);
    for (const id of ids) expect(id).toMatch(/^[a-zA-Z0-9_-]+$/);
    expect(fromAnthropicToolId(ids[0])).toBe("Bash:0");
    expect(ids[1]).toBe("toolu_0123456789abcdef_1");
  });

  it("turns an error into `event: error` with an Anthropic error type and stops there (no faked end_turn)", async () => {
    const sse = encode([
      { type: "text_delta", text: "partial" },
      { type: "error", message: "upstream overloaded", status: 529 },
      { type: "text_delta", text: "ignored" },
    ]);
    expect(sse).toContain('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"upstream overloaded"}}');
    expect(sse).not.toContain("message_delta");
    expect(sse).not.toContain("ignored");
    const error = await finalMessage(sse).catch((thrown) => thrown);
    expect(error).toBeInstanceOf(Anthropic.APIError);
  });

  it("turns a chat upstream stream into a Messages stream the SDK accumulates (decoder -> encoder, as the core does)", async () => {
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      data: JSON.stringify({ id: "chatcmpl-9", object: "chat.completion.chunk", created: 1, model: "gpt-6-luna", choices: [{ index: 0, delta, finish_reason: finish }] }),
    });
    const upstream = [
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning_content: "hmm" }),
      chunk({ content: "On it." }),
      chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":1}' } }] }),
      chunk({}, "tool_calls"),
      { data: JSON.stringify({ id: "chatcmpl-9", object: "chat.completion.chunk", created: 1, model: "gpt-6-luna", choices: [], usage: { prompt_tokens: 30, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 10 } } }) },
      { data: "[DONE]" },
    ];
    const decoder = openaiChatTranslation.createStreamDecoder();
    const encoder = messagesTranslation.createStreamEncoder(messagesContext({ model: "gpt-6-luna" }));
    let sse = "";
    for (const frame of upstream) for (const event of decoder.decode(frame)) sse += encoder.encode(event);
    for (const event of decoder.end()) sse += encoder.encode(event);
    sse += encoder.end();
    assertMessagesStreamInvariants(sse);
    const message = await finalMessage(sse);
    expect(message.content.map((block) => block.type)).toEqual(["thinking", "text", "tool_use"]);
    expect(message.stop_reason).toBe("tool_use");
    expect(message.usage).toMatchObject({ input_tokens: 20, cache_read_input_tokens: 10, cache_creation_input_tokens: 0, output_tokens: 9 });
  });
});
