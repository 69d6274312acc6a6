import { MAX_REPORTED_TOKENS, type Usage } from "../../core/canonical.ts";

/**
 * The most tokens one usage field is taken at. The format readers already refuse a report past it (1e15,
 * 1e308: no usable usage, billed from the counted text); this keeps sums of fields (Anthropic's input is
 * three of them) in range, so every price × tokens stays a safe integer (10^9 × $1,000 per million is
 * 10^15 nano-USD).
 */
export const MAX_USAGE_TOKENS = MAX_REPORTED_TOKENS;

function count(value: unknown): number {
  // NaN, negatives, strings and null are 0; fractions round down; past the maximum is the maximum.
  return typeof value === "number" && value > 0 ? (value >= MAX_USAGE_TOKENS ? MAX_USAGE_TOKENS : Math.floor(value)) : 0;
}

/**
 * Usage as metering can price it: integers in [0, MAX_USAGE_TOKENS], cache reads and writes within the
 * input (1-hour writes within the writes), reasoning within the output. The same object when it already is (no allocation on the hot
 * path), else a clamped copy.
 */
export function clampUsage(usage: Usage): Usage {
  const inputTokens = count(usage.inputTokens);
  const cacheReadTokens = Math.min(count(usage.cacheReadTokens), inputTokens);
  const cacheWriteTokens = Math.min(count(usage.cacheWriteTokens), inputTokens - cacheReadTokens);
  const cacheWrite1hTokens = Math.min(count(usage.cacheWrite1hTokens), cacheWriteTokens);
  const outputTokens = count(usage.outputTokens);
  const reasoningTokens = Math.min(count(usage.reasoningTokens), outputTokens);
  if (
    inputTokens === usage.inputTokens &&
    cacheReadTokens === usage.cacheReadTokens &&
    cacheWriteTokens === usage.cacheWriteTokens &&
    cacheWrite1hTokens === (usage.cacheWrite1hTokens ?? 0) &&
    outputTokens === usage.outputTokens &&
    reasoningTokens === usage.reasoningTokens
  ) {
    return usage;
  }
  const clamped: Usage = { inputTokens, cacheReadTokens, cacheWriteTokens, outputTokens, reasoningTokens };
  if (cacheWrite1hTokens > 0) clamped.cacheWrite1hTokens = cacheWrite1hTokens;
  return clamped;
}
