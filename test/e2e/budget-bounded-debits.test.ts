import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { computeUsage } from "../fake-upstream/openai.ts";
import { burst, catalog, worstCase, type Message } from "../helpers/budget.ts";
import { expectLedgerExact, fundsOf, settled, startMoneyStore, storeKinds, type MoneyStore } from "../helpers/money.ts";
import { nanoToUsd, nanoToUsdString } from "../../src/core/money.ts";

/**
 * Issue 24, defect 2: a debit is bounded by the request's hold plus what is still free, so an upstream
 * that bills past the cap it was sent (a liar, or one that ignores max_tokens) can never take an
 * account below zero nor a key past its limit. What could not be charged is the generation's
 * unbilled_cost. On every place holds live: SQLite process memory, SQLite shared rows, Postgres.
 */

const MODEL = "gpt-6.2-astra"; // $8 in, $10 cache write, $40 out per million
const prices = catalog.pricesFor(catalog.get(MODEL)!, 0, new Date());

/** A chat request whose upstream reports `completion` output tokens whatever max_tokens says. */
function lyingRequest(label: string, maxTokens: number, completion: number) {
  const messages: Message[] = [{ role: "user", content: `${label} [[fake ${JSON.stringify({ usage: { completion_tokens: completion } })}]]` }];
  const body = { model: MODEL, messages, max_tokens: maxTokens };
  const priced = computeUsage(body).prompt_tokens * prices.input + completion * prices.output;
  return { body, hold: worstCase(MODEL, messages, maxTokens).amount, priced };
}

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await startFakeUpstream();
});
afterAll(async () => {
  await fake.stop();
});

for (const kind of storeKinds()) {
  describe(`bounded debits (${kind})`, () => {
    let store: MoneyStore;
    beforeAll(async () => {
      store = await startMoneyStore(kind, { fake });
    });
    afterAll(async () => {
      await store?.close();
    });

    it("100 concurrent requests billed past their holds on a balance covering 7: never below zero, at most 7 served, ledger exact, the rest unbilled", async () => {
      const { t } = store;
      // ~$0.72 holds: 7.5 of them are above the $5 minimum card top-up.
      const { body, hold, priced } = lyingRequest(`race ${kind}`, 18_000, 100_000);
      expect(priced).toBeGreaterThan(hold);
      const credit = 7 * hold + Math.floor(hold / 2);
      const { accountId, key } = await t.newAccountWithKey({ credit: nanoToUsd(credit) });
      const outcomes = await burst(t.client(key), body, 100);
      const served = outcomes.filter((o) => o.ok).length;
      expect(served).toBeGreaterThanOrEqual(1);
      expect(served).toBeLessThanOrEqual(7);
      for (const o of outcomes) if (!o.ok) expect(o.error.code).toBe("insufficient_balance");

      const money = await settled(store, accountId, served);
      expect(money.generations).toBe(served);
      expectLedgerExact(money);
      expect(money.credits).toBe(credit);
      // Every served request was priced at `priced`: what was not charged is recorded, to the nano.
      expect(money.generationCosts + money.unbilled).toBe(served * priced);
      expect(money.unbilled).toBeGreaterThan(0);
      // The half hold left over went to one of them: the balance is spent to zero, never past it.
      expect(money.credits - money.debits).toBe(0);
      expect((await fundsOf(t, accountId)).held).toBe(0);
    });

    it("a key budget is never overrun by requests billed past their holds", async () => {
      const { t } = store;
      const { body, hold, priced } = lyingRequest(`key race ${kind}`, 18_000, 100_000);
      const limit = 7 * hold + Math.floor(hold / 3);
      const { accountId, keyId, key } = await t.newAccountWithKey({ credit: 100, key: { limit: nanoToUsd(limit) } });
      const outcomes = await burst(t.client(key), body, 100);
      const served = outcomes.filter((o) => o.ok).length;
      expect(served).toBeGreaterThanOrEqual(1);
      expect(served).toBeLessThanOrEqual(7);
      for (const o of outcomes) if (!o.ok) expect(o.error.code).toBe("key_budget_exceeded");

      const money = await settled(store, accountId, served);
      expectLedgerExact(money);
      const stored = await store.storedKey(keyId);
      expect(stored.usage).toBeLessThanOrEqual(limit);
      expect(stored.usage).toBe(limit); // the excess of the first settled took what the key had left
      expect(stored.usage).toBe(stored.generationCosts);
      expect(money.generationCosts + money.unbilled).toBe(served * priced);
      const funds = await fundsOf(t, accountId, keyId);
      expect(funds.held).toBe(0);
      expect(funds.key!.held).toBe(0);
    });

    it("an upstream reporting 10,000,000 completion tokens against max_tokens 50 leaves $5 at zero, not below, and records the rest as unbilled_cost", async () => {
      const { t } = store;
      const { body, hold, priced } = lyingRequest(`liar ${kind}`, 50, 10_000_000);
      const { accountId, key } = await t.newAccountWithKey({ credit: 5 });
      fake.reset();
      const { data: completion, response } = await t.client(key).chat.completions.create(body as any).withResponse();
      expect(completion.choices[0]!.message.content).toBeTruthy();
      // The cap the hold assumed went upstream.
      expect(fake.requests.find((r) => r.body?.messages?.[0]?.content === body.messages[0]!.content)!.body.max_tokens).toBe(50);
      // The hold was extended by all that was free: exactly $5 charged, shown in the cost header.
      expect(response.headers.get("x-gateway-cost")).toBe("5");
      const requestId = response.headers.get("x-gateway-request-id")!;

      const money = await settled(store, accountId, 1);
      expectLedgerExact(money);
      expect(money.credits - money.debits).toBe(0);
      expect(money.unbilled).toBe(priced - 5_000_000_000);
      expect(priced - 5_000_000_000).toBeGreaterThan(hold);

      const view = await fetch(`${t.url}/v1/generation?id=${requestId}`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as any);
      expect(view.data.total_cost).toBe(5);
      expect(view.data.unbilled_cost).toBe(Number(nanoToUsdString(priced - 5_000_000_000)));
      expect(view.data.unbilled_cost).toBeGreaterThan(0);
      expect(view.data.usage_estimated).toBe(false);
      expect(view.data.usage.completion_tokens).toBe(10_000_000);
      expect(view.data.status).toBe("success");

      // The account is at zero: the next request is refused, not served on credit.
      const refused = await t.client(key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "more" }], max_tokens: 5 }).catch((e) => e);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused.error.code).toBe("insufficient_balance");
      expect((await fundsOf(t, accountId)).held).toBe(0);
    });
  });
}
