import type { Usage } from "../../core/canonical.ts";
import type { NanoUsd } from "../../core/money.ts";

/** Per-token prices in nano-USD. */
export interface TokenPrices {
  input: NanoUsd;
  output: NanoUsd;
  cacheRead: NanoUsd;
  /** A cache write with the 5-minute lifetime (the only one most providers have). */
  cacheWrite: NanoUsd;
  /** A cache write with the 1-hour lifetime (Anthropic); absent: cacheWrite. */
  cacheWrite1h?: NanoUsd;
}

export interface CostBreakdown {
  /** Uncached prompt tokens at the input price. */
  inputCost: NanoUsd;
  cacheReadCost: NanoUsd;
  /** 5-minute writes at the cache-write price plus 1-hour writes at theirs. */
  cacheWriteCost: NanoUsd;
  /** Output, reasoning included, at the output price. */
  outputCost: NanoUsd;
  /** What is charged: the sum of the four parts above. */
  totalCost: NanoUsd;
  /** Priced but not charged: past the hold and what was still free (see `chargeWithin`). */
  unbilledCost: NanoUsd;
  /**
   * Not a charge: what caching saved against billing every cached and written token at the input price (signed:
   * a write costs more than input, so a prompt that only wrote has a negative discount; OpenRouter's
   * `cache_discount`). cacheRead × (input − cacheReadPrice) − write5m × (cacheWrite − input) − write1h × (cacheWrite1h − input).
   */
  cacheDiscount: NanoUsd;
}

/**
 * Exact integer cost: cache reads and writes at their prices (a 1-hour write at the 1-hour price, the rest of the
 * writes at the 5-minute one), the rest of the prompt at the input price.
 */
export function priceUsage(usage: Usage, prices: TokenPrices): CostBreakdown {
  const cached = Math.min(usage.cacheReadTokens, usage.inputTokens);
  const written = Math.min(usage.cacheWriteTokens, usage.inputTokens - cached);
  const written1h = Math.min(usage.cacheWrite1hTokens ?? 0, written);
  const written5m = written - written1h;
  const uncached = usage.inputTokens - cached - written;
  const cacheWrite1h = prices.cacheWrite1h ?? prices.cacheWrite;
  const inputCost = uncached * prices.input;
  const cacheReadCost = cached * prices.cacheRead;
  const cacheWriteCost = written5m * prices.cacheWrite + written1h * cacheWrite1h;
  const outputCost = usage.outputTokens * prices.output;
  // + 0: never -0 (0 tokens × a negative difference).
  const cacheDiscount = cached * (prices.input - prices.cacheRead) - written5m * (prices.cacheWrite - prices.input) - written1h * (cacheWrite1h - prices.input) + 0;
  return { inputCost, cacheReadCost, cacheWriteCost, outputCost, totalCost: inputCost + cacheReadCost + cacheWriteCost + outputCost, unbilledCost: 0, cacheDiscount };
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
