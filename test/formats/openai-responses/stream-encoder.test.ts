import { describe, expect, it } from "bun:test";
import type { StreamEvent, Usage } from "../../../src/core/canonical.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import { expectCodexCompatible, parseSse, responsesCtx, sdkFinalResponse, type Json } from "./helpers.ts";

const USAGE: Usage = { inputTokens: 1200, cacheReadTokens: 1000, cacheWriteTokens: 0, outputTokens: 90, reasoningTokens: 40 };

/** Runs canonical events through the encoder the way the core does (events, then end()). */
function encode(body: Json, events: StreamEvent[]) {
  const encoder = openaiResponses.translation!.createStreamEncoder(responsesCtx(body));
  let text = "";
  for (const event of events) text += encoder.encode(event);
  text += encoder.end();
  return { text, events: parseSse(text) };
}

const types = (events: { data: Json }[]) => events.map((event) => event.data.type);

describe("openai-responses stream encoder", () => {
  it("streams a text answer in the canonical order, usage after the finish, completed last, no [DONE]", () => {
    const { text, events } = encode({ model: "deepseek-flash", input: "hi", stream: true }, [
      { type: "message_start", id: "chatcmpl-1" },
      { type: "text_delta", text: "" },
      { type: "text_delta", text: "Hel" },
      { type: "text_delta", text: "lo" },
      { type: "message_end", finishReason: "stop" },
      { type: "usage", usage: USAGE },
    ]);
    expect(types(events)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(text).not.toContain("[DONE]");
    const items = expectCodexCompatible(events);
    expect(items).toEqual([
      { type: "message", id: expect.stringMatching(/^msg_/), status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hello", annotations: [], logprobs: [] }] },
    ]);
    const completed = events.at(-1)!.data.response;
    expect(completed).toMatchObject({ id: expect.stringMatching(/^resp_/), object: "response", status: "completed", model: "deepseek-flash" });
    expect(completed.usage).toEqual({
      input_tokens: 1200,
      input_tokens_details: { cached_tokens: 1000, cache_write_tokens: 0 },
      output_tokens: 90,
      output_tokens_details: { reasoning_tokens: 40 },
      total_tokens: 1290,
    });
    expect(events[0]!.data.response).toMatchObject({ id: completed.id, status: "in_progress", output: [], usage: null });
    expect(sdkFinalResponse(text).output_text).toBe("Hello");
  });

  it("gives every tool call its own function_call item with call_id = the upstream id, completed with its arguments", () => {
    const { text, events } = encode({ model: "m", input: "x", tools: [{ type: "function", name: "shell", parameters: {} }] }, [
      { type: "message_start" },
      { type: "text_delta", text: "Let me look." },
      { type: "tool_call_start", index: 0, id: "call_a", name: "shell" },
      { type: "tool_call_start", index: 1, id: "call_b", name: "shell" },
      { type: "tool_call_delta", index: 0, arguments: '{"cmd":' },
      { type: "tool_call_delta", index: 1, arguments: '{"cmd":"pwd"}' },
      { type: "tool_call_delta", index: 0, arguments: '"ls"}' },
      { type: "message_end", finishReason: "tool_calls" },
      { type: "usage", usage: USAGE },
    ]);
    const items = expectCodexCompatible(events);
    expect(items.map((item) => item.type)).toEqual(["message", "function_call", "function_call"]);
    expect(items[1]).toMatchObject({ type: "function_call", id: expect.stringMatching(/^fc_/), call_id: "call_a", name: "shell", arguments: '{"cmd":"ls"}', status: "completed" });
    expect(items[2]).toMatchObject({ call_id: "call_b", arguments: '{"cmd":"pwd"}', status: "completed" });
    // A response that ends in tool calls is completed (there is no requires_action).
    expect(events.at(-1)!.data.response.status).toBe("completed");
    const argumentDone = events.filter((e) => e.data.type === "response.function_call_arguments.done").map((e) => e.data.arguments);
    expect(argumentDone.sort()).toEqual(['{"cmd":"ls"}', '{"cmd":"pwd"}']);
    const final = sdkFinalResponse(text);
    expect(final.output.map((item: Json) => item.arguments ?? null)).toEqual([null, '{"cmd":"ls"}', '{"cmd":"pwd"}']);
  });

  it("answers a custom (freeform) tool with a custom_tool_call item carrying the raw, unwrapped input", () => {
    const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
    const body = { model: "m", input: "x", tools: [{ type: "custom", name: "apply_patch", format: { type: "grammar", syntax: "lark", definition: "start: x" } }] };
    const wrapped = JSON.stringify({ input: patch });
    const { text, events } = encode(body, [
      { type: "tool_call_start", index: 0, id: "call_p", name: "apply_patch" },
      { type: "tool_call_delta", index: 0, arguments: wrapped.slice(0, 10) },
      { type: "tool_call_delta", index: 0, arguments: wrapped.slice(10) },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
    const items = expectCodexCompatible(events);
    expect(items).toEqual([{ type: "custom_tool_call", id: expect.stringMatching(/^ctc_/), status: "completed", call_id: "call_p", name: "apply_patch", input: patch }]);
    expect(types(events)).not.toContain("response.function_call_arguments.delta");
    expect(events.find((e) => e.data.type === "response.custom_tool_call_input.done")!.data.input).toBe(patch);
    expect(sdkFinalResponse(text).output[0].input).toBe(patch);
  });

  it("calls a namespaced tool back with its own name and namespace", () => {
    const body = { model: "m", input: "x", tools: [{ type: "namespace", name: "crm", tools: [{ type: "function", name: "lookup", parameters: {} }] }] };
    const { events } = encode(body, [
      { type: "tool_call_start", index: 0, id: "call_n", name: "crm__lookup" },
      { type: "tool_call_delta", index: 0, arguments: "{}" },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
    expect(expectCodexCompatible(events)[0]).toMatchObject({ type: "function_call", name: "lookup", namespace: "crm", call_id: "call_n" });
  });

  it("streams reasoning as a reasoning item with summary events, then the answer as its own item", () => {
    const { text, events } = encode({ model: "deepseek-flash", input: "x", reasoning: { effort: "high", summary: "auto" } }, [
      { type: "reasoning_delta", text: "Think" },
      { type: "reasoning_delta", text: "ing." },
      { type: "text_delta", text: "Done." },
      { type: "message_end", finishReason: "stop" },
    ]);
    expect(types(events).slice(2, 9)).toEqual([
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
    ]);
    for (const event of events.filter((e) => e.data.type.startsWith("response.reasoning_summary"))) expect(event.data.summary_index).toBe(0);
    const items = expectCodexCompatible(events);
    expect(items[0]).toEqual({ type: "reasoning", id: expect.stringMatching(/^rs_/), summary: [{ type: "summary_text", text: "Thinking." }] });
    expect(items[1].content[0].text).toBe("Done.");
    expect(sdkFinalResponse(text).output[0].summary[0].text).toBe("Thinking.");
  });

  it("keeps each signed reasoning block its own item, its signature carried in encrypted_content for the replay", () => {
    const { events } = encode({ model: "claude-x", input: "x" }, [
      { type: "reasoning_delta", text: "first" },
      { type: "reasoning_signature", signature: "sig-1" },
      { type: "reasoning_delta", text: "second" },
      { type: "reasoning_signature", signature: "sig-2" },
      { type: "message_end", finishReason: "stop" },
    ]);
    const items = expectCodexCompatible(events);
    expect(items.map((item) => item.summary[0].text)).toEqual(["first", "second"]);
    expect(items[0].encrypted_content).toMatch(/^gwrs1\./);
    expect(items[0].encrypted_content).not.toBe(items[1].encrypted_content);
  });

  it("ends a response cut by the output cap as response.incomplete with reason max_output_tokens", () => {
    const { events } = encode({ model: "m", input: "x", max_output_tokens: 5 }, [
      { type: "text_delta", text: "partial" },
      { type: "message_end", finishReason: "length" },
      { type: "usage", usage: USAGE },
    ]);
    expectCodexCompatible(events);
    expect(events.at(-1)!.data).toMatchObject({ type: "response.incomplete", response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } } });
  });

  it("turns an upstream error into response.failed with the error inside response.error, then nothing more", () => {
    const encoder = openaiResponses.translation!.createStreamEncoder(responsesCtx({ model: "m", input: "x" }));
    let text = encoder.encode({ type: "text_delta", text: "Hi" });
    text += encoder.encode({ type: "error", message: "Rate limit reached", status: 429 });
    text += encoder.encode({ type: "text_delta", text: "ignored" });
    text += encoder.end();
    const events = parseSse(text);
    const last = events.at(-1)!;
    expect(last.event).toBe("response.failed");
    expect(last.data.response.status).toBe("failed");
    // Codex retries rate limits after the delay it reads from the message.
    expect(last.data.response.error).toEqual({ code: "rate_limit_exceeded", message: expect.stringMatching(/try again in \d+s/) });
    expect(types(events).filter((type) => type === "response.failed").length).toBe(1);
    expect(text).not.toContain("ignored");
    events.forEach((event, index) => expect(event.data.sequence_number).toBe(index));
  });

  it("maps a context overflow to the fatal context_length_exceeded code", () => {
    const { events } = encode({ model: "m", input: "x" }, [{ type: "error", message: "This model's maximum context length is 8192 tokens", status: 400 }]);
    expect(events.at(-1)!.data.response.error.code).toBe("context_length_exceeded");
  });

  it("fails a stream that ended without a finish instead of pretending it completed", () => {
    const { events } = encode({ model: "m", input: "x" }, [{ type: "text_delta", text: "cut" }]);
    const last = events.at(-1)!.data;
    expect(last.type).toBe("response.failed");
    expect(last.response.error.code).toBe("server_error");
    // The open item was still closed, so a client keeps what it received.
    expect(types(events)).toContain("response.output_item.done");
  });

  it("starts the response even when the upstream's first event is the end", () => {
    const { events } = encode({ model: "m", input: "x" }, [{ type: "message_end", finishReason: "stop" }, { type: "usage", usage: USAGE }]);
    expect(types(events)).toEqual(["response.created", "response.in_progress", "response.completed"]);
    expect(events.at(-1)!.data.response.output).toEqual([]);
  });
});

describe("openai-responses stream encoder with interleaved upstream output", () => {
  it("keeps a tool call's item open while text streams after it, so no argument fragment is lost", () => {
    const { text, events } = encode({ model: "m", input: "x" }, [
      { type: "tool_call_start", index: 0, id: "call_1", name: "f" },
      { type: "tool_call_delta", index: 0, arguments: '{"a":' },
      { type: "text_delta", text: "meanwhile" },
      { type: "tool_call_delta", index: 0, arguments: "1}" },
      { type: "message_end", finishReason: "tool_calls" },
    ]);
    const items = expectCodexCompatible(events);
    expect(items.find((item) => item.type === "function_call")!.arguments).toBe('{"a":1}');
    expect(sdkFinalResponse(text).output.map((item: Json) => item.type)).toEqual(["function_call", "message"]);
  });
});
