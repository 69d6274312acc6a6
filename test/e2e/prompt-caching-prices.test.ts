import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { countPromptTokens, loadTokenizer, toolPromptOverhead } from "../../src/plugins/token-count/count.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";

/**
 * Every cache write priced by its lifetime (issue 31), through the official SDKs against the fake Anthropic upstream
 * scripted to report cache writes (`usage.cache_creation`, https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
 * 5-minute writes at the catalog's cache_write, 1-hour writes at cache_write_1h, in chat, Messages and Responses
 * ingress, streamed and not; the generation record's lifetimes and cache discount; /v1/usage sums; the hold.
 */

const MODEL = "claude-sonnet-5-5";
const catalog = loadCatalog("catalog.yaml");
const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;

/** Nano-USD per token from catalog.yaml. */
function prices() {
  return catalog.pricesFor(catalog.get(MODEL)!, 1);
}

/** What the fake reports: 300 uncached, 5000 read, 400 written for 5 minutes and 600 for 1 hour, 200 out. */
const SPLIT = { ephemeral_5m_input_tokens: 400, ephemeral_1h_input_tokens: 600 };
const USAGE = { input_tokens: 300, cache_read_input_tokens: 5_000, cache_creation: SPLIT, output_tokens: 200 };

/** The exact nano-USD of USAGE, part by part, from the catalog's prices. */
function expectedCost() {
  const p = prices();
  const input = 300 * p.input;
  const cacheRead = 5_000 * p.cacheRead;
  const cacheWrite = 400 * p.cacheWrite + 600 * p.cacheWrite1h;
  const output = 200 * p.output;
  const discount = 5_000 * (p.input - p.cacheRead) - 400 * (p.cacheWrite - p.input) - 600 * (p.cacheWrite1h - p.input);
  return { input, cacheRead, cacheWrite, output, total: input + cacheRead + cacheWrite + output, discount };
}

let fake: FakeUpstream;
let t: TestGateway;
beforeAll(async () => {
  fake = await startFakeUpstream();
  t = await startTestGateway({ fake, env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "sk-ant-upstream" } });
  await loadTokenizer();
});
afterAll(async () => {
  await t.stop();
  await fake.stop();
});

const anthropic = (key: string) => new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0 });

/** The generation record as /v1/generation answers it, with every number also as its exact JSON source. */
async function generation(key: string, requestId: string): Promise<{ data: any; exact: any }> {
  const response = await fetch(`${t.url}/v1/generation?id=${requestId}`, { headers: { authorization: `Bearer ${key}` } });
  expect(response.status).toBe(200);
  const text = await response.text();
  const reviver = (_key: string, value: unknown, context?: { source?: string }) => (typeof value === "number" ? context!.source : value);
  return { data: JSON.parse(text).data, exact: (JSON.parse as any)(text, reviver).data };
}

/** A decimal JSON number's source text as exact nano-USD (the view's numbers are exact decimals of nano-USD). */
const nanoOf = (source: string) => usdToNano(source);

/** Checks one request's record: lifetimes, every cost part and the discount, to the nano-USD. */
async function expectBilledByLifetime(key: string, requestId: string, streamed: boolean) {
  const { data, exact } = await generation(key, requestId);
  const cost = expectedCost();
  expect(data).toMatchObject({ gateway_request_id: requestId, model: MODEL, status: "success", streamed });
  expect(data.usage).toMatchObject({
    prompt_tokens: 300 + 5_000 + 1_000,
    completion_tokens: 200,
    cached_tokens: 5_000,
    cache_write_tokens: 1_000,
    cache_write_tokens_details: { ephemeral_5m: 400, ephemeral_1h: 600 },
  });
  expect(nanoOf(exact.total_cost)).toBe(cost.total);
  expect(nanoOf(exact.cost_breakdown.cache_write)).toBe(cost.cacheWrite);
  expect(nanoOf(exact.cost_breakdown.cache_read)).toBe(cost.cacheRead);
  expect(nanoOf(exact.cost_breakdown.input)).toBe(cost.input + cost.cacheRead + cost.cacheWrite);
  expect(nanoOf(exact.cost_breakdown.output)).toBe(cost.output);
  expect(nanoOf(exact.cache_discount)).toBe(cost.discount);
  expect(nanoOf(exact.unbilled_cost)).toBe(0);
}

describe("catalog prices", () => {
  it("prices a 1-hour write at 2x input and a 5-minute one at 1.25x for Claude, and lists the 1-hour price", async () => {
    const p = prices();
    expect(p.cacheWrite1h).toBe(2 * p.input);
    expect(p.cacheWrite * 4).toBe(5 * p.input);
    const { key } = await t.newAccountWithKey();
    const model = await t.client(key).models.retrieve(MODEL);
    expect((model as any).pricing).toMatchObject({ input_cache_write: nanoToUsd(p.cacheWrite).toString(), input_cache_write_1h: nanoToUsd(p.cacheWrite1h).toString() });
    expect((await t.client(key).models.retrieve("gpt-6.2-sol") as any).pricing).not.toHaveProperty("input_cache_write_1h");
  });
});

describe("each cache lifetime billed at its own price", () => {
  let key: string;
  let accountId: string;
  const requestIds: string[] = [];
  beforeAll(async () => {
    ({ key, accountId } = await t.newAccountWithKey({ credit: 10 }));
  });

  it("chat completions (translated), not streamed: the client sees the split, the record bills it", async () => {
    const { data, response } = await t
      .client(key)
      .chat.completions.create({ model: MODEL, max_tokens: 300, messages: [{ role: "user", content: `chat ${directive({ usage: USAGE })}` }] })
      .withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;
    requestIds.push(requestId);
    expect((data.usage as any).prompt_tokens_details).toEqual({ cached_tokens: 5_000, cache_write_tokens: 1_000, cache_creation: SPLIT });
    expect(usdToNano(response.headers.get("x-gateway-cost")!)).toBe(expectedCost().total);
    await expectBilledByLifetime(key, requestId, false);
  });

  it("chat completions (translated), streamed with the usage chunk", async () => {
    const { data: stream, response } = await t
      .client(key)
      .chat.completions.create({ model: MODEL, max_tokens: 300, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: `chat stream ${directive({ usage: USAGE })}` }] })
      .withResponse();
    let usage: any;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
    expect(usage.prompt_tokens_details).toEqual({ cached_tokens: 5_000, cache_write_tokens: 1_000, cache_creation: SPLIT });
    const requestId = response.headers.get("x-gateway-request-id")!;
    requestIds.push(requestId);
    await expectBilledByLifetime(key, requestId, true);
  });

  it("Messages (relayed), not streamed: Anthropic's cache_creation reaches the client as sent", async () => {
    const { data, response } = await anthropic(key)
      .messages.create({ model: MODEL, max_tokens: 300, messages: [{ role: "user", content: `messages ${directive({ usage: USAGE })}` }] })
      .withResponse();
    expect((data.usage as any).cache_creation).toEqual(SPLIT);
    const requestId = response.headers.get("x-gateway-request-id")!;
    requestIds.push(requestId);
    await expectBilledByLifetime(key, requestId, false);
  });

  it("Messages (relayed), streamed: the split from message_start survives message_delta, or comes in message_delta only", async () => {
    for (const scripted of [{ usage: USAGE }, { usage: USAGE, usage_in_delta_only: true }]) {
      const { data: stream, response } = await anthropic(key)
        .messages.create({ model: MODEL, max_tokens: 300, stream: true, messages: [{ role: "user", content: `messages stream ${directive(scripted)}` }] })
        .withResponse();
      for await (const _event of stream);
      const requestId = response.headers.get("x-gateway-request-id")!;
      requestIds.push(requestId);
      await expectBilledByLifetime(key, requestId, true);
    }
  });

  it("Responses (translated), not streamed and streamed: input_tokens_details carries the split", async () => {
    const { data, response } = await t.client(key).responses.create({ model: MODEL, max_output_tokens: 300, input: `responses ${directive({ usage: USAGE })}` }).withResponse();
    expect((data.usage as any).input_tokens_details).toEqual({ cached_tokens: 5_000, cache_write_tokens: 1_000, cache_creation: SPLIT });
    requestIds.push(response.headers.get("x-gateway-request-id")!);
    await expectBilledByLifetime(key, requestIds.at(-1)!, false);

    const { data: stream, response: streamed } = await t
      .client(key)
      .responses.create({ model: MODEL, max_output_tokens: 300, stream: true, input: `responses stream ${directive({ usage: USAGE, usage_in_delta_only: true })}` })
      .withResponse();
    let completed: any;
    for await (const event of stream) if (event.type === "response.completed") completed = event.response;
    expect(completed.usage.input_tokens_details.cache_creation).toEqual(SPLIT);
    requestIds.push(streamed.headers.get("x-gateway-request-id")!);
    await expectBilledByLifetime(key, requestIds.at(-1)!, true);
  });

  it("a write with no lifetime split is a 5-minute write; the same tokens written for 1 hour cost cache_write_1h", async () => {
    const p = prices();
    const costs: number[] = [];
    for (const usage of [
      { input_tokens: 100, cache_creation_input_tokens: 2_000, output_tokens: 10 },
      { input_tokens: 100, cache_creation: { ephemeral_5m_input_tokens: 2_000, ephemeral_1h_input_tokens: 0 }, output_tokens: 10 },
      { input_tokens: 100, cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 2_000 }, output_tokens: 10 },
    ]) {
      const { response } = await t.client(key).chat.completions.create({ model: MODEL, max_tokens: 50, messages: [{ role: "user", content: `one lifetime ${directive({ usage })}` }] }).withResponse();
      const requestId = response.headers.get("x-gateway-request-id")!;
      requestIds.push(requestId);
      const { data, exact } = await generation(key, requestId);
      expect(nanoOf(exact.cost_breakdown.cache_write)).toBe(2_000 * (usage.cache_creation?.ephemeral_1h_input_tokens ? p.cacheWrite1h : p.cacheWrite));
      expect(data.usage.cache_write_tokens_details.ephemeral_1h).toBe(usage.cache_creation?.ephemeral_1h_input_tokens ?? 0);
      costs.push(nanoOf(exact.total_cost));
      // Written, never read: the discount is the writes' premium over input, negative.
      expect(nanoOf(exact.cache_discount)).toBe(-2_000 * ((usage.cache_creation?.ephemeral_1h_input_tokens ? p.cacheWrite1h : p.cacheWrite) - p.input));
    }
    expect(costs[0]).toBe(costs[1]!);
    expect(costs[2]! - costs[1]!).toBe(2_000 * (p.cacheWrite1h - p.cacheWrite));
  });

  it("/v1/usage totals equal the sum of the generations (cache writes of both lifetimes counted once)", async () => {
    expect(requestIds.length).toBe(10);
    let cost = 0;
    let cacheWrites = 0;
    let prompt = 0;
    for (const id of requestIds) {
      const { data, exact } = await generation(key, id);
      cost += nanoOf(exact.total_cost);
      cacheWrites += data.usage.cache_write_tokens;
      prompt += data.usage.prompt_tokens;
    }
    const today = new Date().toISOString().slice(0, 10);
    const response = await fetch(`${t.url}/v1/usage?start_date=${today}&end_date=${today}`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status).toBe(200);
    const text = await response.text();
    const total = ((JSON.parse as any)(text, (_k: string, v: unknown, c?: { source?: string }) => (typeof v === "number" ? c!.source : v))).data.total;
    expect(nanoOf(total.cost)).toBe(cost);
    expect(Number(total.cache_write_tokens)).toBe(cacheWrites);
    expect(Number(total.prompt_tokens)).toBe(prompt);
    expect(Number(total.requests)).toBe(requestIds.length);
    const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
    expect(usdToNano(String(body.data.balance))).toBe(usdToNano(10) - cost);
  });
});

describe("the hold covers a 1-hour write", () => {
  /**
   * A chat request whose prompt bound the fake reports as written to the cache for 1 hour, with max_tokens of
   * output: its real cost is exactly the worst case priced at cache_write_1h. The directive is part of the prompt it
   * describes, so iterate to the fixed point.
   */
  function wholePromptWrittenForAnHour(maxTokens: number) {
    const model = catalog.get(MODEL)!;
    let bound = 0;
    for (let attempt = 0; attempt < 20; attempt++) {
      const usage = { input_tokens: 0, cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: bound }, output_tokens: maxTokens };
      const body = { model: MODEL, max_tokens: maxTokens, messages: [{ role: "user", content: `an hour ${directive({ usage })}` }] };
      const next = countPromptTokens(body, false, { contextLength: model.context_length }) + toolPromptOverhead(body);
      if (next === bound) {
        const p = catalog.pricesFor(model, bound);
        return { body, worst1h: bound * p.cacheWrite1h + maxTokens * p.output, worst5m: bound * p.cacheWrite + maxTokens * p.output };
      }
      bound = next;
    }
    throw new Error("prompt bound did not converge");
  }

  it("refuses a key budget one nano-USD below the 1-hour worst case (the 5-minute one would have fit)", async () => {
    const { body, worst1h, worst5m } = wholePromptWrittenForAnHour(100);
    expect(worst5m).toBeLessThan(worst1h - 1);
    const { key } = await t.newAccountWithKey({ credit: 5, key: { limit: nanoToUsd(worst1h - 1) } });
    fake.reset();
    const refused = await t.client(key).chat.completions.create(body as any).then(() => null, (error) => error as InstanceType<typeof OpenAI.APIError>);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(refused!.code).toBe("key_budget_exceeded");
    expect(fake.requests).toHaveLength(0);
  });

  it("holds the 1-hour worst case and charges a prompt written wholly for 1 hour in full, nothing unbilled", async () => {
    const { body, worst1h } = wholePromptWrittenForAnHour(100);
    const { key } = await t.newAccountWithKey({ credit: 5, key: { limit: nanoToUsd(worst1h) } });
    const { response } = await t.client(key).chat.completions.create(body as any).withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;
    const { exact } = await generation(key, requestId);
    expect(nanoOf(exact.total_cost)).toBe(worst1h);
    expect(nanoOf(exact.unbilled_cost)).toBe(0);
    const keyInfo = await fetch(`${t.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as Promise<any>);
    expect(usdToNano(String(keyInfo.data.usage))).toBe(worst1h);
  });

  it("sizes a cap bound by the funds with the 1-hour price", async () => {
    const model = catalog.get(MODEL)!;
    const messages = [{ role: "user" as const, content: "how much output do I get" }];
    const body = { model: MODEL, messages };
    const bound = countPromptTokens(body, false, { contextLength: model.context_length }) + toolPromptOverhead(body);
    const p = catalog.pricesFor(model, bound);
    const { key } = await t.newAccountWithKey({ credit: 5, key: { limit: 0.01 } });
    fake.reset();
    await t.client(key).chat.completions.create(body);
    expect((fake.requests[0]!.body as any).max_tokens).toBe(Math.floor((usdToNano(0.01) - bound * p.cacheWrite1h) / p.output));
  });
});
