import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { readChatUsage } from "../../src/formats/openai-chat/relay.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";

// Normally a few seconds; the margin is for a loaded machine (bun's default per-test limit is 5 s).
setDefaultTimeout(20_000);

const catalog = loadCatalog("catalog.yaml");
/** One model of each family: OpenAI, Anthropic and Google (no provider plugin at all here), DeepSeek. */
const MODELS = ["gpt-6-luna", "claude-sonnet-5-5", "gemini-4-carbon", "deepseek-flash"] as const;
const NO_KEYS = { OPENAI_API_KEY: "", DEEPSEEK_API_KEY: "", XAI_API_KEY: "", MISTRAL_API_KEY: "" };

function expectedCost(model: string, usage: OpenAI.CompletionUsage): number {
  const normalized = readChatUsage(usage as never)!;
  return priceUsage(normalized, catalog.pricesFor(catalog.get(model)!, normalized.inputTokens, new Date())).totalCost;
}

/** The sandbox's token estimate: 4 per message plus one per 4 characters. */
function promptTokens(messages: { content: string }[]): number {
  return messages.reduce((sum, message) => sum + 4 + Math.ceil(message.content.length / 4), 0);
}

const weather: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

describe("sandbox mode without any provider key", () => {
  let t: TestGateway;
  let accountId: string;
  let client: OpenAI;

  beforeAll(async () => {
    t = await startTestGateway({ env: { GATEWAY_SANDBOX: "true", ...NO_KEYS } });
    const created = await t.newAccountWithKey({ credit: 10 });
    accountId = created.accountId;
    client = t.client(created.key);
  });
  afterAll(async () => {
    await t?.stop();
  });

  async function balance(): Promise<number> {
    const { status, body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
    expect(status).toBe(200);
    return usdToNano(String(body.data.balance));
  }

  for (const model of MODELS) {
    it(`${model}: non-streaming, deterministic text, usage, billed exactly the x-gateway-cost`, async () => {
      const upstream = catalog.get(model)!.upstream_model;
      const messages = [
        { role: "system" as const, content: "You are terse." },
        { role: "user" as const, content: `hello sandbox, this is ${model}` },
      ];
      const before = await balance();
      const { data, response } = await client.chat.completions.create({ model, messages }).withResponse();
      expect(response.status).toBe(200);
      expect(data.model).toBe(model);
      expect(data.object).toBe("chat.completion");
      expect(data.choices[0]!.finish_reason).toBe("stop");
      expect(data.choices[0]!.message.content).toBe(`Sandbox reply from ${upstream}. You said: hello sandbox, this is ${model}`);
      expect(data.usage!.prompt_tokens).toBe(promptTokens(messages));
      expect(data.usage!.completion_tokens).toBeGreaterThan(0);
      expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens);

      const header = response.headers.get("x-gateway-cost");
      expect(header).not.toBeNull();
      const cost = usdToNano(header!);
      expect(cost).toBeGreaterThan(0);
      expect(cost).toBe(expectedCost(model, data.usage!));
      expect(await balance()).toBe(before - cost);

      // Same question, same answer.
      const again = await client.chat.completions.create({ model, messages });
      expect(again.choices[0]!.message.content).toBe(data.choices[0]!.message.content);
      expect(again.usage).toEqual(data.usage);
    });

    it(`${model}: streaming gives the same text, reports usage and bills it`, async () => {
      const messages = [{ role: "user" as const, content: `stream it, ${model}` }];
      const before = await balance();
      const reference = await client.chat.completions.create({ model, messages });
      const afterReference = await balance();

      const { data: stream, response } = await client.chat.completions
        .create({ model, messages, stream: true, stream_options: { include_usage: true } })
        .withResponse();
      expect(response.headers.get("content-type")).toContain("text/event-stream");
      let text = "";
      let usage: OpenAI.CompletionUsage | null | undefined;
      let finish: string | null | undefined;
      let chunks = 0;
      for await (const chunk of stream) {
        chunks++;
        expect(chunk.model).toBe(model);
        text += chunk.choices[0]?.delta.content ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      expect(chunks).toBeGreaterThan(3);
      expect(text).toBe(reference.choices[0]!.message.content!);
      expect(finish).toBe("stop");
      expect(usage).toEqual(reference.usage);
      const cost = expectedCost(model, usage!);
      expect(await balance()).toBe(afterReference - cost);
      expect(afterReference).toBe(before - cost);

      const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=1`);
      expect(body.data[0]).toMatchObject({ id: response.headers.get("x-gateway-request-id"), model, status: "success", cost: nanoToUsd(cost) });
    });
  }

  it("answers a tool call when tools are offered, streamed (SDK stream helper) and not", async () => {
    const messages = [{ role: "user" as const, content: "What is the weather in Paris?" }];
    const before = await balance();
    const { data: plain, response } = await client.chat.completions
      .create({ model: "claude-sonnet-5-5", messages, tools: [weather] })
      .withResponse();
    const call = plain.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(plain.choices[0]!.finish_reason).toBe("tool_calls");
    expect(plain.choices[0]!.message.content).toBeNull();
    expect(call.type).toBe("function");
    expect(call.id).toMatch(/^call_/);
    expect(call.function.name).toBe("get_weather");
    // Arguments valid against the tool's schema: its required city, a string.
    expect(JSON.parse(call.function.arguments)).toEqual({ city: "sandbox" });
    const cost = usdToNano(response.headers.get("x-gateway-cost")!);
    expect(cost).toBe(expectedCost("claude-sonnet-5-5", plain.usage!));
    expect(await balance()).toBe(before - cost);

    const runner = client.chat.completions.stream({
      model: "gemini-4-carbon",
      messages,
      tools: [weather],
      stream_options: { include_usage: true },
    });
    const final = await runner.finalChatCompletion();
    const streamed = final.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(streamed.function.name).toBe("get_weather");
    expect(streamed.function.arguments).toBe(call.function.arguments);
    expect(final.usage).toMatchObject({ prompt_tokens: plain.usage!.prompt_tokens, completion_tokens: plain.usage!.completion_tokens });
    expect(await balance()).toBe(before - cost - expectedCost("gemini-4-carbon", final.usage!));
  });

  it("answers text once the tool result is back, and with tool_choice none", async () => {
    const answered = await client.chat.completions.create({
      model: "gpt-6-luna",
      tools: [weather],
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "sunny, 21C" },
      ],
    });
    expect(answered.choices[0]!.message.tool_calls ?? []).toHaveLength(0);
    expect(answered.choices[0]!.message.content).toBe("Sandbox reply from gpt-6-luna. The tool returned: sunny, 21C");

    const none = await client.chat.completions.create({
      model: "gpt-6-luna",
      tools: [weather],
      tool_choice: "none",
      messages: [{ role: "user", content: "no tools please" }],
    });
    expect(none.choices[0]!.message.content).toBe("Sandbox reply from gpt-6-luna. You said: no tools please");
  });

  it("still refuses unknown models and missing keys", async () => {
    const unknown = await client.chat.completions.create({ model: "gpt-does-not-exist", messages: [{ role: "user", content: "x" }] }).catch((error) => error);
    expect(unknown).toBeInstanceOf(OpenAI.APIError);
    expect(unknown.status).toBe(400);
    expect(unknown.code).toBe("model_not_found");
    const anonymous = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-6-luna", messages: [{ role: "user", content: "x" }] }),
    });
    expect(anonymous.status).toBe(401);
  });

  it("never reached an upstream", () => {
    expect(t.fake.requests).toHaveLength(0);
  });
});

describe("without the sandbox and without provider keys", () => {
  let t: TestGateway;
  let client: OpenAI;
  let accountId: string;
  beforeAll(async () => {
    t = await startTestGateway({ env: { GATEWAY_SANDBOX: "false", ...NO_KEYS } });
    const created = await t.newAccountWithKey({ credit: 10 });
    accountId = created.accountId;
    client = t.client(created.key);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("answers 503 naming OPENAI_API_KEY for gpt-6-luna, streamed or not, and bills nothing", async () => {
    t.fake.reset();
    for (const stream of [false, true]) {
      const error = await client.chat.completions
        .create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }], stream })
        .then(() => undefined, (thrown) => thrown);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error.status).toBe(503);
      expect(error.code).toBe("provider_unavailable");
      expect(error.message).toContain("OPENAI_API_KEY");
    }
    const deepseek = await client.chat.completions.create({ model: "deepseek-flash", messages: [{ role: "user", content: "hi" }] }).catch((thrown) => thrown);
    expect(deepseek.status).toBe(503);
    expect(deepseek.message).toContain("DEEPSEEK_API_KEY");
    expect(t.fake.requests).toHaveLength(0);
    const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
    expect(body.data.balance).toBe(10);
  });

  it("answers 503 for a family whose provider plugin is not enabled", async () => {
    const error = await client.chat.completions.create({ model: "claude-sonnet-5-5", messages: [{ role: "user", content: "hi" }] }).catch((thrown) => thrown);
    expect(error.status).toBe(503);
    expect(error.message).toContain("anthropic");
  });
});
