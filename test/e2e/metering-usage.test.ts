import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { catalog } from "../helpers/budget.ts";
import { countPromptTokens, countTextTokens, loadTokenizer } from "../../src/plugins/token-count/count.ts";
import { usdToNano } from "../../src/core/money.ts";

/**
 * Issue 24, defect 3 (billing side): an answer whose upstream reported no usage (absent, `usage: null`,
 * a stream without its usage chunk) is billed from the counted prompt and text and marked
 * `usage_estimated`, never served free; usage out of range (negative, fractional, 1e15, 1e308, negative
 * cached tokens) is clamped to sane integers; every request gets its record, status success.
 */

const MODEL = "gpt-6-luna"; // $0.10 in, $0.01 cache read, $0.50 out per million; o200k counted exactly
const prices = catalog.pricesFor(catalog.get(MODEL)!, 0, new Date());

let t: TestGateway;
let key: string;
let client: OpenAI;
beforeAll(async () => {
  t = await startTestGateway();
  ({ key } = await t.newAccountWithKey({ credit: 20 }));
  client = t.client(key);
  await loadTokenizer();
});
afterAll(async () => {
  await t.stop();
});

async function generation(requestId: string): Promise<any> {
  const response = await fetch(`${t.url}/v1/generation?id=${requestId}`, { headers: { authorization: `Bearer ${key}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as any).data;
}

const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;

/** What metering counts for a chat body answered with `text`: the o200k prompt and text. */
function counted(body: Record<string, unknown>, text: string) {
  const prompt = countPromptTokens(body, true);
  const completion = countTextTokens(text, true);
  return { prompt, completion, cost: prompt * prices.input + completion * prices.output };
}

async function nonStreamed(body: Record<string, unknown>) {
  const { data, response } = await client.chat.completions.create(body as any).withResponse();
  return { text: data.choices[0]!.message.content ?? "", requestId: response.headers.get("x-gateway-request-id")!, cost: response.headers.get("x-gateway-cost") };
}

async function streamed(body: Record<string, unknown>) {
  const { data, response } = await client.chat.completions.create({ ...(body as any), stream: true, stream_options: { include_usage: true } }).withResponse();
  let text = "";
  for await (const chunk of data as any) text += chunk.choices?.[0]?.delta?.content ?? "";
  return { text, requestId: response.headers.get("x-gateway-request-id")! };
}

describe("no usage reported: billed from the counted text, marked usage_estimated", () => {
  for (const [name, d] of [
    ["no usage key", { no_usage: true }],
    ["usage: null", { usage_null: true }],
  ] as const) {
    it(`a non-streamed answer with ${name}`, async () => {
      const body = { model: MODEL, messages: [{ role: "user", content: `estimate me ${name} ${directive({ ...d, text: "one two three four five" })}` }] };
      const { text, requestId, cost } = await nonStreamed(body);
      expect(text).toBe("one two three four five");
      const expected = counted(body, text);
      const record = await generation(requestId);
      expect(record.status).toBe("success");
      expect(record.usage_estimated).toBe(true);
      expect(record.usage.prompt_tokens).toBe(expected.prompt);
      expect(record.usage.completion_tokens).toBe(expected.completion);
      expect(usdToNano(record.total_cost)).toBe(expected.cost);
      expect(expected.cost).toBeGreaterThan(0);
      expect(usdToNano(cost!)).toBe(expected.cost); // the cost header says the same
    });

    it(`a stream with ${name}`, async () => {
      const body = { model: MODEL, messages: [{ role: "user", content: `estimate my stream ${name} ${directive({ ...d, text: "alpha beta gamma" })}` }] };
      const { text, requestId } = await streamed(body);
      expect(text).toBe("alpha beta gamma");
      const expected = counted({ ...body, stream: true, stream_options: { include_usage: true } }, text);
      const record = await generation(requestId);
      expect(record.status).toBe("success");
      expect(record.usage_estimated).toBe(true);
      expect(record.usage.completion_tokens).toBe(expected.completion);
      expect(record.usage.prompt_tokens).toBe(expected.prompt);
      expect(usdToNano(record.total_cost)).toBe(expected.cost);
    });
  }

  it("a Responses answer without usage", async () => {
    const { data, response } = await client.responses.create({ model: MODEL, input: `responses estimate ${directive({ no_usage: true })}` }).withResponse();
    const record = await generation(response.headers.get("x-gateway-request-id")!);
    expect(record.status).toBe("success");
    expect(record.usage_estimated).toBe(true);
    expect(record.usage.completion_tokens).toBe(countTextTokens(data.output_text, true));
    expect(record.usage.prompt_tokens).toBeGreaterThan(0);
    expect(record.total_cost).toBeGreaterThan(0);
  });

  it("reported usage is not marked estimated", async () => {
    const { requestId } = await nonStreamed({ model: MODEL, messages: [{ role: "user", content: "honest" }] });
    expect((await generation(requestId)).usage_estimated).toBe(false);
  });
});

describe("usage out of range: clamped, or billed from the counted text, and the request recorded as a success", () => {
  it("fractional counts round down and cached tokens stay within the prompt: a negative cached count no longer bills 21x", async () => {
    const usage = { prompt_tokens: 100.9, completion_tokens: 5.5, cached_tokens: -2000 };
    const { requestId } = await nonStreamed({ model: MODEL, messages: [{ role: "user", content: `odd ${directive({ usage })}` }] });
    const record = await generation(requestId);
    expect(record.status).toBe("success");
    expect(record.usage_estimated).toBe(false);
    expect(record.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 5, cached_tokens: 0 });
    expect(usdToNano(record.total_cost)).toBe(100 * prices.input + 5 * prices.output);

    const cachedAboveInput = await nonStreamed({ model: MODEL, messages: [{ role: "user", content: `cached ${directive({ usage: { prompt_tokens: 10, completion_tokens: 1, cached_tokens: 50 } })}` }] });
    const capped = await generation(cachedAboveInput.requestId);
    expect(capped.usage.cached_tokens).toBe(10);
    expect(usdToNano(capped.total_cost)).toBe(10 * prices.cacheRead + 1 * prices.output);
  });

  for (const [name, usage] of [
    ["negative counts", { prompt_tokens: -5, completion_tokens: -7 }],
    ["1e15 completion tokens", { prompt_tokens: 20, completion_tokens: 1e15 }],
    ["1e308 prompt and completion tokens", { prompt_tokens: 1e308, completion_tokens: 1e308 }],
  ] as const) {
    it(`${name}: no usable report, billed from the counted text within the hold (streamed and not)`, async () => {
      for (const stream of [false, true]) {
        const body = { model: MODEL, max_tokens: 40, messages: [{ role: "user", content: `${name} ${stream} ${directive({ usage, text: "six words of answer text here" })}` }] };
        const sent = stream ? await streamed(body) : await nonStreamed(body);
        expect(sent.text).toBe("six words of answer text here");
        const record = await generation(sent.requestId);
        expect(record.status).toBe("success");
        expect(record.usage_estimated).toBe(true);
        const expected = counted(stream ? { ...body, stream: true, stream_options: { include_usage: true } } : body, sent.text);
        expect(record.usage).toMatchObject({ prompt_tokens: expected.prompt, completion_tokens: expected.completion, cached_tokens: 0 });
        expect(usdToNano(record.total_cost)).toBe(expected.cost);
        expect(record.unbilled_cost).toBe(0);
      }
    });
  }

  it("a count just inside the range is priced as reported: the debit stops at the hold plus what is free, the rest unbilled", async () => {
    // 10^9 output tokens at $0.50 per million ($500): believed (in range), so charged up to all the account has.
    const own = await t.newAccountWithKey({ credit: 5 });
    const body = { model: MODEL, max_tokens: 40, messages: [{ role: "user", content: `billion ${directive({ usage: { prompt_tokens: 20, completion_tokens: 1_000_000_000 } })}` }] };
    const { response } = await t.client(own.key).chat.completions.create(body as any).withResponse();
    const record = await fetch(`${t.url}/v1/generation?id=${response.headers.get("x-gateway-request-id")}`, { headers: { authorization: `Bearer ${own.key}` } })
      .then((r) => r.json() as any)
      .then((r) => r.data);
    expect(record.status).toBe("success");
    expect(record.usage.completion_tokens).toBe(1_000_000_000);
    expect(record.usage_estimated).toBe(false);
    expect(record.total_cost).toBe(5);
    expect(usdToNano(record.total_cost) + usdToNano(record.unbilled_cost)).toBe(20 * prices.input + 1_000_000_000 * prices.output);
    const { body: account } = await t.admin("GET", `/admin/v1/accounts/${own.accountId}`);
    expect(account.data.balance).toBe(0);
  });
});
