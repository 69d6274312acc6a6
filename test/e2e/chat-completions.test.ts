import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, UPSTREAM_KEYS, type TestGateway } from "../helpers/gateway.ts";
import { computeUsage } from "../fake-upstream/openai.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { readChatUsage } from "../../src/formats/openai-chat/relay.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";

const catalog = loadCatalog("catalog.yaml");

/** The exact nano-USD cost the gateway must bill for a fake-upstream usage on a model. */
function expectedCost(model: string, usage: Parameters<typeof readChatUsage>[0]): number {
  const normalized = readChatUsage(usage)!;
  return priceUsage(normalized, catalog.pricesFor(catalog.get(model)!, normalized.inputTokens, new Date())).totalCost;
}

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.stop();
});

async function balanceOf(accountId: string): Promise<number> {
  const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
  return usdToNano(String(body.data.balance));
}

async function requestLog(accountId: string): Promise<any[]> {
  const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=500`);
  return body.data;
}

describe("GET /v1/models", () => {
  it("lists all 40 catalog models in the common list shape", async () => {
    const { key } = await t.newAccountWithKey();
    const page = await t.client(key).models.list();
    expect(page.data.length).toBe(40);
    const model = page.data.find((entry) => entry.id === "gpt-6.2-sol") as any;
    expect(model).toMatchObject({ object: "model", owned_by: "openai", context_length: 1_050_000 });
    expect(model.pricing).toEqual({ prompt: "0.000002", completion: "0.00001", input_cache_read: "0.0000001", input_cache_write: "0.0000025" });
    expect(model.architecture.input_modalities).toContain("text");
    expect(model.supported_parameters).toContain("tools");
  });

  it("lists only the allowlisted models for a restricted key", async () => {
    const { key } = await t.newAccountWithKey({ key: { models: ["gpt-6-luna", "deepseek-flash"] } });
    const page = await t.client(key).models.list();
    expect(page.data.map((entry) => entry.id).sort()).toEqual(["deepseek-flash", "gpt-6-luna"]);
  });

  it("refuses a missing key with 401 authentication_error", async () => {
    const response = await fetch(`${t.url}/v1/models`);
    expect(response.status).toBe(401);
    expect(((await response.json()) as any).error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
  });
});

describe("POST /v1/chat/completions, non-streaming", () => {
  it("answers through the OpenAI SDK with both headers and bills the exact cost", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const request = { model: "gpt-6.2-sol", messages: [{ role: "user" as const, content: "Say hello to the gateway." }] };
    const { data, response } = await t.client(key).chat.completions.create(request).withResponse();
    expect(data.choices[0]!.message.content).toBe("Hello from gpt-6.2-sol.");
    expect(data.model).toBe("gpt-6.2-sol");

    const usage = computeUsage(request);
    expect(data.usage!.prompt_tokens).toBe(usage.prompt_tokens);
    const cost = expectedCost("gpt-6.2-sol", usage);
    expect(cost).toBe(usage.prompt_tokens * 2000 + usage.completion_tokens * 10_000);
    expect(response.headers.get("x-gateway-request-id")).toMatch(/^gen-[0-9a-f]{32}$/);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);

    const [row] = await requestLog(accountId);
    expect(row).toMatchObject({ id: response.headers.get("x-gateway-request-id"), model: "gpt-6.2-sol", status: "success", cost: nanoToUsd(cost) });
  });

  it("prices cache reads, cache writes and reasoning at their own prices", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const directive = { usage: { prompt_tokens: 1000, completion_tokens: 500, cached_tokens: 200, cache_write_tokens: 100, reasoning_tokens: 50 } };
    const { response } = await t
      .client(key)
      .chat.completions.create({ model: "gpt-6.2-sol", messages: [{ role: "user", content: `[[fake ${JSON.stringify(directive)}]]` }] })
      .withResponse();
    // gpt-6.2-sol: input $2, output $10, cache read $0.10, cache write $2.50 per million tokens.
    const expected = 700 * 2000 + 200 * 100 + 100 * 2500 + 500 * 10_000;
    expect(expected).toBe(6_670_000);
    expect(response.headers.get("x-gateway-cost")).toBe("0.00667");
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - expected);
  });

  it("sends the provider's own key upstream and never the client's", async () => {
    const { key } = await t.newAccountWithKey();
    t.fake.reset();
    await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] });
    await t.client(key).chat.completions.create({ model: "deepseek-flash", messages: [{ role: "user", content: "hi" }] });
    const [openai, deepseek] = t.fake.requests;
    expect(openai!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEYS.openai}`);
    expect(deepseek!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEYS.deepseek}`);
    for (const recorded of t.fake.requests) expect(JSON.stringify(recorded)).not.toContain(key);
  });

  it("bills an OpenAI-compatible family at its own prices", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const request = { model: "grok-4.3", messages: [{ role: "user" as const, content: "hello xai" }] };
    const { response } = await t.client(key).chat.completions.create(request).withResponse();
    const usage = computeUsage(request);
    const cost = usage.prompt_tokens * 1250 + usage.completion_tokens * 2500;
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
  });
});

describe("POST /v1/chat/completions, streaming", () => {
  it("relays the stream, strips the usage chunk the client did not ask for, and bills it", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const request = { model: "gpt-6-luna", messages: [{ role: "user" as const, content: "stream please" }] };
    const { data: stream, response } = await t.client(key).chat.completions.create({ ...request, stream: true }).withResponse();
    let text = "";
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe("Hello from gpt-6-luna.");
    expect(chunks.every((chunk) => chunk.choices.length > 0)).toBe(true);
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
    expect(response.headers.get("x-gateway-request-id")).toMatch(/^gen-/);
    expect(response.headers.get("x-gateway-cost")).toBeNull();
    expect((t.fake.requests[0]!.body as any).stream_options).toEqual({ include_usage: true });

    const cost = expectedCost("gpt-6-luna", computeUsage(request));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
    const [row] = await requestLog(accountId);
    expect(row).toMatchObject({ id: response.headers.get("x-gateway-request-id"), status: "success", cost: nanoToUsd(cost) });
  });

  it("hands each chunk to the client as the upstream sends it, not at the end of the stream", async () => {
    const { key } = await t.newAccountWithKey();
    const gapMs = 150;
    const directive = { text: "one two three four", chunk_delay_ms: gapMs };
    const request = { model: "gpt-6-luna", messages: [{ role: "user" as const, content: `slow [[fake ${JSON.stringify(directive)}]]` }] };
    const started = performance.now();
    const arrivals: { text: string; at: number }[] = [];
    for await (const chunk of await t.client(key).chat.completions.create({ ...request, stream: true })) {
      const text = chunk.choices[0]?.delta.content;
      if (text) arrivals.push({ text, at: performance.now() - started });
    }
    expect(arrivals.map((a) => a.text).join("")).toBe("one two three four");
    // Each word is one upstream event, `gapMs` after the one before: the client sees them spread out the same way.
    for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]!.at - arrivals[i - 1]!.at).toBeGreaterThan(gapMs * 0.5);
  });

  it("answers a stream the upstream has already sent whole as one body, and streams one still in flight", async () => {
    const { key } = await t.newAccountWithKey();
    const post = (content: string) =>
      fetch(`${t.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-6-luna", stream: true, messages: [{ role: "user", content }] }),
      });
    const whole = await post("short answer");
    const wholeText = await whole.text();
    expect(whole.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(Number(whole.headers.get("content-length"))).toBe(Buffer.byteLength(wholeText));
    expect(whole.headers.get("transfer-encoding")).toBeNull();
    const frames = wholeText.split("\n\n").filter(Boolean);
    expect(frames.at(-1)).toBe("data: [DONE]");
    const id = whole.headers.get("x-gateway-request-id");
    for (const frame of frames.slice(0, -1)) expect(JSON.parse(frame.slice("data: ".length)).id).toBe(id);

    const slow = await post(`slow [[fake ${JSON.stringify({ text: "one two", chunk_delay_ms: 30 })}]]`);
    expect(slow.headers.get("content-length")).toBeNull();
    expect(slow.headers.get("transfer-encoding")).toBe("chunked");
    expect((await slow.text()).endsWith("data: [DONE]\n\n")).toBe(true);
  });

  it("an upstream that drops the connection right after its first chunks: the client gets them and an error frame, billed for them", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-6-luna", stream: true, messages: [{ role: "user", content: `cut [[fake ${JSON.stringify({ text: "one two three four", drop_after_chunks: 3 })}]]` }] }),
    });
    expect(response.status).toBe(200);
    const frames = (await response.text()).split("\n\n").filter(Boolean).map((frame) => JSON.parse(frame.slice("data: ".length)));
    const delivered = frames.map((frame) => frame.choices?.[0]?.delta?.content ?? "").join("");
    expect(delivered).toBe("one two");
    expect(frames.at(-1).error).toMatchObject({ code: "upstream_error" });
    const [row] = await requestLog(accountId);
    expect(row).toMatchObject({ id: response.headers.get("x-gateway-request-id"), status: "failed" });
    // Billed for the prompt and the two words it got ("one", " two": 2 o200k tokens), as a stream cut short is.
    expect(row.completion_tokens).toBe(2);
    expect(row.cost).toBeGreaterThan(0);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - usdToNano(String(row.cost)));
  });

  it("passes the usage chunk through when the client asked for it", async () => {
    const { key } = await t.newAccountWithKey();
    const request = { model: "gpt-6-luna", messages: [{ role: "user" as const, content: "with usage" }] };
    const stream = await t.client(key).chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
    expect(usage!.prompt_tokens).toBe(computeUsage(request).prompt_tokens);
  });

  it("streams tool calls with their arguments intact", async () => {
    const { key } = await t.newAccountWithKey();
    const directive = { tool_calls: [{ name: "get_weather", arguments: { city: "Paris", unit: "celsius" } }] };
    const runner = t.client(key).chat.completions.stream({
      model: "gpt-6-luna",
      messages: [{ role: "user", content: `weather? [[fake ${JSON.stringify(directive)}]]` }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
    });
    const completion = await runner.finalChatCompletion();
    const call = completion.choices[0]!.message.tool_calls![0] as any;
    expect(call.function.name).toBe("get_weather");
    expect(JSON.parse(call.function.arguments)).toEqual({ city: "Paris", unit: "celsius" });
    expect(completion.choices[0]!.finish_reason).toBe("tool_calls");
  });
});

describe("bad input is refused with a clear error, no upstream call, no charge and no record", () => {
  const cases: [string, (key: string) => Promise<Response>, number, string][] = [
    ["malformed JSON", (key) => post(key, "{not json"), 400, "invalid_request"],
    ["a body that is not an object", (key) => post(key, "[1,2]"), 400, "invalid_request"],
    ["missing model", (key) => post(key, { messages: [{ role: "user", content: "x" }] }), 400, "invalid_request"],
    ["mistyped messages", (key) => post(key, { model: "gpt-6-luna", messages: "hello" }), 400, "invalid_request"],
    ["an unknown role", (key) => post(key, { model: "gpt-6-luna", messages: [{ role: "wizard", content: "x" }] }), 400, "invalid_request"],
    ["an unknown model", (key) => post(key, { model: "gpt-9", messages: [{ role: "user", content: "x" }] }), 400, "model_not_found"],
    ["a case-changed model id", (key) => post(key, { model: "GPT-6-Luna", messages: [{ role: "user", content: "x" }] }), 400, "model_not_found"],
    ["a provider-prefixed model id", (key) => post(key, { model: "openai/gpt-6-luna", messages: [{ role: "user", content: "x" }] }), 400, "model_not_found"],
    ["the image model", (key) => post(key, { model: "gpt-image-2.6-sunburst", messages: [{ role: "user", content: "x" }] }), 400, "invalid_request"],
    // Every walk of the body (token count, translation, serializing upstream) would overflow the stack.
    ["a tool schema nested 200,000 levels deep", (key) => post(key, `{"model":"gpt-6-luna","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":${"[".repeat(200_000)}${"]".repeat(200_000)}}}}]}`), 400, "invalid_request"],
    ["a 51 MB body", (key) => post(key, JSON.stringify({ model: "gpt-6-luna", messages: [{ role: "user", content: "x".repeat(51 * 1024 * 1024) }] })), 413, "payload_too_large"],
  ];

  function post(key: string, body: unknown): Promise<Response> {
    return fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  }

  for (const [name, send, status, code] of cases) {
    it(`${name}: ${status} ${code}`, async () => {
      const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
      t.fake.reset();
      const response = await send(key);
      expect(response.status).toBe(status);
      const body = (await response.json()) as any;
      expect(body.error.code).toBe(code);
      expect(typeof body.error.message).toBe("string");
      expect(body.error.type).toBe("invalid_request_error");
      expect(t.fake.requests.length).toBe(0);
      expect(await balanceOf(accountId)).toBe(usdToNano(10));
      expect(await requestLog(accountId)).toEqual([]);
    });
  }

  it("the SDK surfaces an unknown model as a BadRequestError naming the model", async () => {
    const { key } = await t.newAccountWithKey();
    const error = await t
      .client(key)
      .chat.completions.create({ model: "openai/gpt-6-luna", messages: [{ role: "user", content: "x" }] })
      .catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.message).toContain("openai/gpt-6-luna");
  });
});

describe("upstream failures", () => {
  it("an upstream 500 reaches the client as 502, costs nothing and is recorded as failed", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const error = await t
      .client(key)
      .chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: '[[fake {"status":500,"error":"boom"}]]' }] })
      .catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error.status).toBe(502);
    expect(await balanceOf(accountId)).toBe(usdToNano(10));
    const [row] = await requestLog(accountId);
    expect(row).toMatchObject({ status: "failed", cost: 0 });
  });

  it("a model whose provider has no key answers 503 naming the variable to set", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const error = await t
      .client(key)
      .chat.completions.create({ model: "mistral-large-2512", messages: [{ role: "user", content: "x" }] })
      .catch((e) => e);
    expect(error.status).toBe(503);
    expect(error.message).toContain("MISTRAL_API_KEY");
    expect(await balanceOf(accountId)).toBe(usdToNano(10));
  });
});
