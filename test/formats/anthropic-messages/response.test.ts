import { describe, expect, it } from "bun:test";
import { messagesTranslation } from "../../../src/formats/anthropic-messages/translation/index.ts";
import { unwrapForeignSignature } from "../../../src/formats/anthropic-messages/signature.ts";
import { messagesContext, sdkReading } from "./helpers.ts";

const USAGE = { inputTokens: 1200, cacheReadTokens: 1000, cacheWriteTokens: 150, outputTokens: 80, reasoningTokens: 30 };

describe("anthropic-messages non-streaming answers", () => {
  it("decodes an Anthropic answer: usage normalized once, thinking bound to the model, tool reason from blocks", () => {
    const canonical = messagesTranslation.decodeResponse({
      id: "msg_1",
      type: "message",
      model: "claude-sonnet-5-5",
      content: [
        { type: "thinking", thinking: "hmm", signature: "SIG" },
        { type: "redacted_thinking", data: "RD" },
        { type: "text", text: "" },
        { type: "text", text: "Calling." },
        { type: "tool_use", id: "toolu_1", name: "f", input: { a: 1 } },
        { type: "server_tool_use", id: "srv", name: "web_search", input: {} },
      ],
      stop_reason: "end_turn",
      usage: { input_tokens: 50, cache_creation_input_tokens: 150, cache_read_input_tokens: 1000, output_tokens: 80, output_tokens_details: { thinking_tokens: 30 } },
    });
    const origin = { format: "anthropic-messages", model: "claude-sonnet-5-5" };
    expect(canonical).toEqual({
      id: "msg_1",
      model: "claude-sonnet-5-5",
      content: [
        { type: "reasoning", text: "hmm", signature: "SIG", origin },
        { type: "reasoning", text: "", redactedData: "RD", origin },
        { type: "text", text: "Calling." },
        { type: "tool_call", id: "toolu_1", name: "f", arguments: '{"a":1}' },
      ],
      finishReason: "tool_calls",
      usage: USAGE,
    });
  });

  it("encodes a canonical answer the Anthropic SDK reads, with the client's model and usage split back", async () => {
    const ctx = messagesContext({ model: "gpt-6-luna", upstreamModel: "gpt-6-luna" });
    const body = messagesTranslation.encodeResponse(
      {
        id: "chatcmpl-1",
        model: "gpt-6-luna",
        content: [
          { type: "reasoning", text: "plan", origin: { format: "openai-chat", model: "gpt-6-luna" } },
          { type: "text", text: "" },
          { type: "text", text: "Sure." },
          { type: "tool_call", id: "call:1", name: "f", arguments: '{"x":2}' },
          { type: "tool_call", id: "call_2", name: "g", arguments: "not json" },
        ],
        finishReason: "stop",
        usage: USAGE,
      },
      ctx,
    ) as any;
    expect(body).toMatchObject({ id: "msg_0123456789abcdef0123456789abcdef", type: "message", role: "assistant", model: "gpt-6-luna", stop_reason: "tool_use", stop_sequence: null });
    expect(body.usage).toEqual({ input_tokens: 50, cache_creation_input_tokens: 150, cache_read_input_tokens: 1000, cache_creation: { ephemeral_5m_input_tokens: 150, ephemeral_1h_input_tokens: 0 }, output_tokens: 80 });
    expect(body.content.map((block: any) => block.type)).toEqual(["thinking", "text", "tool_use", "tool_use"]);
    expect(unwrapForeignSignature(body.content[0].signature)).toEqual({ origin: { format: "openai-chat", model: "gpt-6-luna" } });
    expect(body.content[2].id).toMatch(/^[a-zA-Z0-9_-]+$/);
    expect(body.content[3].input).toEqual({ arguments: "not json" });
    const message = await sdkReading(JSON.stringify(body), "application/json").messages.create({ model: "gpt-6-luna", max_tokens: 5, messages: [{ role: "user", content: "x" }] });
    expect(message.content).toHaveLength(4);
  });

  it("derives stop_reason: max_tokens for length, end_turn for a tool finish without tool calls", () => {
    const encode = (finishReason: "length" | "tool_calls") =>
      (messagesTranslation.encodeResponse({ id: "x", model: "m", content: [{ type: "text", text: "a" }], finishReason, usage: USAGE }, messagesContext()) as any).stop_reason;
    expect(encode("length")).toBe("max_tokens");
    expect(encode("tool_calls")).toBe("end_turn");
  });
});
