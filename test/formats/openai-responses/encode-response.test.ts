import { describe, expect, it } from "bun:test";
import type { CanonicalResponse, StreamEvent } from "../../../src/core/canonical.ts";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import { responsesCtx, sdkFinalResponse, type Json } from "./helpers.ts";

const translation = openaiResponses.translation!;
const USAGE = { inputTokens: 500, cacheReadTokens: 120, cacheWriteTokens: 30, outputTokens: 60, reasoningTokens: 20 };

describe("openai-responses encodeResponse", () => {
  it("writes reasoning, message and function_call items in order, with usage as Codex parses it", () => {
    const body = { model: "deepseek-flash", input: "x", tools: [{ type: "function", name: "shell", parameters: {} }], store: false };
    const response: CanonicalResponse = {
      id: "chatcmpl-1",
      model: "deepseek-flash-0601",
      content: [
        { type: "reasoning", text: "Plan.", origin: { format: "openai-chat", model: "deepseek-flash-0601" } },
        { type: "text", text: "Run" },
        { type: "text", text: "ning." },
        { type: "tool_call", id: "call_9", name: "shell", arguments: '{"command":["ls"]}' },
      ],
      finishReason: "tool_calls",
      usage: USAGE,
    };
    const encoded = translation.encodeResponse(response, responsesCtx(body)) as Json;
    expect(encoded).toMatchObject({ id: expect.stringMatching(/^resp_/), object: "response", status: "completed", model: "deepseek-flash", error: null, incomplete_details: null, store: false });
    expect(encoded.output).toEqual([
      { type: "reasoning", id: expect.stringMatching(/^rs_/), summary: [{ type: "summary_text", text: "Plan." }] },
      { type: "message", id: expect.stringMatching(/^msg_/), status: "completed", role: "assistant", content: [{ type: "output_text", text: "Running.", annotations: [], logprobs: [] }] },
      { type: "function_call", id: expect.stringMatching(/^fc_/), status: "completed", call_id: "call_9", name: "shell", arguments: '{"command":["ls"]}' },
    ]);
    // docs/wire-formats.md#usage: input_tokens already includes the cached (and written) tokens; nothing is added
    // twice.
    expect(encoded.usage).toEqual({
      input_tokens: 500,
      input_tokens_details: { cached_tokens: 120, cache_write_tokens: 30, cache_creation: { ephemeral_5m_input_tokens: 30, ephemeral_1h_input_tokens: 0 } },
      output_tokens: 60,
      output_tokens_details: { reasoning_tokens: 20 },
      total_tokens: 560,
    });
  });

  it("marks a length finish incomplete (max_output_tokens) and a content filter incomplete (content_filter)", () => {
    const base: CanonicalResponse = { id: "x", model: "m", content: [{ type: "text", text: "cut" }], finishReason: "length", usage: USAGE };
    const ctx = responsesCtx({ model: "m", input: "x" });
    expect(translation.encodeResponse(base, ctx)).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    expect(translation.encodeResponse({ ...base, finishReason: "content_filter" }, ctx)).toMatchObject({ status: "incomplete", incomplete_details: { reason: "content_filter" } });
  });

  it("unwraps a custom tool's {input} arguments into a custom_tool_call with the raw input", () => {
    const body = { model: "m", input: "x", tools: [{ type: "custom", name: "apply_patch" }] };
    const response: CanonicalResponse = {
      id: "x",
      model: "m",
      content: [{ type: "tool_call", id: "call_p", name: "apply_patch", arguments: '{"input":"*** Begin Patch"}' }],
      finishReason: "tool_calls",
      usage: USAGE,
    };
    expect((translation.encodeResponse(response, responsesCtx(body)) as Json).output).toEqual([
      { type: "custom_tool_call", id: expect.stringMatching(/^ctc_/), status: "completed", call_id: "call_p", name: "apply_patch", input: "*** Begin Patch" },
    ]);
  });
});

describe("openai-responses history round trip (Codex sends the whole history every turn)", () => {
  /** Turn 2's body: turn 1's input, the output items Codex kept, and the tool's output. */
  function nextTurn(first: Json, output: Json[], result: string): Json {
    const call = output.find((item) => item.type === "function_call")!;
    return { ...first, input: [...first.input, ...output, { type: "function_call_output", call_id: call.call_id, output: result }] };
  }

  const first = { model: "deepseek-flash", input: [{ role: "user", content: "list files" }], tools: [{ type: "function", name: "shell", parameters: { type: "object" } }], stream: true };

  it("replays a streamed function_call and its output to a chat upstream as a matching tool call and tool message", () => {
    const events: StreamEvent[] = [
      { type: "reasoning_delta", text: "I should run ls." },
      { type: "tool_call_start", index: 0, id: "call_abc", name: "shell" },
      { type: "tool_call_delta", index: 0, arguments: '{"command":["ls"]}' },
      { type: "message_end", finishReason: "tool_calls" },
    ];
    const encoder = translation.createStreamEncoder(responsesCtx(first));
    const sse = events.map((event) => encoder.encode(event)).join("") + encoder.end();
    const output = sdkFinalResponse(sse).output.map(({ parsed_arguments, ...item }: Json) => item);

    const second = nextTurn(first, output, "a.txt");
    openaiResponses.decodeRequest(second);
    const chat = openaiChat.translation!.fromCanonical(translation.toCanonical(second), "deepseek-flash") as Json;
    expect(chat.messages).toEqual([
      { role: "user", content: "list files" },
      {
        role: "assistant",
        content: null,
        reasoning_content: "I should run ls.",
        tool_calls: [{ id: "call_abc", type: "function", function: { name: "shell", arguments: '{"command":["ls"]}' } }],
      },
      { role: "tool", tool_call_id: "call_abc", content: "a.txt" },
    ]);
  });

  it("gives a signed reasoning block back to the model that issued it, with its origin, and to no one else", () => {
    const origin = { format: "anthropic-messages", model: "claude-fable-5-2" };
    const response: CanonicalResponse = {
      id: "msg_1",
      model: "claude-fable-5-2",
      content: [
        { type: "reasoning", text: "Thinking.", signature: "EqQBCkYIARgCKkD-signature", origin },
        { type: "tool_call", id: "toolu_01", name: "shell", arguments: "{}" },
      ],
      finishReason: "tool_calls",
      usage: USAGE,
    };
    const output = (translation.encodeResponse(response, responsesCtx({ ...first, stream: false })) as Json).output;
    expect(output[0].encrypted_content).toMatch(/^gwrs1\./);
    const canonical = translation.toCanonical(nextTurn(first, output, "done"));
    expect(canonical.messages[1]!.content[0]).toEqual({ type: "reasoning", text: "Thinking.", signature: "EqQBCkYIARgCKkD-signature", origin });
    // A chat upstream gets the text only, never the signature.
    expect(JSON.stringify(openaiChat.translation!.fromCanonical(canonical, "deepseek-flash"))).not.toContain("signature");
  });

  it("never forwards OpenAI's encrypted reasoning to another upstream", () => {
    const body = { ...first, input: [...first.input, { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "gAAAA-openai" }, { role: "user", content: "go on" }] };
    const canonical = translation.toCanonical(body);
    expect(JSON.stringify(openaiChat.translation!.fromCanonical(canonical, "deepseek-flash"))).not.toContain("gAAAA-openai");
    expect(JSON.stringify(translation.fromCanonical(canonical, "gpt-6-luna"))).not.toContain("gAAAA-openai");
  });
});
