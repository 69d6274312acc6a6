import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { usdToNano } from "../../src/core/money.ts";
import type { Usage } from "../../src/core/canonical.ts";

/**
 * Shared provider conformance suite, through POST /v1/chat/completions with the official openai SDK and the fake
 * upstream behind the provider. Each provider declares what it claims (its catalog model's capabilities) and how
 * its fake upstream is told to report cache usage; nothing here names a provider.
 */
export interface ConformanceOptions {
  /** Provider plugin name (for the test names). */
  provider: string;
  /** Catalog model id served by that provider. */
  model: string;
  /** Usage the fake upstream is told to report (its wire's own keys, in a directive), with cache reads (and writes where the provider has them), plus the canonical usage it means. */
  cacheUsage: { usage: Record<string, number>; canonical: Usage };
  /** Extra gateway env (base URL / key of the provider); `{fake}` in a value is replaced by the fake's URL. */
  env?: Record<string, string>;
}

const catalog = loadCatalog("catalog.yaml");
const directive = (d: Record<string, unknown>) => `[[fake ${JSON.stringify(d)}]]`;

/** OpenAI-wire cache usage (the directive keys of test/fake-upstream/openai.ts): for every OpenAI-compatible provider. */
export const OPENAI_CACHE_USAGE: ConformanceOptions["cacheUsage"] = {
  usage: { prompt_tokens: 1000, cached_tokens: 400, cache_write_tokens: 100, completion_tokens: 50 },
  canonical: { inputTokens: 1000, cacheReadTokens: 400, cacheWriteTokens: 100, outputTokens: 50, reasoningTokens: 0 },
};

const TOOL: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] },
  },
};
const ARGS = { city: "Paris", days: 2 };
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

export function providerConformance(options: ConformanceOptions): void {
  const { provider, model } = options;
  const entry = catalog.get(model);
  const caps = (entry?.capabilities ?? {}) as Record<string, boolean | undefined>;

  describe(`provider conformance: ${provider} (${model})`, () => {
    let fake: FakeUpstream;
    let t: TestGateway;
    let client: OpenAI;
    let accountId: string;

    beforeAll(async () => {
      fake = await startFakeUpstream();
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(options.env ?? {})) env[k] = v.replace("{fake}", fake.url);
      t = await startTestGateway({ fake, env });
      const account = await t.newAccountWithKey({ credit: 10 });
      accountId = account.accountId;
      client = t.client(account.key);
    });
    afterAll(async () => {
      await t.stop();
      await fake.stop();
    });

    const balance = async () => usdToNano(String((await t.admin("GET", `/admin/v1/accounts/${accountId}`)).body.data.balance));
    const price = (usage: Usage) => priceUsage(usage, catalog.pricesFor(entry!, usage.inputTokens, new Date())).totalCost;

    it("is in the catalog", () => {
      expect(entry).toBeDefined();
    });

    it("answers text", async () => {
      const data = await client.chat.completions.create({ model, messages: [{ role: "user", content: `hi ${directive({ text: "plain answer" })}` }] });
      expect(data.choices[0]!.message.content).toBe("plain answer");
      expect(data.choices[0]!.finish_reason).toBe("stop");
      expect(data.usage!.prompt_tokens).toBeGreaterThan(0);
    });

    it("streams text with usage", async () => {
      const stream = await client.chat.completions.create({
        model,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: `hi ${directive({ text: "one two three four" })}` }],
      });
      let text = "";
      let finish: string | null | undefined;
      let usage: OpenAI.CompletionUsage | undefined | null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
        usage = chunk.usage ?? usage;
      }
      expect(text).toBe("one two three four");
      expect(finish).toBe("stop");
      expect(usage?.completion_tokens).toBeGreaterThan(0);
    });

    it("returns a tool call", async () => {
      const data = await client.chat.completions.create({
        model,
        tools: [TOOL],
        messages: [{ role: "user", content: `weather? ${directive({ tool_calls: [{ name: "get_weather", arguments: ARGS }] })}` }],
      });
      expect(data.choices[0]!.finish_reason).toBe("tool_calls");
      const call = data.choices[0]!.message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).toBe("get_weather");
      expect(JSON.parse(call.function.arguments)).toEqual(ARGS);
      expect(call.id).toBeTruthy();
    });

    it("streams a tool call", async () => {
      const stream = await client.chat.completions.create({
        model,
        stream: true,
        tools: [TOOL],
        messages: [{ role: "user", content: `weather? ${directive({ tool_calls: [{ name: "get_weather", arguments: ARGS }] })}` }],
      });
      let name = "";
      let args = "";
      let id = "";
      let finish: string | null | undefined;
      for await (const chunk of stream) {
        for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
          expect(tc.index).toBe(0);
          name += tc.function?.name ?? "";
          args += tc.function?.arguments ?? "";
          id ||= tc.id ?? "";
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(name).toBe("get_weather");
      expect(JSON.parse(args)).toEqual(ARGS);
      expect(id).toBeTruthy();
      expect(finish).toBe("tool_calls");
    });

    it("sends a tool result turn upstream and answers it", async () => {
      const first = await client.chat.completions.create({
        model,
        tools: [TOOL],
        messages: [
          {
            role: "user",
            content: `weather? ${directive({ tool_calls: [{ name: "get_weather", arguments: ARGS }], after_tool_result: { text: "It is sunny." } })}`,
          },
        ],
      });
      const message = first.choices[0]!.message;
      const call = message.tool_calls![0]!;
      fake.reset();
      const second = await client.chat.completions.create({
        model,
        tools: [TOOL],
        messages: [
          {
            role: "user",
            content: `weather? ${directive({ tool_calls: [{ name: "get_weather", arguments: ARGS }], after_tool_result: { text: "It is sunny." } })}`,
          },
          { role: "assistant", content: message.content ?? null, tool_calls: message.tool_calls },
          { role: "tool", tool_call_id: call.id, content: "sunny, 21C" },
        ],
      });
      expect(second.choices[0]!.finish_reason).toBe("stop");
      expect(second.choices[0]!.message.content).toBeTruthy();
      expect(second.choices[0]!.message.tool_calls ?? []).toEqual([]);
      const upstream = JSON.stringify(fake.requests.at(-1)!.body);
      expect(upstream).toContain("sunny, 21C");
      expect(upstream).toContain("get_weather");
    });

    it.skipIf(!caps.vision)("sends a data-URL image upstream", async () => {
      fake.reset();
      const data = await client.chat.completions.create({
        model,
        messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } }] }],
      });
      expect(data.choices[0]!.message.content).toBeTruthy();
      expect(JSON.stringify(fake.requests.at(-1)!.body)).toContain(PNG);
    });

    it.skipIf(!caps.json_output || caps.structured_outputs === false)("returns JSON for response_format json_schema", async () => {
      fake.reset();
      const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"], additionalProperties: false };
      const data = await client.chat.completions.create({
        model,
        messages: [{ role: "user", content: `JSON please ${directive({ text: '{"answer":"yes"}' })}` }],
        response_format: { type: "json_schema", json_schema: { name: "reply", schema, strict: true } },
      });
      expect(JSON.parse(data.choices[0]!.message.content!)).toEqual({ answer: "yes" });
      // The schema went upstream in the provider's own form.
      expect(JSON.stringify(fake.requests.at(-1)!.body)).toContain('"answer"');
    });

    it.skipIf(!caps.json_output || caps.structured_outputs !== false)("returns JSON for response_format json_object", async () => {
      const data = await client.chat.completions.create({
        model,
        messages: [{ role: "user", content: `JSON please ${directive({ text: '{"answer":"yes"}' })}` }],
        response_format: { type: "json_object" },
      });
      expect(JSON.parse(data.choices[0]!.message.content!)).toEqual({ answer: "yes" });
      expect(fake.requests.at(-1)!.body.response_format).toEqual({ type: "json_object" });
    });

    it("bills usage with cache tokens exactly", async () => {
      const { usage, canonical } = options.cacheUsage;
      const before = await balance();
      const { data, response } = await client.chat.completions
        .create({ model, messages: [{ role: "user", content: `cached ${directive({ usage })}` }] })
        .withResponse();
      expect(data.usage).toMatchObject({
        prompt_tokens: canonical.inputTokens,
        completion_tokens: canonical.outputTokens,
        prompt_tokens_details: { cached_tokens: canonical.cacheReadTokens },
      });
      const cost = price(canonical);
      expect(usdToNano(response.headers.get("x-gateway-cost")!)).toBe(cost);
      expect(await balance()).toBe(before - cost);
    });

    it("passes upstream errors on (400 as 400, 429 with retry-after, 500 as 502) and charges nothing", async () => {
      const before = await balance();
      const send = (d: Record<string, unknown>) =>
        client.chat.completions.create({ model, messages: [{ role: "user", content: directive(d) }] }).catch((error) => error);
      const bad = await send({ status: 400, error: "conformance bad request" });
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("conformance bad request");
      const limited = await send({ status: 429, headers: { "retry-after": "7" } });
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited.headers.get("retry-after")).toBe("7");
      const down = await send({ status: 500 });
      expect(down).toBeInstanceOf(OpenAI.APIError);
      expect(down.status).toBe(502);
      expect(await balance()).toBe(before);
    });
  });
}
