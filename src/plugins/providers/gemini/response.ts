import { UpstreamError } from "../../../core/errors.ts";
import type { CanonicalPart, CanonicalResponse } from "../../../core/canonical.ts";
import { geminiErrorObject } from "./errors.ts";
import { GEMINI_FORMAT_NAME, GeminiPartReader, finishFromGemini, finishReasonOf, readGeminiUsage } from "./parts.ts";

type Json = Record<string, unknown>;

/**
 * A generateContent answer in canonical form: thoughts -> reasoning (signature and origin kept), text,
 * functionCall -> tool_call with a deterministic id, in Gemini's order; adjacent text parts joined.
 */
export function decodeGeminiResponse(body: Record<string, unknown>): CanonicalResponse {
  const error = geminiErrorObject(body);
  if (error) throw new UpstreamError(`upstream answered with an error: ${String(error.message ?? JSON.stringify(error)).slice(0, 500)}`);
  const reader = new GeminiPartReader();
  reader.observe(body);
  const content: CanonicalPart[] = [];
  for (const output of reader.read(body as Json)) {
    const last = content[content.length - 1];
    if (output.kind === "text") {
      if (last?.type === "text") last.text += output.text;
      else content.push({ type: "text", text: output.text });
    } else if (output.kind === "thought") {
      const part: CanonicalPart = { type: "reasoning", text: output.text, origin: { format: GEMINI_FORMAT_NAME, model: reader.model } };
      if (output.signature) part.signature = output.signature;
      content.push(part);
    } else {
      content.push({ type: "tool_call", id: output.id, name: output.name, arguments: output.arguments });
    }
  }
  return {
    id: reader.responseId,
    model: reader.model,
    content,
    finishReason: finishFromGemini(finishReasonOf(body as Json), reader.sawFunctionCall),
    usage: readGeminiUsage(body.usageMetadata),
  };
}
