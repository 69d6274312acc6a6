import type { StreamDecoder } from "../../../core/format.ts";
import type { SseFrame } from "../../../core/sse.ts";
import type { StreamEvent, Usage } from "../../../core/canonical.ts";
import { geminiErrorObject, httpStatusOf } from "./errors.ts";
import { GEMINI_FORMAT_NAME, GeminiPartReader, finishFromGemini, finishReasonOf, readGeminiUsage } from "./parts.ts";

type Json = Record<string, unknown>;

/**
 * `streamGenerateContent?alt=sse` frames -> canonical events (docs/wire-formats.md#google-gemini,
 * docs/wire-formats.md#streams). Each chunk holds incremental parts, read in order: thoughts -> reasoning, text ->
 * text, a functionCall (always whole) -> tool_call_start plus one full-arguments delta. Whether a call was seen is
 * remembered across chunks, since newer models send the finishReason in a later chunk without the call. Usage comes
 * from the latest usageMetadata, before message_end when both share a chunk. A stream that ends before
 * a finishReason was cut: it ends with an error, never a made-up finish.
 */
export function createGeminiStreamDecoder(): StreamDecoder {
  const reader = new GeminiPartReader();
  let started = false;
  let ended = false;
  let failed = false;
  let lastUsage: Usage | undefined;

  function usageEvent(metadata: unknown, events: StreamEvent[]): void {
    const usage = readGeminiUsage(metadata);
    if (!usage || sameUsage(usage, lastUsage)) return;
    lastUsage = usage;
    events.push({ type: "usage", usage });
  }

  function decodeChunk(chunk: Json): StreamEvent[] {
    const events: StreamEvent[] = [];
    const error = geminiErrorObject(chunk);
    if (error) {
      failed = true;
      const status = httpStatusOf(error);
      const event: StreamEvent = { type: "error", message: String(error.message ?? "upstream stream error"), status };
      if (typeof error.status === "string") event.code = error.status;
      return [event];
    }
    reader.observe(chunk);
    if (!started) {
      started = true;
      events.push({ type: "message_start", id: reader.responseId || undefined, model: reader.model || undefined });
    }
    if (!ended) {
      for (const output of reader.read(chunk)) {
        if (output.kind === "text") events.push({ type: "text_delta", text: output.text });
        else if (output.kind === "thought") {
          if (output.text !== "") events.push({ type: "reasoning_delta", text: output.text });
          if (output.signature) events.push(signatureEvent(output.signature, reader.model));
        } else {
          events.push({ type: "tool_call_start", index: output.index, id: output.id, name: output.name });
          events.push({ type: "tool_call_delta", index: output.index, arguments: output.arguments });
        }
      }
    }
    usageEvent(chunk.usageMetadata, events);
    const reason = finishReasonOf(chunk);
    if (reason !== undefined && !ended) {
      ended = true;
      events.push({ type: "message_end", finishReason: finishFromGemini(reason, reader.sawFunctionCall) });
    }
    return events;
  }

  return {
    decode(frame: SseFrame): StreamEvent[] {
      if (failed) return [];
      let chunk: unknown;
      try {
        chunk = JSON.parse(frame.data);
      } catch {
        return [];
      }
      if (Array.isArray(chunk)) chunk = chunk[0];
      if (!chunk || typeof chunk !== "object") return [];
      return decodeChunk(chunk as Json);
    },
    end(): StreamEvent[] {
      if (failed) return [];
      if (!started) return [{ type: "error", message: "upstream gemini ended the stream without sending anything", status: 502 }];
      if (ended) return [];
      return [{ type: "error", message: "upstream stream ended before finishReason", status: 502 }];
    },
  };
}

/** A thought's signature, naming its origin so client encoders can tag it for replay to this model only. */
function signatureEvent(signature: string, model: string): StreamEvent {
  const event: Extract<StreamEvent, { type: "reasoning_signature" }> & { origin: { format: string; model: string } } = {
    type: "reasoning_signature",
    signature,
    origin: { format: GEMINI_FORMAT_NAME, model },
  };
  return event;
}

function sameUsage(a: Usage, b: Usage | undefined): boolean {
  return (
    b !== undefined &&
    a.inputTokens === b.inputTokens &&
    a.cacheReadTokens === b.cacheReadTokens &&
    a.cacheWriteTokens === b.cacheWriteTokens &&
    a.outputTokens === b.outputTokens &&
    a.reasoningTokens === b.reasoningTokens
  );
}
