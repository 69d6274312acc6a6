import { describe, expect, it } from "bun:test";
import { nanoToUsdString } from "../../src/core/money.ts";

describe("money at the JSON edge, beyond 2^53", () => {
  it("nanoToUsdString prints any integer magnitude in plain digits (never exponent notation)", () => {
    const reference = (nano: number) => {
      const big = BigInt(nano);
      const abs = big < 0n ? -big : big;
      const frac = (abs % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/, "");
      return (big < 0n ? "-" : "") + (abs / 1_000_000_000n).toString() + (frac ? "." + frac : "");
    };
    for (const nano of [2 ** 53, 2 ** 53 + 2, -(2 ** 60), 1e21, 1.2345e22, 5e302, -5e302, Number.MAX_VALUE]) {
      const text = nanoToUsdString(nano);
      expect(text).not.toContain("e");
      expect(text).toBe(reference(nano));
    }
    expect(nanoToUsdString(5e302).startsWith("5")).toBe(true);
  });
});
