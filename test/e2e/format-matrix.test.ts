import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { usdToNano } from "../../src/core/money.ts";

/**
 * Every client format (chat, messages, responses) x one model of every family, through the official SDKs:
 * text, streamed text, exact cost (x-gateway-cost; GET /v1/generation for streams) and a tool-call turn.
 */

const catalog = loadCatalog("catalog.yaml");

const FAMILIES: { family: string; model: string }[] = [
  { family: "openai", model: "gpt-6-luna" },
  { family: "anthropic", model: "claude-haiku-4-5" },
  { family: "google", model: "gemini-2.5-flash-lite" },
  { family: "deepseek", model: "deepseek-flash" },
  { family: "xai", model: "grok-4.3" },
  { family: "mistral", model: "mistral-small-2603" },
  { family: "qwen", model: "qwen3.7-plus" },
  { family: "moonshot", model: "kimi-k3" },
  { family: "zai", model: "glm-5.3" },
  { family: "meta", model: "llama-4-scout-17b-16e-instruct" },
];
/** The upstream path each family must reach (checks the routing, not only the answer). */
const UPSTREAM_PATH: Record<string, RegExp> = {
  anthropic: /^\/v1\/messages/,
  google: /^\/v1beta\/models\/gemini-2\.5-flash-lite:generateContent/,
};
const TOOL_FAMILIES = new Set(["openai", "anthropic", "google", "deepseek"]);
const FORMATS = ["chat", "messages", "responses"] as const;
type Format = (typeof FORMATS)[number];

const PROMPT = 123;
const COMPLETION = 45;
/** Exact usage every fake format understands (unknown keys are ignored by each one). */
const USAGE = {
  prompt_tokens: PROMPT,
  completion_tokens: COMPLETION,
  input_tokens: PROMPT,
  output_tokens: COMPLETION,
  promptTokenCount: PROMPT,
  candidatesTokenCount: COMPLETION,
};
const directive = (d: Record<string, unknown>) => `[[fake ${JSON.stringify(d)}]]`;
const TEXT = "matrix reply ok";

function expectedCost(model: string): number {
  const usage = { inputTokens: PROMPT, outputTokens: COMPLETION, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 };
  return priceUsage(usage, catalog.pricesFor(catalog.get(model)!, PROMPT, new Date())).totalCost;
}

let fake: FakeUpstream;
let t: TestGateway;
let key: string;
beforeAll(async () => {
  fake = await startFakeUpstream();
  const v1 = `${fake.url}/v1`;
  t = await startTestGateway({
    fake,
    env: {
      ANTHROPIC_BASE_URL: fake.url,
      ANTHROPIC_API_KEY: "sk-ant-matrix",
      GEMINI_BASE_URL: fake.url,
      GEMINI_API_KEY: "gm-matrix",
      MISTRAL_BASE_URL: v1,
      MISTRAL_API_KEY: "sk-mistral",
      QWEN_BASE_URL: v1,
      QWEN_API_KEY: "sk-qwen",
      MOONSHOT_BASE_URL: v1,
      MOONSHOT_API_KEY: "sk-moonshot",
      ZAI_BASE_URL: v1,
      ZAI_API_KEY: "sk-zai",
      GROQ_BASE_URL: v1,
      GROQ_API_KEY: "sk-groq",
    },
  });
  key = (await t.newAccountWithKey({ credit: 100 })).key;
});
afterAll(async () => {
  await t.stop();
  await fake.stop();
});

const anthropic = () => new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0 });

async function generationCost(id: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const res = await fetch(`${t.url}/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${key}` } });
    if (res.status === 200) {
      const record = ((await res.json()) as any).data;
      if (record?.total_cost !== undefined && record.total_cost !== null) return usdToNano(String(record.total_cost));
    }
    await Bun.sleep(10);
  }
  throw new Error(`generation ${id} never resolved`);
}

/** One non-streaming text turn in `format`: the text and the x-gateway-cost header. */
async function text(format: Format, model: string): Promise<{ text: string; cost: string | null }> {
  const content = `say it ${directive({ text: TEXT, usage: USAGE })}`;
  if (format === "chat") {
    const { data, response } = await t.client(key).chat.completions.create({ model, messages: [{ role: "user", content }] }).withResponse();
    return { text: data.choices[0]!.message.content ?? "", cost: response.headers.get("x-gateway-cost") };
  }
  if (format === "messages") {
    const { data, response } = await anthropic().messages.create({ model, max_tokens: 200, messages: [{ role: "user", content }] }).withResponse();
    return { text: data.content.map((b) => (b.type === "text" ? b.text : "")).join(""), cost: response.headers.get("x-gateway-cost") };
  }
  const { data, response } = await t.client(key).responses.create({ model, input: [{ role: "user", content }], store: false }).withResponse();
  return { text: data.output_text, cost: response.headers.get("x-gateway-cost") };
}

/** One streamed text turn: the concatenated text and the request id. */
async function stream(format: Format, model: string): Promise<{ text: string; id: string }> {
  const content = `stream it ${directive({ text: TEXT, usage: USAGE })}`;
  let out = "";
  if (format === "chat") {
    const { data, response } = await t
      .client(key)
      .chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content }] })
      .withResponse();
    for await (const chunk of data) out += chunk.choices[0]?.delta.content ?? "";
    return { text: out, id: response.headers.get("x-gateway-request-id")! };
  }
  if (format === "messages") {
    const { data, response } = await anthropic().messages.create({ model, max_tokens: 200, stream: true, messages: [{ role: "user", content }] }).withResponse();
    for await (const event of data) if (event.type === "content_block_delta" && event.delta.type === "text_delta") out += event.delta.text;
    return { text: out, id: response.headers.get("x-gateway-request-id")! };
  }
  const { data, response } = await t.client(key).responses.create({ model, input: [{ role: "user", content }], store: false, stream: true }).withResponse();
  let done = "";
  for await (const event of data) {
    if (event.type === "response.output_text.delta") out += event.delta;
    if (event.type === "response.completed") done = event.response.output_text ?? "";
  }
  if (done) expect(done).toBe(out);
  return { text: out, id: response.headers.get("x-gateway-request-id")! };
}

const ARGS = { city: "Paris", days: 3, units: { temp: "c" } };
const WEATHER_SCHEMA = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer" }, units: { type: "object", properties: { temp: { type: "string" } } } },
  required: ["city"],
};

/** One tool-call turn: the call's name and parsed arguments as the client sees them. */
async function toolCall(format: Format, model: string): Promise<{ name: string; args: unknown }> {
  const content = `weather? ${directive({ tool_calls: [{ name: "get_weather", arguments: ARGS }] })}`;
  if (format === "chat") {
    const data = await t.client(key).chat.completions.create({
      model,
      messages: [{ role: "user", content }],
      tools: [{ type: "function", function: { name: "get_weather", description: "Weather.", parameters: WEATHER_SCHEMA } }],
    });
    expect(data.choices[0]!.finish_reason).toBe("tool_calls");
    const call = data.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toBeTruthy();
    return { name: call.function.name, args: JSON.parse(call.function.arguments) };
  }
  if (format === "messages") {
    const data = await anthropic().messages.create({
      model,
      max_tokens: 200,
      messages: [{ role: "user", content }],
      tools: [{ name: "get_weather", description: "Weather.", input_schema: WEATHER_SCHEMA as any }],
    });
    expect(data.stop_reason).toBe("tool_use");
    const block = data.content.find((b) => b.type === "tool_use");
    if (!block || block.type !== "tool_use") throw new Error(`no tool_use block: ${JSON.stringify(data.content)}`);
    expect(block.id).toMatch(/^[a-zA-Z0-9_-]+$/);
    return { name: block.name, args: block.input };
  }
  const data = await t.client(key).responses.create({
    model,
    input: [{ role: "user", content }],
    store: false,
    tools: [{ type: "function", name: "get_weather", description: "Weather.", parameters: WEATHER_SCHEMA, strict: false }],
  });
  const item = data.output.find((o) => o.type === "function_call");
  if (!item || item.type !== "function_call") throw new Error(`no function_call: ${JSON.stringify(data.output)}`);
  expect(item.call_id).toBeTruthy();
  return { name: item.name, args: JSON.parse(item.arguments) };
}

for (const format of FORMATS) {
  describe(`${format} client`, () => {
    for (const { family, model } of FAMILIES) {
      it(`${family} (${model}): text at the exact catalog cost`, async () => {
        fake.reset();
        const out = await text(format, model);
        expect(out.text).toBe(TEXT);
        const upstream = fake.requests.at(-1)!;
        expect(upstream.path).toMatch(UPSTREAM_PATH[family] ?? /^\/v1\/(chat\/completions|responses)$/);
        if (family !== "openai" && !UPSTREAM_PATH[family]) expect(upstream.body.model).toBe(catalog.get(model)!.upstream_model);
        expect(out.cost).not.toBeNull();
        expect(usdToNano(out.cost!)).toBe(expectedCost(model));
      });

      it(`${family} (${model}): streamed text, billed exactly (GET /v1/generation)`, async () => {
        const out = await stream(format, model);
        expect(out.text).toBe(TEXT);
        expect(out.id).toBeTruthy();
        expect(await generationCost(out.id)).toBe(expectedCost(model));
      });

      if (TOOL_FAMILIES.has(family)) {
        it(`${family} (${model}): a tool call arrives intact`, async () => {
          expect(await toolCall(format, model)).toEqual({ name: "get_weather", args: ARGS });
        });
      }
    }
  });
}
