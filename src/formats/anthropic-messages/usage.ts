import { usableCounts, type Usage } from "../../core/canonical.ts";
import { isJsonObject, objectOf } from "../json.ts";

/**
 * Anthropic's usage object (docs/wire-formats.md#anthropic-messages): `input_tokens` EXCLUDES cache reads and writes.
 */
export interface MessagesUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  output_tokens_details?: { thinking_tokens?: number | null } | null;
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;
}

/**
 * Anthropic usage -> canonical: the input total is input + cache writes + cache reads, normalized once
 * (docs/wire-formats.md#usage). Undefined when the upstream reported none usable (absent, null, no count, a count
 * negative or absurd).
 */
export function readMessagesUsage(usage: unknown): Usage | undefined {
  if (!isJsonObject(usage)) return undefined;
  if (!usableCounts(usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens)) return undefined;
  const cacheRead = count(usage.cache_read_input_tokens);
  const cacheWrite = count(usage.cache_creation_input_tokens);
  return {
    inputTokens: count(usage.input_tokens) + cacheRead + cacheWrite,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: count(usage.output_tokens),
    reasoningTokens: count(objectOf(usage.output_tokens_details).thinking_tokens),
  };
}

/**
 * Folds a later usage report into what a stream has said so far: `message_delta` carries the final
 * output_tokens and, optionally, cumulative input and cache totals that replace message_start's.
 */
export function mergeMessagesUsage(previous: MessagesUsage, next: MessagesUsage | null | undefined): MessagesUsage {
  if (!next || typeof next !== "object") return previous;
  const merged: MessagesUsage = { ...previous };
  for (const key of ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"] as const) {
    if (typeof next[key] === "number") merged[key] = next[key];
  }
  if (next.output_tokens_details) merged.output_tokens_details = next.output_tokens_details;
  return merged;
}

/** Canonical usage -> Anthropic: input_tokens = total − cache reads − cache writes (floored at 0), never double counted. */
export function writeMessagesUsage(usage: Usage): {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
} {
  return {
    input_tokens: Math.max(0, usage.inputTokens - usage.cacheReadTokens - usage.cacheWriteTokens),
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cacheReadTokens,
    output_tokens: usage.outputTokens,
  };
}
