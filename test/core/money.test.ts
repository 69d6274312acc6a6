import { describe, expect, it } from "bun:test";
import { nanoToUsd, nanoToUsdString, usdToNano } from "../../src/core/money.ts";

describe("money at the JSON edge", () => {
  it("nanoToUsd is the double nearest the exact decimal, for every magnitude", () => {
    const samples = [0, 1, -1, 9, 10, 999_999_999, 1_000_000_000, 1_000_000_001, 123_456_789_012, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER];
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 200_000; i++) {
      const digits = 1 + Math.floor(random() * 16);
      const n = Math.floor(random() * 10 ** digits) % Number.MAX_SAFE_INTEGER;
      samples.push(i % 2 === 0 ? n : -n);
    }
    for (const nano of samples) expect(nanoToUsd(nano)).toBe(Number(nanoToUsdString(nano)));
  });

  it("nanoToUsdString writes the exact decimal, without trailing zeros, for every magnitude", () => {
    const reference = (nano: number) => {
      const abs = BigInt(Math.abs(nano));
      const frac = (abs % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/, "");
      return (nano < 0 ? "-" : "") + (abs / 1_000_000_000n).toString() + (frac ? "." + frac : "");
    };
    const samples = [0, 1, -1, 10, 100, 1_000_000_000, 1_000_000_001, 1_500_000_000, 999_999_999, 120_000_000, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER];
    for (let digits = 1; digits <= 15; digits++) for (let zeros = 0; zeros <= 9; zeros++) samples.push(7 * 10 ** zeros + (digits > zeros ? 3 * 10 ** digits : 0));
    for (const nano of samples) expect(nanoToUsdString(nano)).toBe(reference(nano));
  });

  it("a decimal amount survives the round trip through nano-USD", () => {
    for (const usd of ["0.000000001", "0.0015", "12.5", "1000000"]) expect(nanoToUsdString(usdToNano(usd))).toBe(usd);
  });
});
