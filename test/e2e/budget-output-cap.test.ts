import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream, type RecordedRequest } from "../fake-upstream/server.ts";
import { catalog } from "../helpers/budget.ts";

/**
 * Issue 24, defect 2 (b): the output cap the budget's hold assumed is ALWAYS sent upstream, in each
 * provider family's own field, so an honest upstream can never bill more than was held; a max_tokens
 * above the model's maximum is a 400 naming the maximum, never forwarded.
 */

let fake: FakeUpstream;
let t: TestGateway;
let key: string;
beforeAll(async () => {
  fake = await startFakeUpstream();
  t = await startTestGateway({
    fake,
    env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "sk-ant-upstream", GEMINI_BASE_URL: fake.url, GEMINI_API_KEY: "gm-upstream" },
  });
  ({ key } = await t.newAccountWithKey({ credit: 1000 }));
});
afterAll(async () => {
  await t.stop();
  await fake.stop();
});

const maxOf = (model: string) => catalog.get(model)!.max_output_tokens;

/** The one upstream request a call made (the fake records every request; this finds it by its marker). */
function sent(marker: string): RecordedRequest {
  const found = fake.requests.filter((r) => JSON.stringify(r.body).includes(marker));
  expect(found).toHaveLength(1);
  return found[0]!;
}

describe("the output cap always goes upstream", () => {
  it("OpenAI chat: max_completion_tokens at the model maximum when the client sets none, the client's own max_tokens as sent", async () => {
    const client = t.client(key);
    await client.chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "cap-openai-none" }] });
    expect(sent("cap-openai-none").body.max_completion_tokens).toBe(maxOf("gpt-6-luna"));
    await client.chat.completions.create({ model: "gpt-6-luna", max_tokens: 77, messages: [{ role: "user", content: "cap-openai-own" }] });
    expect(sent("cap-openai-own").body.max_tokens).toBe(77);
    expect(sent("cap-openai-own").body.max_completion_tokens).toBeUndefined();
  });

  it("an OpenAI-compatible vendor: max_tokens at the model maximum", async () => {
    await t.client(key).chat.completions.create({ model: "deepseek-flash", messages: [{ role: "user", content: "cap-deepseek-none" }] });
    expect(sent("cap-deepseek-none").body.max_tokens).toBe(maxOf("deepseek-flash"));
  });

  it("OpenAI Responses: max_output_tokens at the model maximum", async () => {
    await t.client(key).responses.create({ model: "gpt-6-luna", input: "cap-responses-none" });
    const request = sent("cap-responses-none");
    expect(request.path).toBe("/v1/responses");
    expect(request.body.max_output_tokens).toBe(maxOf("gpt-6-luna"));
  });

  it("Anthropic: a Messages client's max_tokens as sent; a chat client without one gets the model maximum", async () => {
    const anthropic = new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0 });
    await anthropic.messages.create({ model: "claude-haiku-5-5", max_tokens: 300, messages: [{ role: "user", content: "cap-anthropic-own" }] });
    expect(sent("cap-anthropic-own").body.max_tokens).toBe(300);
    await t.client(key).chat.completions.create({ model: "claude-haiku-5-5", messages: [{ role: "user", content: "cap-anthropic-none" }] });
    expect(sent("cap-anthropic-none").body.max_tokens).toBe(maxOf("claude-haiku-5-5"));
  });

  it("Gemini: generationConfig.maxOutputTokens at the model maximum, or the client's cap", async () => {
    const client = t.client(key);
    await client.chat.completions.create({ model: "gemini-3.8-flash", messages: [{ role: "user", content: "cap-gemini-none" }] });
    expect(sent("cap-gemini-none").body.generationConfig.maxOutputTokens).toBe(maxOf("gemini-3.8-flash"));
    await client.chat.completions.create({ model: "gemini-3.8-flash", max_tokens: 123, messages: [{ role: "user", content: "cap-gemini-own" }] });
    expect(sent("cap-gemini-own").body.generationConfig.maxOutputTokens).toBe(123);
  });

  it("a cap bound by the funds goes upstream in every family (the hold's own cap, below the model maximum)", async () => {
    // $0.50 of key budget buys ~12.5k tokens at $40 per million output tokens (gpt-6.2-astra), ~50k at $10 (Sonnet),
    // ~25k at Gemini 4 Carbon's $20 from 2026-12-01: each under its model's maximum.
    const { key: small } = await t.newAccountWithKey({ credit: 5, key: { limit: 0.5 } });
    const client = t.client(small);
    await client.chat.completions.create({ model: "gpt-6.2-astra", messages: [{ role: "user", content: "cap-funds-openai" }] });
    await client.chat.completions.create({ model: "claude-sonnet-5-5", messages: [{ role: "user", content: "cap-funds-anthropic" }] });
    await client.chat.completions.create({ model: "gemini-4-carbon", messages: [{ role: "user", content: "cap-funds-gemini" }] });
    expectFundsCap(sent("cap-funds-openai").body.max_completion_tokens, "gpt-6.2-astra");
    expectFundsCap(sent("cap-funds-anthropic").body.max_tokens, "claude-sonnet-5-5");
    expectFundsCap(sent("cap-funds-gemini").body.generationConfig.maxOutputTokens, "gemini-4-carbon");
  });
});

/**
 * The output tokens $0.50 buys at the model's output price in effect today (the catalog's dated prices), less
 * the little the prompt's hold takes: the cap sits just below that, and below the model's maximum.
 */
function expectFundsCap(cap: number, model: string): void {
  const affordable = 500_000_000 / catalog.pricesFor(catalog.get(model)!, 0, new Date()).output;
  expect(affordable).toBeLessThan(maxOf(model));
  expect(cap).toBeLessThan(affordable);
  expect(cap).toBeGreaterThan(affordable * 0.96);
}

describe("max_tokens above the model's maximum", () => {
  it("is a 400 invalid_request naming the maximum, in each client format, and nothing goes upstream", async () => {
    fake.reset();
    const client = t.client(key);
    const chat = await client.chat.completions.create({ model: "gpt-6-luna", max_tokens: 200_000, messages: [{ role: "user", content: "too many" }] }).catch((e) => e);
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    expect(chat.error.code).toBe("invalid_request");
    expect(chat.error.param).toBe("max_tokens");
    expect(chat.message).toContain("128000");

    const completion = await client.chat.completions.create({ model: "gpt-6-luna", max_completion_tokens: 128_001, messages: [{ role: "user", content: "x" }] }).catch((e) => e);
    expect(completion.error.param).toBe("max_completion_tokens");

    const responses = await client.responses.create({ model: "gpt-6-luna", input: "x", max_output_tokens: 500_000 }).catch((e) => e);
    expect(responses).toBeInstanceOf(OpenAI.BadRequestError);
    expect(responses.error.param).toBe("max_output_tokens");

    const anthropic = new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0 });
    // Streamed: the SDK itself refuses a non-streamed call with this many tokens.
    const messages = await anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 64_001, stream: true, messages: [{ role: "user", content: "x" }] }).catch((e) => e);
    expect(messages).toBeInstanceOf(Anthropic.BadRequestError);
    expect(messages.error.error.type).toBe("invalid_request_error");
    expect(messages.message).toContain("64000");
    expect(fake.requests).toHaveLength(0);
  });

  it("the insufficient-balance answer never proposes a max_tokens above the model's maximum, and prints amounts in plain decimals", async () => {
    const { key: small } = await t.newAccountWithKey({ credit: 5 });
    const refused = await t
      .client(small)
      .chat.completions.create({ model: "gpt-6-astra", max_tokens: maxOf("gpt-6-astra"), messages: [{ role: "user", content: "x" }] })
      .catch((e) => e);
    expect(refused.error.code).toBe("insufficient_balance");
    const proposed = Number(/lower max_tokens to (\d+)/.exec(refused.message)![1]);
    expect(proposed).toBeLessThanOrEqual(maxOf("gpt-6-astra"));
    expect(refused.message).toContain("available balance is $5:");
    expect(refused.message).not.toMatch(/e\+|e-\d/);
  });
});
