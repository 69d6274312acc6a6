import type { Usage } from "../../formats/canonical.ts";
import type { NanoUsd } from "../../core/money.ts";

/** Per-token prices in nano-USD. */
export interface TokenPrices {
  input: NanoUsd;
  output: NanoUsd;
  cacheRead: NanoUsd;
  cacheWrite: NanoUsd;
}

export interface CostBreakdown {
  /** Uncached prompt tokens at the input price. */
  inputCost: NanoUsd;
  cacheReadCost: NanoUsd;
  cacheWriteCost: NanoUsd;
  /** Output, reasoning included, at the output price. */
  outputCost: NanoUsd;
  totalCost: NanoUsd;
}

/** Exact integer cost: cache reads and writes at their prices, the rest of the prompt at the input price. */
export function priceUsage(usage: Usage, prices: TokenPrices): CostBreakdown {
  const cached = Math.min(usage.cacheReadTokens, usage.inputTokens);
  const written = Math.min(usage.cacheWriteTokens, usage.inputTokens - cached);
  const uncached = usage.inputTokens - cached - written;
  const inputCost = uncached * prices.input;
  const cacheReadCost = cached * prices.cacheRead;
  const cacheWriteCost = written * prices.cacheWrite;
  const outputCost = usage.outputTokens * prices.output;
  return { inputCost, cacheReadCost, cacheWriteCost, outputCost, totalCost: inputCost + cacheReadCost + cacheWriteCost + outputCost };
}
