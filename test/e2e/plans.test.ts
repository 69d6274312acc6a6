import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { usdToNano } from "../../src/core/money.ts";

// The shipped "pro" plan: price 20, bonus 5, windows 4h 10 / week 40 / month 100 (calendar).
const HOUR = 3_600_000;
let clock = Date.UTC(2026, 10, 10, 12, 0, 0);
let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway({ now: () => clock });
});
afterAll(async () => {
  await t.stop();
});

/** A request costing exactly `usd` on gpt-6.2-astra (output $40 per 1M tokens, at most 128k): usd * 25k output tokens. */
function spend(client: OpenAI, usd: number, maxTokens = 50_000) {
  const usage = { prompt_tokens: 0, completion_tokens: usd * 25_000 };
  return client.chat.completions.create({
    model: "gpt-6.2-astra",
    max_tokens: maxTokens,
    messages: [{ role: "user", content: `[[fake ${JSON.stringify({ usage })}]]` }],
  });
}

async function buy(accountId: string, funding: string) {
  return t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "pro", funding });
}

describe("plans", () => {
  it("buys one balance-funded cycle per account: price debited, bonus credited; a second needs card funding", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 30 });
    const first = await buy(accountId, "balance");
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ plan: "pro", funding: "balance", renewing: false, price: 20, balance: 15 });
    expect(Date.parse(first.body.data.ends_at) - Date.parse(first.body.data.started_at)).toBe(30 * 24 * HOUR);

    const again = await buy(accountId, "balance");
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain("card");
    const card = await buy(accountId, "card");
    expect(card.status).toBe(201);
    expect(card.body.data).toMatchObject({ funding: "card", renewing: true, balance: 20 });

    const credits = await fetch(`${t.url}/v1/credits`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as any);
    // 30 card + 5 + 5 bonus = 40 credited; 20 spent on the plan.
    expect(credits.data).toMatchObject({ total_credits: 40, total_usage: 20, balance: 20 });
  });

  it("refuses a balance-funded plan the balance cannot pay, an unknown plan and a bad funding", async () => {
    const { accountId } = await t.newAccountWithKey({ credit: 10 });
    const poor = await buy(accountId, "balance");
    expect(poor.status).toBe(400);
    expect(poor.body.error.code).toBe("insufficient_balance");
    expect((await t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "gold", funding: "card" })).status).toBe(400);
    // Names every object has are not plans either (they answered 500).
    for (const plan of ["__proto__", "constructor", "toString"]) {
      expect((await t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan, funding: "card" })).status).toBe(400);
    }
    expect((await t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "pro", funding: "cash" })).status).toBe(400);
    expect((await t.admin("POST", `/admin/v1/accounts/acct_missing/plan`, { plan: "pro", funding: "card" })).status).toBe(404);
  });
});

describe("spend windows", () => {
  it("refuses a request that would cross the 4-hour window, names it, and serves again when it frees up", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 200 });
    expect((await buy(accountId, "card")).status).toBe(201);
    const client = t.client(key);
    // Reservations are max_tokens at $40/M: 50k tokens hold $2 each; settle at the real cost.
    for (let i = 0; i < 4; i++) await spend(client, 2);
    const crossing = await spend(client, 1).catch((error) => error);
    expect(crossing).toBeInstanceOf(OpenAI.RateLimitError);
    expect(crossing.error.code).toBe("spend_window_exceeded");
    expect(crossing.message).toContain("4-hour");
    expect(Number(crossing.headers.get("retry-after"))).toBeGreaterThan(0);

    clock += 4 * HOUR + 10 * 60_000;
    await expect(spend(client, 2)).resolves.toBeDefined();
  });

  it("caps a request without max_tokens to what the window still allows", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 200 });
    expect((await buy(accountId, "card")).status).toBe(201);
    const client = t.client(key);
    for (let i = 0; i < 4; i++) await spend(client, 2);
    await spend(client, 1.5, 37_500);
    t.fake.reset();
    await client.chat.completions.create({ model: "gpt-6.2-astra", messages: [{ role: "user", content: "hi" }] });
    const sent = t.fake.requests[0]!.body as any;
    // $10 - $9.5 spent = $0.5 of room, minus the prompt's worst case: just under 12.5k tokens at $40/M
    // (the model's own maximum, 128k, would cost $5.12).
    expect(sent.max_completion_tokens).toBeGreaterThan(12_000);
    expect(sent.max_completion_tokens).toBeLessThan(12_500);
  });

  it("enforces the weekly window across 4-hour windows", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 500 });
    expect((await buy(accountId, "card")).status).toBe(201);
    const client = t.client(key);
    for (let block = 0; block < 4; block++) {
      for (let i = 0; i < 4; i++) await spend(client, 2.4, 62_500);
      clock += 5 * HOUR;
    }
    // 38.4 spent in the week: a $2.5 hold crosses $40.
    const crossing = await spend(client, 2.4, 62_500).catch((error) => error);
    expect(crossing.error?.code).toBe("spend_window_exceeded");
    expect(crossing.message).toContain("weekly");
    clock += 7 * 24 * HOUR;
    await expect(spend(client, 2.4, 62_500)).resolves.toBeDefined();
  });

  it("leaves accounts without a plan unconstrained by windows", async () => {
    const { key } = await t.newAccountWithKey({ credit: 100 });
    const client = t.client(key);
    for (let i = 0; i < 6; i++) await spend(client, 2);
    const credits = await fetch(`${t.url}/v1/credits`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as any);
    expect(usdToNano(String(credits.data.total_usage))).toBe(usdToNano(12));
  });
});
