import { expect } from "bun:test";
import OpenAI from "openai";
import type { TestGateway } from "./gateway.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { countPromptTokens } from "../../src/plugins/token-count/count.ts";

export const catalog = loadCatalog("catalog.yaml");
export type Message = { role: "user"; content: string };

/** The reservation the gateway computes for a body (prices from the catalog, prompt bound from token-count). */
export function worstCase(model: string, messages: Message[], maxTokens: number): { bound: number; amount: number; promptPrice: number; outputPrice: number } {
  const entry = catalog.get(model)!;
  const bound = countPromptTokens({ messages }, entry.family === "openai");
  const prices = catalog.pricesFor(entry, bound, new Date());
  const promptPrice = Math.max(prices.input, prices.cacheRead, prices.cacheWrite, prices.cacheWrite1h);
  return { bound, amount: bound * promptPrice + maxTokens * prices.output, promptPrice, outputPrice: prices.output };
}

/**
 * A request whose real cost equals its reservation: the fake reports the prompt bound as prompt tokens,
 * all of them written to cache (the dearest prompt price here), and exactly max_tokens of output. The
 * directive holds the bound it is part of, so iterate to the fixed point.
 */
export function exactCostRequest(model: string, maxTokens: number, label: string) {
  let bound = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    const directive = { usage: { prompt_tokens: bound, completion_tokens: maxTokens, cache_write_tokens: bound } };
    const messages: Message[] = [{ role: "user", content: `${label} [[fake ${JSON.stringify(directive)}]]` }];
    const worst = worstCase(model, messages, maxTokens);
    if (worst.bound === bound) {
      const prices = catalog.pricesFor(catalog.get(model)!, bound, new Date());
      expect(prices.cacheWrite).toBe(worst.promptPrice); // the real cost below is then exactly the hold
      return { body: { model, messages, max_tokens: maxTokens }, reservation: worst.amount };
    }
    bound = worst.bound;
  }
  throw new Error("prompt bound did not converge");
}

/** Fires `count` identical requests at once; returns what each got. */
export async function burst(client: OpenAI, body: Record<string, unknown>, count: number) {
  return Promise.all(
    Array.from({ length: count }, () =>
      client.chat.completions.create(body as any).then(
        (completion) => ({ ok: true as const, completion }),
        (error: unknown) => ({ ok: false as const, error: error as InstanceType<typeof OpenAI.APIError> }),
      ),
    ),
  );
}


/** The key's account figures from GET /v1/credits (USD). */
export async function credits(t: TestGateway, key: string): Promise<{ total_credits: number; total_usage: number; balance: number; currency: string }> {
  const response = await fetch(`${t.url}/v1/credits`, { headers: { authorization: `Bearer ${key}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as any).data;
}

/** A card credit through the admin API. */
export async function topUp(t: TestGateway, accountId: string, amount: string | number): Promise<void> {
  const { status, body } = await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount, kind: "card", reference: crypto.randomUUID() });
  expect(status, JSON.stringify(body)).toBe(201);
}
