import { usableCounts, type FinishReason, type Usage } from "../../../core/canonical.ts";
import { encodeGeminiCallId, normalizeModel } from "./tool-ids.ts";
import { objectOf, type JsonObject } from "../../../formats/json.ts";

/** The format's name: reasoning parts from Gemini carry it in their origin. */
export const GEMINI_FORMAT_NAME = "gemini-generate-content";

type Json = JsonObject;

/** One output part of a Gemini answer, as the translators use it. */
export type GeminiOutput =
  | { kind: "thought"; text: string; signature?: string }
  | { kind: "text"; text: string }
  /** `index`: the call's ordinal in the answer (0..). */
  | { kind: "call"; index: number; id: string; name: string; arguments: string };

/**
 * Reads a candidate's parts in order, across the chunks of one answer: numbers its function calls and
 * gives each a deterministic id carrying its thoughtSignature (tool-ids.ts). A signature on a text part
 * is not kept: Gemini validates only function-call signatures
 * (https://ai.google.dev/gemini-api/docs/thought-signatures), and a text part has no id to carry it.
 */
export class GeminiPartReader {
  /** Function calls read so far (their ordinal seeds the synthesized ids). */
  calls = 0;
  responseId = "";
  model = "";

  /** Takes the response id and model from a chunk when they first appear. */
  observe(body: Json): void {
    if (!this.responseId && typeof body.responseId === "string") this.responseId = body.responseId;
    if (!this.model && typeof body.modelVersion === "string") this.model = normalizeModel(body.modelVersion);
  }

  get sawFunctionCall(): boolean {
    return this.calls > 0;
  }

  /** The parts of a chunk's first candidate, in order (empty text dropped). */
  read(body: Json): GeminiOutput[] {
    const candidate = Array.isArray(body.candidates) ? body.candidates[0] : undefined;
    const parts = candidate?.content?.parts;
    if (!Array.isArray(parts)) return [];
    const out: GeminiOutput[] = [];
    for (const part of parts) {
      const read = part && typeof part === "object" ? this.readPart(part) : undefined;
      if (read) out.push(read);
    }
    return out;
  }

  private readPart(part: Json): GeminiOutput | undefined {
    const signature = typeof part.thoughtSignature === "string" && part.thoughtSignature !== "" ? part.thoughtSignature : undefined;
    if (part.functionCall && typeof part.functionCall === "object") {
      const call = part.functionCall as Json;
      const name = String(call.name ?? "");
      const args = JSON.stringify(call.args && typeof call.args === "object" && !Array.isArray(call.args) ? call.args : {});
      const ordinal = this.calls++;
      const geminiId = typeof call.id === "string" && call.id !== "" ? call.id : undefined;
      const seed = `${this.responseId}\n${ordinal}\n${name}\n${args}\n${signature ?? ""}`;
      return { kind: "call", index: ordinal, id: encodeGeminiCallId({ geminiId, signature, model: this.model, seed }), name, arguments: args };
    }
    if (typeof part.text !== "string") return undefined;
    if (part.thought === true) {
      if (part.text === "" && !signature) return undefined;
      return signature ? { kind: "thought", text: part.text, signature } : { kind: "thought", text: part.text };
    }
    return part.text === "" ? undefined : { kind: "text", text: part.text };
  }
}

/**
 * Gemini usageMetadata in canonical form (docs/wire-formats.md#usage); undefined when absent or not usable (no
 * count, a count negative or absurd). An absent count is 0: proto3 JSON omits zeros.
 */
export function readGeminiUsage(metadata: unknown): Usage | undefined {
  if (!metadata || typeof metadata !== "object") return undefined;
  const usage = metadata as Json;
  if (!usableCounts(usage.promptTokenCount, usage.candidatesTokenCount, usage.thoughtsTokenCount, usage.toolUsePromptTokenCount)) return undefined;
  const count = (key: string) => (typeof usage[key] === "number" && usage[key] > 0 ? (usage[key] as number) : 0);
  const thoughts = count("thoughtsTokenCount");
  return {
    // promptTokenCount already includes cachedContentTokenCount; tool-use prompt tokens are billed as input.
    inputTokens: count("promptTokenCount") + count("toolUsePromptTokenCount"),
    cacheReadTokens: count("cachedContentTokenCount"),
    cacheWriteTokens: 0,
    // candidatesTokenCount excludes thoughts: output is their sum, reasoning the thoughts alone.
    outputTokens: count("candidatesTokenCount") + thoughts,
    reasoningTokens: thoughts,
  };
}

const FINISH: Record<string, FinishReason> = {
  STOP: "stop",
  MAX_TOKENS: "length",
  SAFETY: "content_filter",
  RECITATION: "content_filter",
  LANGUAGE: "content_filter",
  BLOCKLIST: "content_filter",
  PROHIBITED_CONTENT: "content_filter",
  SPII: "content_filter",
  IMAGE_SAFETY: "content_filter",
  MODEL_ARMOR: "content_filter",
  MALFORMED_FUNCTION_CALL: "error",
  UNEXPECTED_TOOL_CALL: "error",
};

/**
 * A Gemini finishReason in canonical form (docs/wire-formats.md#finish-reasons). Gemini says STOP for function calls,
 * so the reason is tool_calls whenever a call was read anywhere in the answer, whatever Gemini said.
 */
export function finishFromGemini(reason: unknown, sawFunctionCall: boolean): FinishReason {
  if (sawFunctionCall) return "tool_calls";
  return typeof reason === "string" ? (FINISH[reason] ?? "stop") : "stop";
}

/** The finish reason a chunk or answer carries: its candidate's, or content_filter for a blocked prompt. */
export function finishReasonOf(body: Json): string | undefined {
  const candidate = Array.isArray(body.candidates) ? body.candidates[0] : undefined;
  if (typeof candidate?.finishReason === "string") return candidate.finishReason;
  if (!candidate && objectOf(body.promptFeedback).blockReason) return "SAFETY";
  return undefined;
}
