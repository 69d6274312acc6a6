import type { Usage } from "../../core/canonical.ts";
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
  /** What is charged: the sum of the four parts above. */
  totalCost: NanoUsd;
  /** Priced but not charged: past the hold and what was still free (see `chargeWithin`). */
  unbilledCost: NanoUsd;
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
  return { inputCost, cacheReadCost, cacheWriteCost, outputCost, totalCost: inputCost + cacheReadCost + cacheWriteCost + outputCost, unbilledCost: 0 };
}

/**
 * The cost bounded by what may be charged: the excess is moved to `unbilledCost`, taken from the output
 * first, then cache writes, uncached input and cache reads, so the parts still sum to the total charged.
 */
export function chargeWithin(cost: CostBreakdown, chargeable: NanoUsd): CostBreakdown {
  let excess = cost.totalCost - Math.max(0, chargeable);
  if (excess <= 0) return cost;
  const bounded = { ...cost, unbilledCost: cost.unbilledCost + excess, totalCost: cost.totalCost - excess };
  for (const part of ["outputCost", "cacheWriteCost", "inputCost", "cacheReadCost"] as const) {
    const taken = Math.min(bounded[part], excess);
    bounded[part] -= taken;
    excess -= taken;
  }
  return bounded;
}
