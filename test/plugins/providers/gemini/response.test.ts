import { describe, expect, it } from "bun:test";
import { gemini, decodeGeminiCallId, GEMINI_FORMAT_NAME } from "../../../../src/plugins/providers/gemini/codec.ts";
import { modelTag } from "../../../../src/plugins/providers/gemini/tool-ids.ts";
import { UpstreamError } from "../../../../src/core/errors.ts";

const { decodeResponse } = gemini.translation!;

function answer(parts: unknown[], finishReason: string, usageMetadata?: Record<string, number>) {
  return {
    candidates: [{ content: { role: "model", parts }, finishReason, index: 0 }],
    usageMetadata,
    modelVersion: "gemini-4-carbon",
    responseId: "resp-1",
  };
}

describe("gemini decodeResponse", () => {
  it("keeps Gemini's part order: thoughts as reasoning, text, then function calls", () => {
    const decoded = decodeResponse(
      answer(
        [
          { text: "Let me think.", thought: true },
          { text: "Checking " },
          { text: "now." },
          { functionCall: { name: "get_weather", args: { city: "Paris" } }, thoughtSignature: "c2lnMQ==" },
          { functionCall: { name: "get_time", args: {} } },
        ],
        "STOP",
      ),
    );
    expect(decoded.id).toBe("resp-1");
    expect(decoded.model).toBe("gemini-4-carbon");
    expect(decoded.content.map((part) => part.type)).toEqual(["reasoning", "text", "tool_call", "tool_call"]);
    expect(decoded.content[0]).toEqual({ type: "reasoning", text: "Let me think.", origin: { format: GEMINI_FORMAT_NAME, model: "gemini-4-carbon" } });
    expect(decoded.content[1]).toEqual({ type: "text", text: "Checking now." });
    const [first, second] = decoded.content.slice(2) as any[];
    expect(first).toMatchObject({ name: "get_weather", arguments: '{"city":"Paris"}' });
    expect(second).toMatchObject({ name: "get_time", arguments: "{}" });
    expect(decodeGeminiCallId(first.id)).toEqual({ signature: { value: "c2lnMQ==", modelTag: modelTag("gemini-4-carbon") } });
    expect(decodeGeminiCallId(second.id)).toEqual({});
    expect(first.id).not.toBe(second.id);
  });

  it("mints the same ids for the same answer (history is replayed every turn)", () => {
    const body = answer([{ functionCall: { name: "f", args: { a: 1 } } }], "STOP");
    expect(decodeResponse(body).content).toEqual(decodeResponse(structuredClone(body)).content);
  });

  it("reports tool_calls for STOP with a function call, stop otherwise", () => {
    expect(decodeResponse(answer([{ functionCall: { name: "f", args: {} } }], "STOP")).finishReason).toBe("tool_calls");
    expect(decodeResponse(answer([{ text: "done" }], "STOP")).finishReason).toBe("stop");
    expect(decodeResponse(answer([{ text: "cut" }], "MAX_TOKENS")).finishReason).toBe("length");
    expect(decodeResponse(answer([], "SAFETY")).finishReason).toBe("content_filter");
    expect(decodeResponse(answer([], "MALFORMED_FUNCTION_CALL")).finishReason).toBe("error");
    expect(decodeResponse({ promptFeedback: { blockReason: "PROHIBITED_CONTENT" }, modelVersion: "m" }).finishReason).toBe("content_filter");
  });

  it("normalizes usage once: cache reads inside the prompt, thoughts added to output", () => {
    const usage = {
      promptTokenCount: 1000,
      cachedContentTokenCount: 600,
      toolUsePromptTokenCount: 20,
      candidatesTokenCount: 18,
      thoughtsTokenCount: 55,
      totalTokenCount: 1093,
    };
    const decoded = decodeResponse(answer([{ text: "hi" }], "STOP", usage));
    expect(decoded.usage).toEqual({ inputTokens: 1020, cacheReadTokens: 600, cacheWriteTokens: 0, outputTokens: 73, reasoningTokens: 55 });
    expect(decoded.usage!.inputTokens + decoded.usage!.outputTokens).toBe(usage.totalTokenCount);
    // No usageMetadata: undefined (metering bills the counted text), never zeros.
    expect(decodeResponse(answer([{ text: "hi" }], "STOP")).usage).toBeUndefined();
  });

  it("keeps a thought's signature on its reasoning part and drops empty text", () => {
    const decoded = decodeResponse(answer([{ text: "", thought: true, thoughtSignature: "dA==" }, { text: "" }, { text: "ok", thoughtSignature: "eA==" }], "STOP"));
    expect(decoded.content).toEqual([
      { type: "reasoning", text: "", signature: "dA==", origin: { format: GEMINI_FORMAT_NAME, model: "gemini-4-carbon" } },
      { type: "text", text: "ok" },
    ]);
  });

  it("throws an upstream error for an error body", () => {
    expect(() => decodeResponse({ error: { code: 500, message: "boom", status: "INTERNAL" } })).toThrow(UpstreamError);
  });
});
