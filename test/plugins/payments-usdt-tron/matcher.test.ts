import { describe, expect, it } from "bun:test";
import { matchTransfer, microToDecimal, toMicro, type MatchRules, type SeenTransfer } from "../../../src/plugins/payments-usdt-tron/matcher.ts";
import type { Topup } from "../../../src/plugins/storage/repository.ts";

const ADDRESS = "TQ4ZQ4ujfW9XbyP7BhYxcv7L1ERQyL5mNs";
const USDT = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const RULES: MatchRules = { token: { contract: USDT, symbol: "USDT", decimals: 6 }, minimumUsd: 12, clockSkewMs: 60_000 };
const T0 = Date.UTC(2026, 10, 1, 12);
const HOUR = 3_600_000;

function topup(fields: Partial<Topup> = {}): Topup {
  return {
    id: "tu_1",
    accountId: "acct_1",
    method: "usdt",
    amount: 20_000_000_000,
    status: "pending",
    processorRef: null,
    checkoutUrl: null,
    paymentRef: null,
    network: "tron",
    payTo: ADDRESS,
    payAmountMicro: 20_004_217,
    flag: null,
    takenBack: 0,
    expiresAt: T0 + HOUR,
    createdAt: T0,
    updatedAt: T0,
    ...fields,
  };
}

function transfer(fields: Partial<SeenTransfer> = {}): SeenTransfer {
  return {
    id: "tron:" + "ab".repeat(32),
    network: "tron",
    contract: USDT,
    symbol: "USDT",
    decimals: 6,
    from: "TJmmqjb1DK9TTZbQXzRQ2AuA94z4gKAPFh",
    to: ADDRESS,
    value: "20004217",
    at: T0 + 5 * 60_000,
    ...fields,
  };
}

describe("matchTransfer", () => {
  it("credits the open top-up of exactly that amount", () => {
    expect(matchTransfer(transfer(), [topup(), topup({ id: "tu_2", payAmountMicro: 20_004_218 })], RULES)).toEqual({
      kind: "credit",
      topupId: "tu_1",
      amountMicro: 20_004_217,
    });
  });

  it("another token is unmatched, naming its symbol and contract, whatever its amount", () => {
    const fake = "TXLAQ63Xg1NAzckPwKHvzw7CSEmLMEqcdj";
    const match = matchTransfer(transfer({ contract: fake, symbol: "USDT" }), [topup()], RULES);
    expect(match).toEqual({ kind: "unmatched", reason: `token USDT ${fake} is not USDT`, amountMicro: 20_004_217 });
  });

  it("a different amount, even by one micro-USDT, is unmatched", () => {
    const match = matchTransfer(transfer({ value: "20004216" }), [topup()], RULES);
    expect(match).toEqual({ kind: "unmatched", reason: "no open top-up for 20.004216 USDT", amountMicro: 20_004_216 });
  });

  it("below the 12 USD minimum is unmatched, even when a top-up has that amount", () => {
    const match = matchTransfer(transfer({ value: "11999999" }), [topup({ payAmountMicro: 11_999_999 })], RULES);
    expect(match.kind).toBe("unmatched");
    expect((match as { reason: string }).reason).toBe("11.999999 USDT is below the 12 USD minimum");
    expect(matchTransfer(transfer({ value: "12000000" }), [topup({ payAmountMicro: 12_000_000 })], RULES).kind).toBe("credit");
  });

  it("at or after the expiry is unmatched and names the top-up", () => {
    for (const at of [T0 + HOUR, T0 + 2 * HOUR]) {
      const match = matchTransfer(transfer({ at }), [topup()], RULES);
      expect(match.kind).toBe("unmatched");
      expect((match as { reason: string }).reason).toContain("after expiry of top-up tu_1");
    }
    expect(matchTransfer(transfer({ at: T0 + HOUR - 1 }), [topup()], RULES).kind).toBe("credit");
  });

  it("a transfer older than the top-up (beyond the clock skew) pays nothing", () => {
    expect(matchTransfer(transfer({ at: T0 - 61_000 }), [topup()], RULES)).toMatchObject({ kind: "unmatched", reason: "no open top-up for 20.004217 USDT" });
    expect(matchTransfer(transfer({ at: T0 - 59_000 }), [topup()], RULES).kind).toBe("credit");
  });

  it("only pending top-ups to this address on this network are payable", () => {
    for (const other of [topup({ status: "credited" }), topup({ status: "expired" }), topup({ payTo: "TJmmqjb1DK9TTZbQXzRQ2AuA94z4gKAPFh" }), topup({ network: "ethereum" })]) {
      expect(matchTransfer(transfer(), [other], RULES).kind).toBe("unmatched");
    }
  });

  it("two open top-ups of one amount: never guesses", () => {
    const match = matchTransfer(transfer(), [topup(), topup({ id: "tu_2" })], RULES);
    expect(match.kind).toBe("unmatched");
    expect((match as { reason: string }).reason).toContain("matches 2 open top-ups (tu_1, tu_2)");
  });

  it("an expired top-up and a newer open one of the same amount: the open one, by the transfer's time", () => {
    const old = topup({ id: "tu_old", createdAt: T0 - 2 * HOUR, expiresAt: T0 - HOUR });
    expect(matchTransfer(transfer(), [old, topup()], RULES)).toMatchObject({ kind: "credit", topupId: "tu_1" });
    expect(matchTransfer(transfer({ at: T0 - 30 * 60_000 }), [old, topup()], RULES)).toMatchObject({ kind: "unmatched" });
  });
});

describe("amounts", () => {
  it("micro-USDT from the token's smallest unit, exactly", () => {
    expect(toMicro("20004217", 6)).toBe(20_004_217);
    expect(toMicro("20004217000000000000", 18)).toBe(20_004_217);
    expect(toMicro("2000", 3)).toBe(2_000_000);
    expect(toMicro("9".repeat(40), 6)).toBe(Number.MAX_SAFE_INTEGER);
    expect(microToDecimal(20_004_217)).toBe("20.004217");
    expect(microToDecimal(12_000_000)).toBe("12.000000");
    expect(microToDecimal(1)).toBe("0.000001");
  });
});
