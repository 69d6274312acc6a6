import { describe, expect, it } from "bun:test";
import { createPromotionalStatus } from "../../../src/plugins/rate-limit/promotional.ts";
import { capBinds, limitExceeded, promptTooLarge, stricter } from "../../../src/plugins/rate-limit/limits.ts";
import { UnavailableError } from "../../../src/core/errors.ts";
import type { AccountTotals, Repository } from "../../../src/plugins/storage/repository.ts";

/** A store that answers accountTotals from a table and counts its reads. */
function fakeStore(paid: Record<string, number>) {
  const reads: string[] = [];
  let failing = false;
  const store = {
    async accountTotals(accountId: string): Promise<AccountTotals> {
      reads.push(accountId);
      await Bun.sleep(1);
      if (failing) throw new Error("database is locked");
      return { credits: 5, debits: 0, balance: 5, paidCredits: paid[accountId] ?? 0 };
    },
  } as unknown as Repository;
  return { store, reads, paid, fail: (value: boolean) => (failing = value) };
}

describe("rate-limit promotional status", () => {
  it("reads an account once and keeps a paid one for good", async () => {
    let clock = 1_000;
    const { store, reads } = fakeStore({ acct_paid: 5_000_000_000 });
    const status = createPromotionalStatus(store, () => clock, 1_000);
    expect(status.peek("acct_paid")).toBeUndefined();
    expect(await status.load("acct_paid")).toBe(false);
    clock += 3_600_000;
    expect(status.peek("acct_paid")).toBe(false);
    expect(await status.refresh("acct_paid")).toBe(false);
    expect(reads).toEqual(["acct_paid"]);
  });

  it("re-reads a promotional account after the cache time, so a first paid top-up lifts the caps", async () => {
    let clock = 1_000;
    const fake = fakeStore({});
    const status = createPromotionalStatus(fake.store, () => clock, 1_000);
    expect(await status.load("acct_promo")).toBe(true);
    clock += 999;
    expect(status.peek("acct_promo")).toBe(true);
    fake.paid.acct_promo = 5_000_000_000; // a card top-up
    expect(status.peek("acct_promo")).toBe(true);
    clock += 1;
    expect(status.peek("acct_promo")).toBeUndefined();
    expect(await status.load("acct_promo")).toBe(false);
    expect(status.peek("acct_promo")).toBe(false);
  });

  it("refresh reads a promotional account at once (GET /v1/key right after a top-up)", async () => {
    const fake = fakeStore({});
    const status = createPromotionalStatus(fake.store, () => 1_000, 1_000);
    expect(await status.load("acct")).toBe(true);
    fake.paid.acct = 1;
    expect(status.peek("acct")).toBe(true);
    expect(await status.refresh("acct")).toBe(false);
    expect(status.peek("acct")).toBe(false);
  });

  it("shares one store read among concurrent requests of an account", async () => {
    const fake = fakeStore({});
    const status = createPromotionalStatus(fake.store, () => 1_000, 1_000);
    const answers = await Promise.all(Array.from({ length: 20 }, () => status.load("acct")));
    expect(answers.every((answer) => answer === true)).toBe(true);
    expect(fake.reads).toEqual(["acct"]);
  });

  it("turns a store failure into 503 unavailable and reads again next time", async () => {
    const fake = fakeStore({});
    const status = createPromotionalStatus(fake.store, () => 1_000, 1_000);
    fake.fail(true);
    const failure = await status.load("acct").catch((error) => error);
    expect(failure).toBeInstanceOf(UnavailableError);
    expect(failure.headers).toEqual({ "retry-after": "2" });
    fake.fail(false);
    expect(await status.load("acct")).toBe(true);
  });
});

describe("rate-limit limits", () => {
  it("combines a key's own limit with a cap: the stricter wins, 0 and null mean none", () => {
    expect(stricter(null, 0)).toBe(0);
    expect(stricter(null, 10)).toBe(10);
    expect(stricter(600, 10)).toBe(10);
    expect(stricter(5, 10)).toBe(5);
    expect(stricter(600, 0)).toBe(600);
    expect(capBinds(null, 10, true)).toBe(true);
    expect(capBinds(600, 10, true)).toBe(true);
    expect(capBinds(5, 10, true)).toBe(false);
    expect(capBinds(null, 10, false)).toBe(false);
    expect(capBinds(null, 0, true)).toBe(false);
  });

  it("says which limit, its number and when to retry (whole seconds, at least 1)", () => {
    const rpm = limitExceeded({ limit: "rpm", retryAfterMs: 12_000 }, 5, 0, 0, false);
    expect(rpm).toMatchObject({ status: 429, code: "rate_limit_exceeded", headers: { "retry-after": "12" } });
    expect(rpm.message).toBe("rate limit exceeded: this key may send 5 requests per minute (RPM); retry after 12 s");
    const tpm = limitExceeded({ limit: "tpm", retryAfterMs: 1 }, 0, 50_000, 120, true);
    expect(tpm.headers).toEqual({ "retry-after": "1" });
    expect(tpm.message).toContain("50000 tokens per minute (TPM)");
    expect(tpm.message).toContain("without a paid top-up");
    const tooLarge = promptTooLarge(2_000, 1_000, false);
    expect(tooLarge).toMatchObject({ status: 429, code: "rate_limit_exceeded", headers: { "x-should-retry": "false" } });
    expect(tooLarge.message).toContain("no retry can succeed");
  });
});
