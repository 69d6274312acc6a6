import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../../../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream } from "../../../fake-upstream/server.ts";
import { computeGeminiUsage, IMAGE_TOKENS, signatureModel, type GeminiFakeDirective } from "./fake.ts";
import { openaiChat } from "../../../../src/formats/openai-chat/index.ts";
import { loadCatalog } from "../../../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../../../src/plugins/metering/cost.ts";
import { nanoToUsd, usdToNano } from "../../../../src/core/money.ts";
import type { Usage } from "../../../../src/core/canonical.ts";

/**
 * A chat client (official openai SDK) on Gemini models, through the gateway to the fake Gemini API:
 * every request crosses formats (chat -> canonical -> generateContent and back).
 */

const GEMINI_KEY = "gm-upstream-gemini";
const LITE = "gemini-2.5-flash-lite";
const CARBON = "gemini-4-carbon";
const catalog = loadCatalog("catalog.yaml");
/** The chat side of the translation is another module; these tests need it attached. */
const chatTranslates = openaiChat.translation !== undefined;
const e2e = chatTranslates ? describe : describe.skip;

let fake: FakeUpstream;
let t: TestGateway;
beforeAll(async () => {
  fake = await startFakeUpstream();
  t = await startTestGateway({ fake, env: { GEMINI_BASE_URL: fake.url, GEMINI_API_KEY: GEMINI_KEY } });
});
afterAll(async () => {
  await t.stop();
  await fake.stop();
});

const directive = (d: GeminiFakeDirective) => `[[fake ${JSON.stringify(d)}]]`;

async function balanceOf(accountId: string): Promise<number> {
  const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
  return usdToNano(String(body.data.balance));
}

/** The exact nano-USD cost of a canonical usage on a model at today's catalog prices. */
function costOf(model: string, usage: Usage): number {
  return priceUsage(usage, catalog.pricesFor(catalog.get(model)!, usage.inputTokens, new Date())).totalCost;
}

/** The usage the fake reported for the last request it received, in canonical form. */
function lastUpstreamUsage(model: string, d?: GeminiFakeDirective): Usage {
  const u = computeGeminiUsage(fake.requests.at(-1)!.body, model, d);
  return {
    inputTokens: u.promptTokenCount + u.toolUsePromptTokenCount,
    cacheReadTokens: u.cachedContentTokenCount,
    cacheWriteTokens: 0,
    outputTokens: u.candidatesTokenCount + u.thoughtsTokenCount,
    reasoningTokens: u.thoughtsTokenCount,
  };
}

const lastUpstream = () => fake.requests.at(-1)!;

const weather: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city.",
    parameters: {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      additionalProperties: false,
      properties: { city: { type: "string", minLength: 1 }, unit: { type: ["string", "null"], enum: ["c", "f", null] } },
      required: ["city"],
    },
    strict: true,
  },
};

e2e("chat client on Gemini, non-streaming", () => {
  it("answers through generateContent with the provider key and bills gemini-2.5-flash-lite exactly", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const { data, response } = await t
      .client(key)
      .chat.completions.create({ model: LITE, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hello." }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toBe(`Hello from ${LITE}.`);
    expect(data.choices[0]!.finish_reason).toBe("stop");
    expect(data.model).toBe(LITE);

    const upstream = lastUpstream();
    expect(upstream.path).toBe(`/v1beta/models/${LITE}:generateContent`);
    expect(upstream.headers["x-goog-api-key"]).toBe(GEMINI_KEY);
    expect(JSON.stringify(upstream)).not.toContain(key);
    // The output cap the budget held for (here the model's maximum) always goes upstream.
    expect(upstream.body).toEqual({
      contents: [{ role: "user", parts: [{ text: "Say hello." }] }],
      systemInstruction: { parts: [{ text: "Be brief." }] },
      generationConfig: { maxOutputTokens: 65535 },
    });

    const usage = lastUpstreamUsage(LITE);
    expect(data.usage).toMatchObject({ prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens });
    // gemini-2.5-flash-lite: $0.10 input, $0.40 output per million tokens = 100 and 400 nano-USD per token.
    const cost = usage.inputTokens * 100 + usage.outputTokens * 400;
    expect(costOf(LITE, usage)).toBe(cost);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
  });

  it("prices cache reads at the cache price and thoughts as output, never counting cache tokens twice", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const d = { usage: { promptTokenCount: 1000, cachedContentTokenCount: 400, candidatesTokenCount: 50, thoughtsTokenCount: 30 } };
    const { data, response } = await t.client(key).chat.completions.create({ model: LITE, messages: [{ role: "user", content: directive(d) }] }).withResponse();
    expect(data.usage).toMatchObject({
      prompt_tokens: 1000,
      completion_tokens: 80,
      total_tokens: 1080,
      prompt_tokens_details: { cached_tokens: 400 },
      completion_tokens_details: { reasoning_tokens: 30 },
    });
    // 600 uncached x 100 + 400 cached x 10 + 80 output x 400 nano-USD.
    const expected = 600 * 100 + 400 * 10 + 80 * 400;
    expect(expected).toBe(96_000);
    expect(response.headers.get("x-gateway-cost")).toBe("0.000096");
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - expected);
  });

  it("sends a data-URL image inline and bills its tokens", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    const { data, response } = await t
      .client(key)
      .chat.completions.create({
        model: LITE,
        messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }] }],
      })
      .withResponse();
    expect(lastUpstream().body.contents[0].parts).toEqual([{ text: "What is this?" }, { inlineData: { mimeType: "image/png", data: png } }]);
    const usage = lastUpstreamUsage(LITE);
    expect(usage.inputTokens).toBeGreaterThan(IMAGE_TOKENS);
    expect(data.usage!.prompt_tokens).toBe(usage.inputTokens);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(costOf(LITE, usage))));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - costOf(LITE, usage));
  });

  it("asks Gemini for JSON with a sanitised responseSchema", async () => {
    const { key } = await t.newAccountWithKey();
    const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"], additionalProperties: false };
    const data = await t.client(key).chat.completions.create({
      model: LITE,
      messages: [{ role: "user", content: `Answer in JSON. ${directive({ text: '{"answer":"yes"}' })}` }],
      response_format: { type: "json_schema", json_schema: { name: "reply", schema, strict: true } },
    });
    expect(JSON.parse(data.choices[0]!.message.content!)).toEqual({ answer: "yes" });
    expect(lastUpstream().body.generationConfig).toEqual({
      maxOutputTokens: 65535,
      responseMimeType: "application/json",
      responseSchema: { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] },
    });
  });

  it("shows thought summaries as reasoning_content when reasoning is asked for", async () => {
    const { key } = await t.newAccountWithKey();
    const data = await t.client(key).chat.completions.create({
      model: CARBON,
      reasoning_effort: "high",
      messages: [{ role: "user", content: directive({ thinking: "Let me weigh this.", text: "42" }) }],
    });
    expect(lastUpstream().body.generationConfig.thinkingConfig).toEqual({ thinkingLevel: "high", includeThoughts: true });
    expect(data.choices[0]!.message.content).toBe("42");
    expect((data.choices[0]!.message as any).reasoning_content).toBe("Let me weigh this.");
    expect(data.usage!.completion_tokens_details!.reasoning_tokens).toBe(4);
  });

  it("passes Gemini's errors on: 429 with retry-after, 400 with Gemini's message, 503 as 503 (overloaded, retryable) billed nothing", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const send = (d: GeminiFakeDirective) =>
      t.client(key).chat.completions.create({ model: LITE, messages: [{ role: "user", content: directive(d) }] }).catch((error) => error);
    const limited = await send({ status: 429, headers: { "retry-after": "3" } });
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect(limited.headers.get("retry-after")).toBe("3");
    const bad = await send({ status: 400, error: "Invalid value at 'contents'" });
    expect(bad.status).toBe(400);
    expect(bad.message).toContain("Invalid value at 'contents'");
    const down = await send({ status: 503 });
    expect(down.status).toBe(503);
    expect(await balanceOf(accountId)).toBe(usdToNano(10));
  });
});

e2e("chat client on Gemini, streaming", () => {
  it("streams text from streamGenerateContent?alt=sse and bills gemini-4-carbon from the last usageMetadata", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const stream = await t.client(key).chat.completions.create({
      model: CARBON,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "stream please" }],
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(`Hello from ${CARBON}.`);
    expect(finish).toBe("stop");
    expect(lastUpstream().path).toBe(`/v1beta/models/${CARBON}:streamGenerateContent?alt=sse`);
    const expected = lastUpstreamUsage(CARBON);
    expect(usage).toMatchObject({ prompt_tokens: expected.inputTokens, completion_tokens: expected.outputTokens });
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - costOf(CARBON, expected));
  });

  it("reports a mid-stream Gemini error to the client as a stream error", async () => {
    const { key } = await t.newAccountWithKey();
    const stream = await t.client(key).chat.completions.create({
      model: LITE,
      stream: true,
      messages: [{ role: "user", content: `${directive({ text: "one two three four", stream_error_after_chunks: 2, error: "backend fell over" })}` }],
    });
    const error = await (async () => {
      for await (const _ of stream);
    })().catch((thrown) => thrown);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(String(error.message)).toContain("backend fell over");
  });
});

e2e("chat client on Gemini, tools", () => {
  const question = { role: "user" as const, content: `Weather in Paris? ${directive({ tool_calls: [{ name: "get_weather", arguments: { city: "Paris" } }] })}` };

  it("declares tools with schemas Gemini accepts and returns Gemini's call as a chat tool call (STOP -> tool_calls)", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const { data, response } = await t.client(key).chat.completions.create({ model: CARBON, messages: [question], tools: [weather], tool_choice: "auto" }).withResponse();
    const choice = data.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toMatch(/^call_[A-Za-z0-9_-]+$/);
    expect(call.function).toEqual({ name: "get_weather", arguments: '{"city":"Paris"}' });

    const upstream = lastUpstream().body;
    expect(upstream.tools[0].functionDeclarations[0].parameters).toEqual({
      type: "object",
      properties: { city: { type: "string", minLength: 1 }, unit: { type: "string", nullable: true, enum: ["c", "f"] } },
      required: ["city"],
    });
    expect(upstream.toolConfig).toEqual({ functionCallingConfig: { mode: "AUTO" } });
    const cost = costOf(CARBON, lastUpstreamUsage(CARBON, { tool_calls: [{ name: "get_weather", arguments: { city: "Paris" } }] }));
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
  });

  it("replays the tool turn with the thought signature to the same model, and drops it for another model", async () => {
    const { key } = await t.newAccountWithKey();
    const client = t.client(key);
    const first = await client.chat.completions.create({ model: CARBON, messages: [question], tools: [weather] });
    const assistant = first.choices[0]!.message;
    const call = assistant.tool_calls![0]!;
    const history: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      question,
      { role: "assistant", content: assistant.content, tool_calls: assistant.tool_calls },
      { role: "tool", tool_call_id: call.id, content: '{"temp_c":21,"sky":"clear"}' },
    ];

    // Same model: the signature Gemini issued comes back on the functionCall (the fake refuses the turn otherwise).
    const second = await client.chat.completions.create({ model: CARBON, messages: history, tools: [weather] });
    expect(second.choices[0]!.message.content).toBe(`Hello from ${CARBON}.`);
    expect(second.choices[0]!.finish_reason).toBe("stop");
    const replayed = lastUpstream().body.contents;
    expect(replayed.map((content: any) => content.role)).toEqual(["user", "model", "user"]);
    const [callPart] = replayed[1].parts;
    expect(callPart.functionCall).toEqual({ name: "get_weather", args: { city: "Paris" } });
    expect(signatureModel(callPart.thoughtSignature)).toBe(CARBON);
    expect(replayed[2].parts).toEqual([{ functionResponse: { name: "get_weather", response: { temp_c: 21, sky: "clear" } } }]);

    // Another model: the same history goes without the signature.
    const elsewhere = await client.chat.completions.create({ model: LITE, messages: history, tools: [weather] });
    expect(elsewhere.choices[0]!.message.content).toBe(`Hello from ${LITE}.`);
    const moved = lastUpstream().body.contents;
    expect(moved[1].parts).toEqual([{ functionCall: { name: "get_weather", args: { city: "Paris" } } }]);
  });

  it("streams a tool call whose finishReason comes in a later chunk, and replays it", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const client = t.client(key);
    const runner = client.chat.completions.stream({ model: CARBON, messages: [question], tools: [weather], stream_options: { include_usage: true } });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call.function).toMatchObject({ name: "get_weather", arguments: '{"city":"Paris"}' });
    const usage = lastUpstreamUsage(CARBON, { tool_calls: [{ name: "get_weather", arguments: { city: "Paris" } }] });
    expect(final.usage).toMatchObject({ prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens });
    const firstCost = costOf(CARBON, usage);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - firstCost);

    const answer = await client.chat.completions.create({
      model: CARBON,
      stream: true,
      messages: [
        question,
        { role: "assistant", content: null, tool_calls: [{ id: call.id, type: "function", function: { name: call.function.name, arguments: call.function.arguments } }] },
        { role: "tool", tool_call_id: call.id, content: "sunny" },
      ],
      tools: [weather],
    });
    let text = "";
    for await (const chunk of answer) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe(`Hello from ${CARBON}.`);
    expect(signatureModel(lastUpstream().body.contents[1].parts[0].thoughtSignature)).toBe(CARBON);
    expect(lastUpstream().body.contents[2].parts).toEqual([{ functionResponse: { name: "get_weather", response: { result: "sunny" } } }]);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - firstCost - costOf(CARBON, lastUpstreamUsage(CARBON)));
  });
});

if (!chatTranslates) {
  it.skip("e2e Gemini tests need openaiChat.translation (src/formats/openai-chat/translation) attached", () => {});
}
