import { describe, expect, it } from "bun:test";
import { UpstreamError } from "../../../src/core/errors.ts";
import type { CanonicalChatRequest, StreamEvent } from "../../../src/core/canonical.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import type { Json } from "./helpers.ts";

const translation = openaiResponses.translation!;

describe("openai-responses upstream side (a client of another format on a Responses upstream)", () => {
  const request: CanonicalChatRequest = {
    model: "gpt-6-luna",
    system: "Be brief.",
    messages: [
      { role: "user", content: [{ type: "text", text: "weather?" }, { type: "image", source: { kind: "base64", mediaType: "image/png", data: "QUJD" } }] },
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "mine", signature: "enc-own", origin: { format: "openai-responses", model: "gpt-6-luna" } },
          { type: "reasoning", text: "foreign", signature: "sig", origin: { format: "anthropic-messages", model: "claude-x" } },
          { type: "text", text: "Checking." },
          { type: "tool_call", id: "toolu_1", name: "weather", arguments: '{"city":"Paris"}' },
        ],
      },
      { role: "user", content: [{ type: "tool_result", toolCallId: "toolu_1", content: [{ type: "text", text: "sunny" }], isError: false }] },
    ],
    tools: [{ name: "weather", parameters: { type: "object" } }],
    toolChoice: { type: "tool", name: "weather" },
    maxOutputTokens: 100,
    reasoning: { effort: "low" },
    responseFormat: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true },
    stream: true,
  };

  it("builds a stateless Responses body: flat tools, items in order, only its own encrypted reasoning", () => {
    const body = translation.fromCanonical(request, "gpt-6-luna") as Json;
    expect(body).toMatchObject({
      model: "gpt-6-luna",
      instructions: "Be brief.",
      store: false,
      stream: true,
      max_output_tokens: 100,
      tools: [{ type: "function", name: "weather", parameters: { type: "object" }, strict: false }],
      tool_choice: { type: "function", name: "weather" },
      reasoning: { effort: "low", summary: "auto" },
      include: ["reasoning.encrypted_content"],
      text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true } },
    });
    expect(body.input).toEqual([
      { type: "message", role: "user", content: [{ type: "input_text", text: "weather?" }, { type: "input_image", image_url: "data:image/png;base64,QUJD", detail: "auto" }] },
      { type: "reasoning", summary: [{ type: "summary_text", text: "mine" }], encrypted_content: "enc-own" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
      { type: "function_call", call_id: "toolu_1", name: "weather", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "toolu_1", output: "sunny" },
    ]);
    expect(JSON.stringify(translation.fromCanonical(request, "gpt-6.2-sol"))).not.toContain("enc-own");
  });

  it("decodes a response object into canonical parts, usage and finish", () => {
    const decoded = translation.decodeResponse({
      id: "resp_1",
      model: "gpt-6-luna",
      status: "completed",
      output: [
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "hmm" }], encrypted_content: "enc" },
        { type: "message", id: "msg_1", role: "assistant", content: [{ type: "output_text", text: "Hi" }] },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: "" },
        { type: "custom_tool_call", id: "ctc_1", call_id: "call_2", name: "apply_patch", input: "raw" },
      ],
      usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 4 }, output_tokens: 7, output_tokens_details: { reasoning_tokens: 2 }, total_tokens: 17 },
    });
    expect(decoded).toEqual({
      id: "resp_1",
      model: "gpt-6-luna",
      content: [
        { type: "reasoning", text: "hmm", signature: "enc", origin: { format: "openai-responses", model: "gpt-6-luna" } },
        { type: "text", text: "Hi" },
        { type: "tool_call", id: "call_1", name: "f", arguments: "{}" },
        { type: "tool_call", id: "call_2", name: "apply_patch", arguments: '{"input":"raw"}' },
      ],
      finishReason: "tool_calls",
      usage: { inputTokens: 10, cacheReadTokens: 4, cacheWriteTokens: 0, outputTokens: 7, reasoningTokens: 2 },
    });
    expect(translation.decodeResponse({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [] }).finishReason).toBe("length");
    expect(() => translation.decodeResponse({ status: "failed", error: { message: "boom" } })).toThrow(UpstreamError);
  });

  it("decodes a stream into canonical events and reports a stream cut before response.completed", () => {
    const decoder = translation.createStreamDecoder();
    const frames = [
      { type: "response.created", response: { id: "resp_1", model: "gpt-6-luna" } },
      { type: "response.output_text.delta", delta: "Hi" },
      { type: "response.completed", response: { usage: { input_tokens: 3, output_tokens: 1, total_tokens: 4 } } },
    ];
    const events: StreamEvent[] = frames.flatMap((data) => decoder.decode({ data: JSON.stringify(data) }));
    expect(events).toEqual([
      { type: "message_start", id: "resp_1", model: "gpt-6-luna" },
      { type: "text_delta", text: "Hi" },
      { type: "usage", usage: { inputTokens: 3, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0 } },
      { type: "message_end", finishReason: "stop" },
    ]);
    expect(decoder.end()).toEqual([]);
    const cut = translation.createStreamDecoder();
    cut.decode({ data: JSON.stringify(frames[0]) });
    expect(cut.end()).toEqual([{ type: "error", message: "upstream stream ended before response.completed", status: 502 }]);
  });
});
