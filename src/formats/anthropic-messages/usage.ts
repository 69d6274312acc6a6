import { usableCounts, type Usage } from "../../core/canonical.ts";
import { isJsonObject, objectOf } from "../json.ts";

/**
 * Anthropic's usage object (docs/wire-formats.md#anthropic-messages): `input_tokens` EXCLUDES cache reads and writes.
 * `cache_creation` splits `cache_creation_input_tokens` by the cache entry's lifetime, each billed at its own price
 * (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
 */
export interface MessagesUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation?: CacheCreation | null;
  output_tokens_details?: { thinking_tokens?: number | null } | null;
}

/** The cache writes by lifetime (Anthropic's `usage.cache_creation`; also what chat and Responses usage carry). */
export interface CacheCreation {
  ephemeral_5m_input_tokens?: number | null;
  ephemeral_1h_input_tokens?: number | null;
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
  const { total: cacheWrite, oneHour } = cacheWrites(usage.cache_creation_input_tokens, usage.cache_creation);
  const read: Usage = {
    inputTokens: count(usage.input_tokens) + cacheRead + cacheWrite,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: count(usage.output_tokens),
    reasoningTokens: count(objectOf(usage.output_tokens_details).thinking_tokens),
  };
  if (oneHour > 0) read.cacheWrite1hTokens = oneHour;
  return read;
}

/**
 * The cache writes of a usage report: the total (`total`, e.g. `cache_creation_input_tokens`; when absent, the sum
 * of the lifetimes) and its 1-hour part (`ephemeral_1h_input_tokens`, never more than the total). Without the
 * lifetime object every write is a 5-minute one. A lifetime count that is not usable (negative, absurd, not a
 * number) is ignored: the writes are then all 5-minute ones. Shared by the three formats' readers.
 */
export function cacheWrites(total: unknown, lifetimes: unknown): { total: number; oneHour: number } {
  const split = objectOf(lifetimes);
  const fiveMinutes = split.ephemeral_5m_input_tokens;
  const hour = split.ephemeral_1h_input_tokens;
  const splitUsable = (fiveMinutes != null || hour != null) && usableCounts(fiveMinutes, hour);
  const written = total != null ? count(total) : splitUsable ? count(fiveMinutes) + count(hour) : 0;
  return { total: written, oneHour: splitUsable ? Math.min(count(hour), written) : 0 };
}

/** Canonical cache writes by lifetime, in Anthropic's `cache_creation` shape (the 5-minute part is the rest). */
export function writeCacheCreation(usage: Usage): { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number } {
  const oneHour = Math.min(usage.cacheWrite1hTokens ?? 0, usage.cacheWriteTokens);
  return { ephemeral_5m_input_tokens: usage.cacheWriteTokens - oneHour, ephemeral_1h_input_tokens: oneHour };
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
  if (isJsonObject(next.cache_creation)) merged.cache_creation = next.cache_creation; // the lifetimes of a cumulative total
  return merged;
}

/**
 * Canonical usage -> Anthropic: input_tokens = total − cache reads − cache writes (floored at 0), never double counted;
 * `cache_creation` (the writes by lifetime) when the prompt wrote to the cache.
 */
export function writeMessagesUsage(usage: Usage): {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  output_tokens: number;
} {
  const written: ReturnType<typeof writeMessagesUsage> = {
    input_tokens: Math.max(0, usage.inputTokens - usage.cacheReadTokens - usage.cacheWriteTokens),
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cacheReadTokens,
    output_tokens: usage.outputTokens,
  };
  if (usage.cacheWriteTokens > 0) written.cache_creation = writeCacheCreation(usage);
  return written;
}
