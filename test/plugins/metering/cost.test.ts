/**
 * Pricing cache writes by lifetime (issue 31): 5-minute writes at cache_write, 1-hour writes at cache_write_1h,
 * exact integers; the signed cache discount against billing every cached and written token as input.
 */
import { describe, expect, it } from "bun:test";
import { join } from "node:path";
import type { Usage } from "../../../src/core/canonical.ts";
import { loadCatalog } from "../../../src/plugins/catalog/catalog.ts";
import { chargeWithin, priceUsage, type TokenPrices } from "../../../src/plugins/metering/cost.ts";
import { clampUsage } from "../../../src/plugins/metering/usage.ts";

/** Claude Sonnet 5.5 in catalog.yaml, nano-USD per token: $2 input, $10 output, $0.10 read, $2.50 5-minute write, $4 1-hour write. */
const SONNET: TokenPrices = { input: 2_000, output: 10_000, cacheRead: 100, cacheWrite: 2_500, cacheWrite1h: 4_000 };
const USAGE: Usage = { inputTokens: 6_300, cacheReadTokens: 5_000, cacheWriteTokens: 1_000, cacheWrite1hTokens: 600, outputTokens: 200, reasoningTokens: 0 };

describe("priceUsage: cache writes by lifetime", () => {
  it("bills 5-minute writes at cache_write and 1-hour writes at cache_write_1h, to the nano-USD", () => {
    const cost = priceUsage(USAGE, SONNET);
    expect(cost).toEqual({
      inputCost: 300 * 2_000,
      cacheReadCost: 5_000 * 100,
      cacheWriteCost: 400 * 2_500 + 600 * 4_000,
      outputCost: 200 * 10_000,
      totalCost: 600_000 + 500_000 + 3_400_000 + 2_000_000,
      unbilledCost: 0,
      // reads saved 5000 × (2000 − 100); writes cost 400 × 500 and 600 × 2000 more than input
      cacheDiscount: 5_000 * 1_900 - 400 * 500 - 600 * 2_000,
    });
  });

  it("prices every write at cache_write when there is no 1-hour part or no 1-hour price", () => {
    const fiveMinutes = priceUsage({ ...USAGE, cacheWrite1hTokens: undefined }, SONNET);
    expect(fiveMinutes.cacheWriteCost).toBe(1_000 * 2_500);
    const { cacheWrite1h: _, ...noHourPrice } = SONNET;
    expect(priceUsage(USAGE, noHourPrice).cacheWriteCost).toBe(1_000 * 2_500);
  });

  it("a 1-hour write costs 2x input against 1.25x for a 5-minute one: 37.5% of the write under-billed before", () => {
    const write = (hour: number): Usage => ({ inputTokens: 10_000, cacheReadTokens: 0, cacheWriteTokens: 10_000, cacheWrite1hTokens: hour, outputTokens: 0, reasoningTokens: 0 });
    expect(priceUsage(write(10_000), SONNET).totalCost).toBe(10_000 * 4_000);
    expect(priceUsage(write(0), SONNET).totalCost).toBe(10_000 * 2_500);
    expect(1 - priceUsage(write(0), SONNET).totalCost / priceUsage(write(10_000), SONNET).totalCost).toBe(0.375);
  });

  it("gives a signed discount: negative when a prompt only wrote, zero without caching (never -0)", () => {
    const onlyWrote: Usage = { inputTokens: 3_000, cacheReadTokens: 0, cacheWriteTokens: 3_000, cacheWrite1hTokens: 1_000, outputTokens: 5, reasoningTokens: 0 };
    expect(priceUsage(onlyWrote, SONNET).cacheDiscount).toBe(-(2_000 * 500 + 1_000 * 2_000));
    const plain = priceUsage({ inputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 0 }, SONNET);
    expect(Object.is(plain.cacheDiscount, 0)).toBe(true);
    // A provider without cache prices (cache tokens billed as input) shows no discount either way.
    const flat: TokenPrices = { input: 110, output: 340, cacheRead: 110, cacheWrite: 110 };
    expect(Object.is(priceUsage(USAGE, flat).cacheDiscount, 0)).toBe(true);
  });

  it("never lets the 1-hour part exceed the writes, nor the writes the prompt", () => {
    const odd: Usage = { inputTokens: 1_000, cacheReadTokens: 900, cacheWriteTokens: 500, cacheWrite1hTokens: 800, outputTokens: 0, reasoningTokens: 0 };
    const cost = priceUsage(odd, SONNET);
    expect(cost.cacheWriteCost).toBe(100 * 4_000); // 100 written (what is left of the prompt), all of it 1-hour
    expect(cost.inputCost).toBe(0);
  });

  it("keeps the discount when the charge is bounded by the hold (it is not a charge)", () => {
    const cost = priceUsage(USAGE, SONNET);
    const bounded = chargeWithin(cost, 1_000_000);
    expect(bounded.totalCost).toBe(1_000_000);
    expect(bounded.cacheDiscount).toBe(cost.cacheDiscount);
    expect(bounded.inputCost + bounded.cacheReadCost + bounded.cacheWriteCost + bounded.outputCost).toBe(1_000_000);
  });

  it("prices with the catalog's Anthropic prices: cacheWrite1h is 2x input", () => {
    const catalog = loadCatalog(join(import.meta.dir, "../../../catalog.yaml"), new Date("2026-11-22T12:00:00Z"));
    const prices = catalog.pricesFor(catalog.get("claude-sonnet-5-5")!, USAGE.inputTokens);
    expect(priceUsage(USAGE, prices)).toEqual(priceUsage(USAGE, SONNET));
  });
});

describe("clampUsage keeps the 1-hour part", () => {
  it("returns the same object when it is already in range", () => {
    expect(clampUsage(USAGE)).toBe(USAGE);
    const none: Usage = { ...USAGE, cacheWrite1hTokens: undefined };
    expect(clampUsage(none)).toBe(none);
  });

  it("clamps it to the writes, rounds it down, and drops a negative one", () => {
    expect(clampUsage({ ...USAGE, cacheWrite1hTokens: 5_000 }).cacheWrite1hTokens).toBe(1_000);
    expect(clampUsage({ ...USAGE, cacheWrite1hTokens: 600.7 }).cacheWrite1hTokens).toBe(600);
    expect(clampUsage({ ...USAGE, cacheWrite1hTokens: -3 })).not.toHaveProperty("cacheWrite1hTokens");
    expect(clampUsage({ ...USAGE, cacheWriteTokens: 10_000, cacheWrite1hTokens: 2_000 })).toMatchObject({ cacheWriteTokens: 1_300, cacheWrite1hTokens: 1_300 });
  });
});
