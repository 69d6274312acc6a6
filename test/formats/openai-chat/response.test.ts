import { describe, expect, it } from "bun:test";
import type { CanonicalResponse } from "../../../src/core/canonical.ts";
import { openaiChatTranslation } from "../../../src/formats/openai-chat/translation/index.ts";
import { UpstreamError } from "../../../src/core/errors.ts";
import { chatContext } from "./helpers.ts";

const { decodeResponse, encodeResponse } = openaiChatTranslation;

function completion(message: Record<string, unknown>, finish: string | null, usage?: Record<string, unknown>) {
  return { id: "chatcmpl-up1", object: "chat.completion", created: 1, model: "up-model", choices: [{ index: 0, message, finish_reason: finish }], usage };
}

describe("openai-chat decodeResponse", () => {
  it("puts reasoning first, then text, then tool calls, and reads usage with cache tokens inside the prompt", () => {
    const decoded = decodeResponse(
      completion(
        {
          role: "assistant",
          reasoning_content: "think",
          content: "Let me check.",
          tool_calls: [{ id: "call_1", type: "function", function: { name: "ls", arguments: "" } }],
        },
        "tool_calls",
        { prompt_tokens: 1000, completion_tokens: 50, total_tokens: 1050, prompt_tokens_details: { cached_tokens: 800 }, completion_tokens_details: { reasoning_tokens: 20 } },
      ),
    );
    expect(decoded).toEqual({
      id: "chatcmpl-up1",
      model: "up-model",
      content: [
        { type: "reasoning", text: "think", origin: { format: "openai-chat", model: "up-model" } },
        { type: "text", text: "Let me check." },
        { type: "tool_call", id: "call_1", name: "ls", arguments: "{}" },
      ],
      finishReason: "tool_calls",
      usage: { inputTokens: 1000, cacheReadTokens: 800, cacheWriteTokens: 0, outputTokens: 50, reasoningTokens: 20 },
    });
  });

  it("reports tool_calls when tool calls come with finish_reason stop, and stop when tool_calls comes with none", () => {
    const withCalls = completion({ role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] }, "stop");
    expect(decodeResponse(withCalls).finishReason).toBe("tool_calls");
    expect(decodeResponse(completion({ role: "assistant", content: "hi" }, "tool_calls")).finishReason).toBe("stop");
    expect(decodeResponse(completion({ role: "assistant", content: "hi" }, "length")).finishReason).toBe("length");
    expect(decodeResponse(completion({ role: "assistant", content: "" }, "content_filter")).finishReason).toBe("content_filter");
  });

  it("reads an answer whose choices are null or absent as empty, and a 200 error body as an upstream error", () => {
    for (const choices of [null, undefined]) {
      const decoded = decodeResponse({ id: "x", model: "m", choices, usage: { prompt_tokens: 3, completion_tokens: 0 } });
      expect(decoded.content).toEqual([]);
      expect(decoded.finishReason).toBe("stop");
      expect(decoded.usage!.inputTokens).toBe(3);
    }
    expect(() => decodeResponse({ error: { message: "boom" } })).toThrow(UpstreamError);
  });
});

describe("openai-chat encodeResponse", () => {
  const response: CanonicalResponse = {
    id: "msg_01abc",
    model: "claude-up",
    content: [
      { type: "reasoning", text: "hmm", signature: "sig" },
      { type: "text", text: "Hello " },
      { type: "text", text: "world" },
      { type: "tool_call", id: "toolu_1", name: "ls", arguments: '{"dir":"."}' },
    ],
    finishReason: "stop",
    usage: { inputTokens: 1200, cacheReadTokens: 1000, cacheWriteTokens: 150, outputTokens: 80, reasoningTokens: 30 },
  };

  it("writes a chat completion with the client's model, the request id as its id and tool_calls as the finish", () => {
    const body = encodeResponse(response, chatContext({ model: "claude-sonnet-5-5" })) as any;
    expect(body).toEqual({
      id: "gen-0123456789abcdef0123456789abcdef",
      object: "chat.completion",
      created: 1_800_000_000,
      model: "claude-sonnet-5-5",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: "Hello world",
            refusal: null,
            reasoning_content: "hmm",
            tool_calls: [{ id: "toolu_1", type: "function", function: { name: "ls", arguments: '{"dir":"."}' } }],
          },
          logprobs: null,
          finish_reason: "tool_calls",
        },
      ],
      usage: {
        prompt_tokens: 1200,
        completion_tokens: 80,
        total_tokens: 1280,
        prompt_tokens_details: { cached_tokens: 1000, cache_write_tokens: 150, cache_creation: { ephemeral_5m_input_tokens: 150, ephemeral_1h_input_tokens: 0 } },
        completion_tokens_details: { reasoning_tokens: 30 },
      },
    });
    expect(JSON.stringify(body)).not.toContain('"sig"');
  });

  it("writes null content for a tool-call-only answer", () => {
    const body = encodeResponse(
      { ...response, id: "chatcmpl-7", content: [{ type: "tool_call", id: "c", name: "f", arguments: "" }], finishReason: "tool_calls" },
      chatContext(),
    ) as any;
    expect(body.choices[0].message.content).toBeNull();
    expect(body.choices[0].message.tool_calls[0].function.arguments).toBe("{}");
  });

  it("gives a client that declared a custom tool its call back as a custom tool call with the raw input", () => {
    const ctx = chatContext({ body: { tools: [{ type: "custom", custom: { name: "apply_patch" } }] } });
    const body = encodeResponse(
      { ...response, content: [{ type: "tool_call", id: "c", name: "apply_patch", arguments: '{"input":"*** Begin Patch"}' }], finishReason: "tool_calls" },
      ctx,
    ) as any;
    expect(body.choices[0].message.tool_calls).toEqual([{ id: "c", type: "custom", custom: { name: "apply_patch", input: "*** Begin Patch" } }]);
  });

  it("round-trips usage exactly: cache tokens are never added on top of the prompt", () => {
    const usage = { prompt_tokens: 500, completion_tokens: 40, total_tokens: 540, prompt_tokens_details: { cached_tokens: 300, cache_write_tokens: 100 }, completion_tokens_details: { reasoning_tokens: 10 } };
    const decoded = decodeResponse(completion({ role: "assistant", content: "x" }, "stop", usage));
    const encoded = encodeResponse(decoded, chatContext()) as any;
    // The writes come back split by lifetime: none reported as 1-hour, so all 5-minute.
    expect(encoded.usage).toEqual({ ...usage, prompt_tokens_details: { ...usage.prompt_tokens_details, cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 0 } } });
  });
});
