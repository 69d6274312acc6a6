import { usableCounts, type Usage } from "../../core/canonical.ts";
import { cacheWrites, writeCacheCreation } from "../anthropic-messages/usage.ts";

/**
 * The Responses usage object (docs/wire-formats.md#openai-responses): cached tokens are a subset of input, reasoning
 * a subset of output.
 */
export interface ResponsesUsage {
  input_tokens: number;
  /** `cache_creation`: cache_write_tokens by lifetime (Anthropic's names), present when the prompt wrote to the cache. */
  input_tokens_details: {
    cached_tokens: number;
    cache_write_tokens: number;
    cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

interface WireUsage {
  input_tokens?: number;
  output_tokens?: number;
  input_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number; cache_creation?: unknown } | null;
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
  const details = wire.input_tokens_details ?? undefined;
  const read: Usage = {
    inputTokens: wire.input_tokens ?? 0,
    cacheReadTokens: details?.cached_tokens ?? 0,
    cacheWriteTokens: details?.cache_write_tokens ?? 0,
    outputTokens: wire.output_tokens ?? 0,
    reasoningTokens: wire.output_tokens_details?.reasoning_tokens ?? 0,
  };
  if (details?.cache_creation != null) {
    const { total, oneHour } = cacheWrites(details.cache_write_tokens, details.cache_creation);
    read.cacheWriteTokens = total;
    if (oneHour > 0) read.cacheWrite1hTokens = oneHour;
  }
  return read;
}

/** Canonical usage -> the Responses usage object, always with both details and total_tokens (Codex parses them strictly). */
export function writeResponsesUsage(usage: Usage): ResponsesUsage {
  const inputDetails: ResponsesUsage["input_tokens_details"] = { cached_tokens: usage.cacheReadTokens, cache_write_tokens: usage.cacheWriteTokens };
  if (usage.cacheWriteTokens > 0) inputDetails.cache_creation = writeCacheCreation(usage);
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: inputDetails,
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}
