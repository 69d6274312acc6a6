import { usableCounts, type Usage } from "../../core/canonical.ts";

/**
 * The Responses usage object (docs/wire-formats.md#openai-responses): cached tokens are a subset of input, reasoning
 * a subset of output.
 */
export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

interface WireUsage {
  input_tokens?: number;
  output_tokens?: number;
  input_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  output_tokens_details?: { reasoning_tokens?: number } | null;
}

/**
 * Responses usage -> canonical usage. input_tokens already includes the cached tokens (docs/wire-formats.md#usage):
 * nothing is added. Undefined when the upstream reported none usable (absent, null, no count, a count negative or
 * absurd).
 */
export function readResponsesUsage(usage: unknown): Usage | undefined {
  if (!usage || typeof usage !== "object") return undefined;
  const wire = usage as WireUsage;
  if (!usableCounts(wire.input_tokens, wire.output_tokens)) return undefined;
  return {
    inputTokens: wire.input_tokens ?? 0,
    cacheReadTokens: wire.input_tokens_details?.cached_tokens ?? 0,
    cacheWriteTokens: wire.input_tokens_details?.cache_write_tokens ?? 0,
    outputTokens: wire.output_tokens ?? 0,
    reasoningTokens: wire.output_tokens_details?.reasoning_tokens ?? 0,
  };
}

/** Canonical usage -> the Responses usage object, always with both details and total_tokens (Codex parses them strictly). */
export function writeResponsesUsage(usage: Usage): ResponsesUsage {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cacheReadTokens, cache_write_tokens: usage.cacheWriteTokens },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}
