import { describe, expect, it } from "bun:test";
import type { StreamEvent } from "../../../../src/core/canonical.ts";
import { gemini, decodeGeminiCallId, GEMINI_FORMAT_NAME } from "../../../../src/plugins/providers/gemini/codec.ts";
import { modelTag } from "../../../../src/plugins/providers/gemini/tool-ids.ts";

const HEAD = { modelVersion: "gemini-4-carbon", responseId: "resp-9" };

function chunk(parts: unknown[] | null, extra: Record<string, unknown> = {}, finishReason?: string) {
  const candidate: Record<string, unknown> = { content: { role: "model", parts: parts ?? [] }, index: 0 };
  if (finishReason) candidate.finishReason = finishReason;
  return { candidates: [candidate], ...HEAD, ...extra };
}

function run(chunks: unknown[], close = true): StreamEvent[] {
  const decoder = gemini.translation!.createStreamDecoder();
  const events = chunks.flatMap((value) => decoder.decode({ data: typeof value === "string" ? value : JSON.stringify(value) }));
  return close ? [...events, ...decoder.end()] : events;
}

describe("gemini stream decoder", () => {
  it("emits message_start on the first chunk and text deltas in order, usage before message_end", () => {
    const events = run([
      chunk([{ text: "Hello" }], { usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } }),
      chunk([{ text: " world" }], { usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } }),
      chunk([{ text: "." }], { usageMetadata: { promptTokenCount: 8, candidatesTokenCount: 3, totalTokenCount: 11 } }, "STOP"),
    ]);
    expect(events).toEqual([
      { type: "message_start", id: "resp-9", model: "gemini-4-carbon" },
      { type: "text_delta", text: "Hello" },
      { type: "usage", usage: { inputTokens: 8, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 } },
      { type: "text_delta", text: " world" },
      { type: "text_delta", text: "." },
      { type: "usage", usage: { inputTokens: 8, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 3, reasoningTokens: 0 } },
      { type: "message_end", finishReason: "stop" },
    ]);
  });

  it("turns each functionCall into a start and one full-arguments delta, numbering calls across chunks", () => {
    const events = run([
      chunk([{ text: "Sure." }]),
      chunk([{ functionCall: { name: "a", args: { x: 1 } }, thoughtSignature: "c2ln" }, { functionCall: { name: "b", args: {} } }]),
      chunk([{ functionCall: { name: "c" } }]),
      chunk([{ text: "" }], { usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 9, totalTokenCount: 14 } }, "STOP"),
    ]);
    const calls = events.filter((event) => event.type === "tool_call_start" || event.type === "tool_call_delta");
    expect(calls.map((event) => [event.type, (event as any).index, (event as any).name ?? (event as any).arguments])).toEqual([
      ["tool_call_start", 0, "a"],
      ["tool_call_delta", 0, '{"x":1}'],
      ["tool_call_start", 1, "b"],
      ["tool_call_delta", 1, "{}"],
      ["tool_call_start", 2, "c"],
      ["tool_call_delta", 2, "{}"],
    ]);
    const first = calls[0] as Extract<StreamEvent, { type: "tool_call_start" }>;
    expect(decodeGeminiCallId(first.id)?.signature).toEqual({ value: "c2ln", modelTag: modelTag("gemini-4-carbon") });
    // The finish came in a later chunk without the calls (newer models do): still tool_calls, and no empty text delta.
    expect(events.at(-1)).toEqual({ type: "message_end", finishReason: "tool_calls" });
    expect(events.some((event) => event.type === "text_delta" && event.text === "")).toBe(false);
  });

  it("mints the same tool-call ids as the non-stream answer would for the same parts", () => {
    const parts = [{ functionCall: { name: "a", args: { x: 1 } }, thoughtSignature: "c2ln" }];
    const streamed = run([chunk(parts, {}, "STOP")]).find((event) => event.type === "tool_call_start") as any;
    const whole = gemini.translation!.decodeResponse(chunk(parts, {}, "STOP")).content[0] as any;
    expect(streamed.id).toBe(whole.id);
  });

  it("reads thought parts as reasoning with their signature and its origin", () => {
    const events = run([chunk([{ text: "Pondering", thought: true }]), chunk([{ text: "", thought: true, thoughtSignature: "dA==" }, { text: "Answer" }], {}, "STOP")]);
    expect(events.slice(1)).toEqual([
      { type: "reasoning_delta", text: "Pondering" },
      { type: "reasoning_signature", signature: "dA==", origin: { format: GEMINI_FORMAT_NAME, model: "gemini-4-carbon" } },
      { type: "text_delta", text: "Answer" },
      { type: "message_end", finishReason: "stop" },
    ]);
  });

  it("bills the last usageMetadata, thoughts counted once as output (no double counting)", () => {
    const events = run([
      chunk([{ text: "a" }], { usageMetadata: { promptTokenCount: 100, cachedContentTokenCount: 40, totalTokenCount: 100 } }),
      chunk([{ text: "b" }], { usageMetadata: { promptTokenCount: 100, cachedContentTokenCount: 40, candidatesTokenCount: 2, thoughtsTokenCount: 7, totalTokenCount: 109 } }, "STOP"),
    ]);
    const usages = events.filter((event) => event.type === "usage");
    expect(usages.at(-1)).toEqual({ type: "usage", usage: { inputTokens: 100, cacheReadTokens: 40, cacheWriteTokens: 0, outputTokens: 9, reasoningTokens: 7 } });
  });

  it("a Gemini stream cut before its finishReason ends with an error event, not a finish", () => {
    const unfinished = run([chunk([{ text: "partial" }], { usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 1, totalTokenCount: 4 } })]);
    expect(unfinished.at(-1)).toEqual({ type: "error", message: "upstream stream ended before finishReason", status: 502 });
    expect(unfinished.some((event) => event.type === "message_end")).toBe(false);
    const call = run([chunk([{ functionCall: { name: "f", args: { a: 1 } } }])]);
    expect(call.at(-1)).toEqual({ type: "error", message: "upstream stream ended before finishReason", status: 502 });
  });

  it("a Gemini stream that sent its finishReason ends cleanly, and reads usage that comes after the finish", () => {
    expect(run([chunk([{ text: "whole" }], {}, "STOP")]).at(-1)).toEqual({ type: "message_end", finishReason: "stop" });
    const late = run([chunk([{ text: "x" }], {}, "MAX_TOKENS"), { ...HEAD, usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 1, totalTokenCount: 4 } }]);
    expect(late.slice(-2)).toEqual([
      { type: "message_end", finishReason: "length" },
      { type: "usage", usage: { inputTokens: 3, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0 } },
    ]);
  });

  it("maps a blocked prompt to content_filter", () => {
    const events = run([{ promptFeedback: { blockReason: "SAFETY" }, ...HEAD }]);
    expect(events.at(-1)).toEqual({ type: "message_end", finishReason: "content_filter" });
  });

  it("turns an error frame into an error event with its HTTP status, and nothing after it", () => {
    const events = run([chunk([{ text: "a" }]), { error: { code: 429, message: "Resource has been exhausted", status: "RESOURCE_EXHAUSTED" } }, chunk([{ text: "b" }])]);
    expect(events.slice(-1)).toEqual([{ type: "error", message: "Resource has been exhausted", status: 429, code: "RESOURCE_EXHAUSTED" }]);
  });

  it("skips frames that are not JSON and reports a stream that sent nothing", () => {
    expect(run(["not json", chunk([{ text: "ok" }], {}, "STOP")]).map((event) => event.type)).toEqual(["message_start", "text_delta", "message_end"]);
    expect(run([])).toEqual([{ type: "error", message: "upstream gemini ended the stream without sending anything", status: 502 }]);
  });
});
