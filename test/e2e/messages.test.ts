import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { computeAnthropicUsage } from "../fake-upstream/anthropic.ts";
import { computeUsage } from "../fake-upstream/openai.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { countPromptTokens, loadTokenizer } from "../../src/plugins/token-count/count.ts";
import { readChatUsage } from "../../src/formats/openai-chat/relay.ts";
import { readMessagesUsage } from "../../src/formats/anthropic-messages/usage.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";
import type { Usage } from "../../src/core/canonical.ts";

const UPSTREAM_ANTHROPIC_KEY = "sk-ant-upstream";
const catalog = loadCatalog("catalog.yaml");
const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;

/** The exact nano-USD the gateway must bill for a normalized usage on a model. */
function costOf(model: string, usage: Usage): number {
  return priceUsage(usage, catalog.pricesFor(catalog.get(model)!, usage.inputTokens, new Date())).totalCost;
}

let fake: FakeUpstream;
let t: TestGateway;
beforeAll(async () => {
  fake = await startFakeUpstream();
  t = await startTestGateway({
    fake,
    env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: UPSTREAM_ANTHROPIC_KEY, GEMINI_BASE_URL: fake.url, GEMINI_API_KEY: "gm-upstream" },
  });
  await loadTokenizer();
});
afterAll(async () => {
  await t.stop();
  await fake.stop();
});

function anthropic(key: string, headers?: Record<string, string>): Anthropic {
  return new Anthropic({ apiKey: key, baseURL: t.url, maxRetries: 0, defaultHeaders: headers });
}

async function balanceOf(accountId: string): Promise<number> {
  const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
  return usdToNano(String(body.data.balance));
}

async function requestLog(accountId: string): Promise<any[]> {
  const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=50`);
  return body.data;
}

function post(path: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(t.url + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
}

describe("POST /v1/messages on an Anthropic model (same format: relayed)", () => {
  it("answers through the Anthropic SDK, relays the body as sent with the provider's own key, and bills exactly", async () => {
    const { accountId, key } = await fundedAccount();
    fake.reset();
    const request = { model: "claude-sonnet-5-5", max_tokens: 256, messages: [{ role: "user" as const, content: "Say hello to the gateway." }] };
    const { data, response } = await anthropic(key).messages.create(request).withResponse();
    expect(data.content).toMatchObject([{ type: "text", text: "Hello from claude-sonnet-5-5." }]);
    expect(data.model).toBe("claude-sonnet-5-5");

    const [upstream] = fake.requests;
    expect(upstream!.body).toEqual(request);
    expect(upstream!.headers["x-api-key"]).toBe(UPSTREAM_ANTHROPIC_KEY);
    expect(upstream!.headers["anthropic-version"]).toBe("2023-06-01");
    expect(JSON.stringify(upstream)).not.toContain(key);

    const usage = readMessagesUsage(computeAnthropicUsage(request))!;
    expect(data.usage.input_tokens).toBe(usage.inputTokens);
    const cost = costOf("claude-sonnet-5-5", usage);
    expect(cost).toBe(usage.inputTokens * 2000 + usage.outputTokens * 10_000);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
    const requestId = response.headers.get("x-gateway-request-id")!;
    expect(requestId).toMatch(/^gen-[0-9a-f]{32}$/);
    const [row] = await requestLog(accountId);
    expect(row).toMatchObject({ id: requestId, model: "claude-sonnet-5-5", status: "success", cost: nanoToUsd(cost) });
  });

  it("streams the upstream's events through with their event lines and bills the stream's usage", async () => {
    const { accountId, key } = await fundedAccount();
    const request = { model: "claude-sonnet-5-5", max_tokens: 256, messages: [{ role: "user" as const, content: "stream please" }] };
    const stream = anthropic(key).messages.stream(request);
    const message = await stream.finalMessage();
    expect(message.content).toMatchObject([{ type: "text", text: "Hello from claude-sonnet-5-5." }]);
    const cost = costOf("claude-sonnet-5-5", readMessagesUsage(computeAnthropicUsage(request))!);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);

    const raw = await post("/v1/messages", { ...request, stream: true }, { "x-api-key": key, "anthropic-version": "2023-06-01" });
    expect(raw.headers.get("content-type")).toStartWith("text/event-stream");
    expect(raw.headers.get("x-gateway-request-id")).toMatch(/^gen-/);
    const text = await raw.text();
    expect(text).toStartWith("event: message_start\ndata: ");
    expect(text.trimEnd()).toEndWith('event: message_stop\ndata: {"type":"message_stop"}');
  });

  it("bills cache reads and writes at their own prices, never double counted, streamed or not", async () => {
    // claude-sonnet-5-5: input $2, output $10, cache read $0.10, cache write $2.50 per million tokens.
    const usage = { input_tokens: 300, cache_creation_input_tokens: 1000, cache_read_input_tokens: 5000, output_tokens: 200 };
    const expected = 300 * 2000 + 5000 * 100 + 1000 * 2500 + 200 * 10_000;
    expect(expected).toBe(5_600_000);
    for (const stream of [false, true]) {
      const { accountId, key } = await fundedAccount();
      const d = { usage, usage_in_delta_only: stream };
      const request = { model: "claude-sonnet-5-5", max_tokens: 1000, messages: [{ role: "user" as const, content: `cached ${directive(d)}` }] };
      const message = stream ? await anthropic(key).messages.stream(request).finalMessage() : await anthropic(key).messages.create(request);
      expect(message.usage).toMatchObject(usage);
      expect(await balanceOf(accountId)).toBe(usdToNano(10) - expected);
      const [row] = await requestLog(accountId);
      expect(row.cost).toBe(0.0056);
    }
  });

  it("streams tool_use blocks, and the next turn's tool_result history is relayed untouched", async () => {
    const { key } = await fundedAccount();
    const d = { tool_calls: [{ name: "get_weather", arguments: { city: "Paris" } }, { name: "get_time", arguments: { tz: "CET" } }] };
    const tools = [
      { name: "get_weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } },
      { name: "get_time", input_schema: { type: "object" as const, properties: { tz: { type: "string" } } } },
    ];
    const first = { model: "claude-sonnet-5-5", max_tokens: 500, tools, messages: [{ role: "user" as const, content: `weather and time? ${directive(d)}` }] };
    const message = await anthropic(key).messages.stream(first).finalMessage();
    expect(message.stop_reason).toBe("tool_use");
    const calls = message.content.filter((block) => block.type === "tool_use") as Anthropic.ToolUseBlock[];
    expect(calls.map((call) => [call.name, call.input])).toEqual([["get_weather", { city: "Paris" }], ["get_time", { tz: "CET" }]]);

    const second = await anthropic(key).messages.create({
      ...first,
      messages: [
        { role: "user", content: "weather and time?" },
        { role: "assistant", content: message.content as Anthropic.ContentBlockParam[] },
        { role: "user", content: calls.map((call) => ({ type: "tool_result" as const, tool_use_id: call.id, content: "sunny" })) },
      ],
    });
    expect(second.content).toMatchObject([{ type: "text", text: "Hello from claude-sonnet-5-5." }]);
  });

  it("relays thinking with Anthropic's signature, replayable byte for byte on the next turn, and passes anthropic-beta", async () => {
    const { key } = await fundedAccount();
    fake.reset();
    const beta = { "anthropic-beta": "interleaved-thinking-2025-05-14" };
    const first = {
      model: "claude-sonnet-5-5",
      max_tokens: 4000,
      thinking: { type: "enabled" as const, budget_tokens: 2000 },
      messages: [{ role: "user" as const, content: `think ${directive({ thinking: "I should greet.", text: "Hi!" })}` }],
    };
    const message = await anthropic(key, beta).messages.stream(first).finalMessage();
    const thinking = message.content[0] as Anthropic.ThinkingBlock;
    expect(thinking).toMatchObject({ type: "thinking", thinking: "I should greet." });
    expect(thinking.signature).toStartWith("sigfake.");
    expect(fake.requests[0]!.headers["anthropic-beta"]).toBe("interleaved-thinking-2025-05-14");

    // The fake refuses a signature it did not issue for this model: success proves the replay is exact.
    const second = await anthropic(key).messages.create({
      ...first,
      messages: [{ role: "user", content: "think" }, { role: "assistant", content: message.content as Anthropic.ContentBlockParam[] }, { role: "user", content: "again" }],
    });
    expect(second.content.at(-1)).toMatchObject({ type: "text" });
    expect(fake.requests[1]!.body.messages[1].content[0]).toEqual({ type: "thinking", thinking: "I should greet.", signature: thinking.signature });
  });
});

describe("POST /v1/messages on an OpenAI-family model (translated)", () => {
  it("answers a Messages client from a chat upstream and bills the chat usage exactly", async () => {
    const { accountId, key } = await fundedAccount();
    fake.reset();
    const request = { model: "gpt-6.2-sol", max_tokens: 300, system: "Be brief.", messages: [{ role: "user" as const, content: "hello" }] };
    const { data, response } = await anthropic(key).messages.create(request).withResponse();
    expect(data).toMatchObject({ type: "message", role: "assistant", model: "gpt-6.2-sol", stop_reason: "end_turn", content: [{ type: "text", text: "Hello from gpt-6.2-sol." }] });
    const upstream = fake.requests[0]!;
    expect(upstream.path).toBe("/v1/chat/completions");
    expect(upstream.body).toMatchObject({ model: "gpt-6.2-sol", max_completion_tokens: 300, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello" }] });
    const usage = readChatUsage(computeUsage(upstream.body))!;
    expect(data.usage).toMatchObject({ input_tokens: usage.inputTokens, output_tokens: usage.outputTokens });
    const cost = costOf("gpt-6.2-sol", usage);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
  });

  it("streams Messages events for a chat upstream: tool calls as tool_use blocks, cache usage split back", async () => {
    const { accountId, key } = await fundedAccount();
    fake.reset();
    const d = { tool_calls: [{ name: "get_weather", arguments: { city: "Oslo" } }], usage: { prompt_tokens: 1000, completion_tokens: 50, cached_tokens: 400 } };
    const message = await anthropic(key)
      .messages.stream({
        model: "gpt-6.2-sol",
        max_tokens: 300,
        tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
        messages: [{ role: "user", content: `weather? ${directive(d)}` }],
      })
      .finalMessage();
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content).toMatchObject([{ type: "tool_use", name: "get_weather", input: { city: "Oslo" } }]);
    expect((message.content[0] as Anthropic.ToolUseBlock).id).toMatch(/^[a-zA-Z0-9_-]+$/);
    expect(message.usage).toMatchObject({ input_tokens: 600, cache_read_input_tokens: 400, cache_creation_input_tokens: 0, output_tokens: 50 });
    expect(fake.requests[0]!.body.stream_options).toEqual({ include_usage: true });
    // gpt-6.2-sol: input $2, cache read $0.10, output $10 per million tokens.
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - (600 * 2000 + 400 * 100 + 50 * 10_000));
  });

  it("carries the tool round trip: the chat upstream gets the assistant tool call and its result back, paired", async () => {
    const { key } = await fundedAccount();
    fake.reset();
    const answer = await anthropic(key).messages.create({
      model: "gpt-6-luna",
      max_tokens: 100,
      messages: [
        { role: "user", content: "list files" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_abc", name: "bash", input: { cmd: "ls" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_abc", content: "a.txt" }, { type: "text", text: "thanks" }] },
      ],
      tools: [{ name: "bash", input_schema: { type: "object" } }],
    });
    expect(answer.content).toMatchObject([{ type: "text", text: "Hello from gpt-6-luna." }]);
    const messages = fake.requests[0]!.body.messages;
    expect(messages[1]).toMatchObject({ role: "assistant", tool_calls: [{ id: "toolu_abc", type: "function", function: { name: "bash", arguments: '{"cmd":"ls"}' } }] });
    expect(messages[2]).toMatchObject({ role: "tool", tool_call_id: "toolu_abc", content: "a.txt" });
    expect(messages[3]).toMatchObject({ role: "user" });
  });
});

describe("one conversation across families (Claude Code switching models)", () => {
  it("Gemini thinking and tool calls round-trip through a Messages client, and the same history then goes to Claude", async () => {
    const { key } = await fundedAccount();
    const tools = [{ name: "get_weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }];
    const d = { thinking: "I will call the tool.", tool_calls: [{ name: "get_weather", arguments: { city: "Oslo" } }] };
    const first = {
      model: "gemini-4-argon",
      max_tokens: 4000,
      thinking: { type: "enabled" as const, budget_tokens: 2000 },
      tools,
      messages: [{ role: "user" as const, content: `weather? ${directive(d)}` }],
    };
    const answer = await anthropic(key).messages.stream(first).finalMessage();
    expect(answer.content.map((block) => block.type)).toEqual(["thinking", "tool_use"]);
    expect(answer.stop_reason).toBe("tool_use");
    const call = answer.content[1] as Anthropic.ToolUseBlock;
    const history: Anthropic.MessageParam[] = [
      { role: "user", content: "weather?" },
      { role: "assistant", content: answer.content as Anthropic.ContentBlockParam[] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "sunny" }] },
    ];
    // The Gemini fake refuses a replayed function call without the thought signature it issued.
    fake.reset();
    const again = await anthropic(key).messages.create({ ...first, messages: history });
    expect(again.content).toMatchObject([{ type: "text", text: "Hello from gemini-4-argon." }]);

    // Claude gets the same history: the wrapped Gemini thinking is dropped (Anthropic would refuse its
    // signature), and thinking is turned off for this tool loop (it would need a leading thinking block).
    fake.reset();
    const claude = await anthropic(key).messages.create({ ...first, model: "claude-sonnet-5-5", messages: history });
    expect(claude.content).toMatchObject([{ type: "text", text: "Hello from claude-sonnet-5-5." }]);
    const relayed = fake.requests[0]!.body;
    expect(relayed.thinking).toBeUndefined();
    expect(relayed.messages[1].content).toEqual([{ type: "tool_use", id: call.id, name: "get_weather", input: { city: "Oslo" } }]);
  });
});

describe("POST /v1/chat/completions on an Anthropic model (translated)", () => {
  it("answers a chat client from the Anthropic upstream, with max_tokens filled in, and bills exactly", async () => {
    const { accountId, key } = await fundedAccount();
    fake.reset();
    const { data, response } = await t
      .client(key)
      .chat.completions.create({ model: "claude-sonnet-5-5", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello" }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toBe("Hello from claude-sonnet-5-5.");
    expect(data.model).toBe("claude-sonnet-5-5");
    const upstream = fake.requests[0]!;
    expect(upstream.path).toBe("/v1/messages");
    expect(upstream.headers["x-api-key"]).toBe(UPSTREAM_ANTHROPIC_KEY);
    expect(upstream.body).toMatchObject({ model: "claude-sonnet-5-5", max_tokens: 128_000, system: "Be brief." });
    const usage = readMessagesUsage(computeAnthropicUsage(upstream.body))!;
    expect(data.usage!.prompt_tokens).toBe(usage.inputTokens);
    const cost = costOf("claude-sonnet-5-5", usage);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);
  });

  it("streams tool calls from Anthropic to a chat client and bills cache tokens once", async () => {
    const { accountId, key } = await fundedAccount();
    const d = { tool_calls: [{ name: "get_weather", arguments: { city: "Rome" } }], usage: { input_tokens: 100, cache_read_input_tokens: 900, cache_creation_input_tokens: 50, output_tokens: 20 } };
    const runner = t.client(key).chat.completions.stream({
      model: "claude-sonnet-5-5",
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: `weather? ${directive(d)}` }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
    });
    const completion = await runner.finalChatCompletion();
    const call = completion.choices[0]!.message.tool_calls![0] as any;
    expect(call.function.name).toBe("get_weather");
    expect(JSON.parse(call.function.arguments)).toEqual({ city: "Rome" });
    expect(completion.choices[0]!.finish_reason).toBe("tool_calls");
    expect(completion.usage).toMatchObject({ prompt_tokens: 1050, completion_tokens: 20 });
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - (100 * 2000 + 900 * 100 + 50 * 2500 + 20 * 10_000));
  });
});

describe("errors on /v1/messages are in Anthropic's shape", () => {
  const message = { model: "claude-sonnet-5-5", max_tokens: 10, messages: [{ role: "user", content: "x" }] };

  it("401 for a missing or wrong key: authentication_error, and the SDK's AuthenticationError", async () => {
    const response = await post("/v1/messages", message, { "anthropic-version": "2023-06-01" });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ type: "error", error: { type: "authentication_error", code: "invalid_api_key" } });
    const error = await anthropic("sk-wrong").messages.create(message as never).catch((thrown) => thrown);
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError);
  });

  it("400 naming max_tokens when it is missing, with no upstream call and no charge", async () => {
    const { accountId, key } = await fundedAccount();
    fake.reset();
    const response = await post("/v1/messages", { model: "claude-sonnet-5-5", messages: [{ role: "user", content: "x" }] }, { "x-api-key": key });
    expect(response.status).toBe(400);
    const body = (await response.json()) as any;
    expect(body).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required", code: "invalid_request" } });
    expect(body.request_id).toBe(response.headers.get("x-gateway-request-id"));
    expect(fake.requests).toHaveLength(0);
    expect(await balanceOf(accountId)).toBe(usdToNano(10));
  });

  it("400 for an unknown model (code model_not_found), malformed JSON and a body nested too deeply, through Bearer auth too", async () => {
    const { key } = await fundedAccount();
    const unknown = await post("/v1/messages", { ...message, model: "claude-9" }, { authorization: `Bearer ${key}` });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", code: "model_not_found" } });
    const malformed = await post("/v1/messages", "{nope", { "x-api-key": key });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    const deep = `{"model":"claude-sonnet-5-5","max_tokens":10,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object","x":${"[".repeat(200_000)}${"]".repeat(200_000)}}}]}`;
    const tooDeep = await post("/v1/messages", deep, { "x-api-key": key });
    expect(tooDeep.status).toBe(400);
    expect(await tooDeep.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("nested more than 256 levels deep") } });
    const error = await anthropic(key).messages.create({ ...message, model: "claude-9" } as never).catch((thrown) => thrown);
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect(error.message).toContain("claude-9");
  });

  it("insufficient balance: invalid_request_error with code insufficient_balance, nothing sent upstream", async () => {
    const { key } = await t.newAccountWithKey({ credit: 0 });
    fake.reset();
    const response = await post("/v1/messages", message, { "x-api-key": key });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", code: "insufficient_balance" } });
    expect(fake.requests).toHaveLength(0);
  });

  it("an upstream overload answers 503 overloaded_error; an in-band stream error reaches the SDK and the request is recorded failed", async () => {
    const { accountId, key } = await fundedAccount();
    const http = await post(
      "/v1/messages",
      { ...message, messages: [{ role: "user", content: directive({ status: 529, error: { type: "overloaded_error", message: "Overloaded" } }) }] },
      { "x-api-key": key },
    );
    expect(http.status).toBe(503);
    expect(await http.json()).toMatchObject({ type: "error", error: { type: "overloaded_error", code: "upstream_overloaded" } });
    const stream = anthropic(key).messages.stream({ ...message, messages: [{ role: "user", content: directive({ stream_error_after_chunks: 3 }) }] } as never);
    const error = await stream.finalMessage().catch((thrown) => thrown);
    expect(error).toBeInstanceOf(Anthropic.APIError);
    const rows = await requestLog(accountId);
    expect(rows[0]).toMatchObject({ status: "failed" });
  });
});

describe("POST /v1/messages/count_tokens", () => {
  const body = {
    system: "You are a careful assistant.",
    tools: [{ name: "get_weather", description: "Weather of a city", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
    messages: [
      { role: "user", content: "What is the weather in Paris, and should I bring an umbrella? Übermorgen auch?" },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "rain, 12°C" }] },
    ],
  };

  it("counts exactly with o200k for OpenAI models, and an upper bound for Claude (≤ bytes, ≥ 1.35 × o200k) and other families", async () => {
    const { key } = await fundedAccount();
    const count = async (model: string) => (await anthropic(key).messages.countTokens({ model, ...(body as any) })).input_tokens;
    const exact = countPromptTokens({ ...body }, true);
    const bytes = countPromptTokens({ ...body }, false);
    expect(exact).toBeLessThan(bytes);
    expect(await count("gpt-6.2-sol")).toBe(exact);
    const claude = await count("claude-sonnet-5-5");
    expect(claude).toBe(Math.min(bytes, Math.ceil(exact * 1.35) + 16));
    expect(claude).toBeGreaterThanOrEqual(Math.ceil(exact * 1.35));
    expect(await count("gemini-4-argon")).toBe(bytes);
    // Never an under-count of what the upstream then reports for the same prompt.
    const { usage } = await anthropic(key).messages.create({ model: "claude-sonnet-5-5", max_tokens: 10, ...(body as any) });
    expect(claude).toBeGreaterThanOrEqual(usage.input_tokens);
  });

  it("authenticates, validates like messages (max_tokens not required), and answers errors in Anthropic's shape", async () => {
    const { key } = await fundedAccount();
    const missingKey = await post("/v1/messages/count_tokens", { model: "claude-sonnet-5-5", messages: [{ role: "user", content: "x" }] }, {});
    expect(missingKey.status).toBe(401);
    expect(await missingKey.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    const noMessages = await post("/v1/messages/count_tokens", { model: "claude-sonnet-5-5" }, { "x-api-key": key });
    expect(noMessages.status).toBe(400);
    expect(await noMessages.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: "messages: Field required" } });
    const unknown = await post("/v1/messages/count_tokens?beta=true", { model: "claude-9", messages: [{ role: "user", content: "x" }] }, { authorization: `Bearer ${key}` });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ type: "error", error: { code: "model_not_found" } });
    const restricted = await t.newAccountWithKey({ key: { models: ["gpt-6-luna"] } });
    const forbidden = await post("/v1/messages/count_tokens", { model: "claude-sonnet-5-5", messages: [{ role: "user", content: "x" }] }, { "x-api-key": restricted.key });
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({ type: "error", error: { type: "permission_error", code: "model_not_allowed" } });
  });

  it("counts against the key's RPM (429 in Anthropic's shape past it), not its TPM, and is never sent upstream, held or billed", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10, key: { rate_limit: { requests_per_minute: 3, tokens_per_minute: 50 } } });
    const before = await balanceOf(accountId);
    fake.reset();
    // A prompt over the key's whole TPM: a Messages request with it would be refused, its count is not.
    const long = { model: "claude-sonnet-5-5", messages: [{ role: "user", content: "word ".repeat(200) }] };
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const counted = await post("/v1/messages/count_tokens", long, { "x-api-key": key });
      expect(counted.status).toBe(200);
      expect(((await counted.json()) as any).input_tokens).toBeGreaterThan(50);
      ids.push(counted.headers.get("x-gateway-request-id")!);
    }
    const refused = await post("/v1/messages/count_tokens", long, { "x-api-key": key });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("20");
    const body = (await refused.json()) as any;
    expect(body).toMatchObject({ type: "error", error: { type: "rate_limit_error", code: "rate_limit_exceeded" } });
    expect(body.error.message).toContain("3 requests per minute (RPM)");
    // One window: the Messages route is refused too.
    const message = await post("/v1/messages", { ...long, max_tokens: 10, messages: [{ role: "user", content: "hi" }] }, { "x-api-key": key });
    expect(message.status).toBe(429);
    await message.body?.cancel();

    expect(fake.requests).toHaveLength(0);
    expect(await balanceOf(accountId)).toBe(before);
    expect(await requestLog(accountId)).toEqual([]);
    const generation = await fetch(`${t.url}/v1/generation?id=${ids[0]}`, { headers: { "x-api-key": key } });
    expect(generation.status).toBe(404);
    await generation.body?.cancel();
  });
});

describe("x-gateway-request-id of a Messages request", () => {
  it("resolves in GET /v1/generation, streamed or not, at the billed cost", async () => {
    const { key } = await fundedAccount();
    const request = { model: "claude-sonnet-5-5", max_tokens: 100, messages: [{ role: "user" as const, content: "look me up" }] };
    const { response } = await anthropic(key).messages.create(request).withResponse();
    const id = response.headers.get("x-gateway-request-id")!;
    const lookup = await fetch(`${t.url}/v1/generation?id=${id}`, { headers: { "x-api-key": key } });
    expect(lookup.status).toBe(200);
    const record = ((await lookup.json()) as any).data;
    expect(record).toMatchObject({ gateway_request_id: id, model: "claude-sonnet-5-5", status: "success", streamed: false });
    expect(usdToNano(String(record.total_cost))).toBe(usdToNano(response.headers.get("x-gateway-cost")!));

    const streamed = await anthropic(key).messages.create({ ...request, stream: true }).withResponse();
    for await (const _event of streamed.data);
    const streamedId = streamed.response.headers.get("x-gateway-request-id")!;
    const again = await fetch(`${t.url}/v1/generation?id=${streamedId}`, { headers: { "x-api-key": key } });
    expect(((await again.json()) as any).data).toMatchObject({ gateway_request_id: streamedId, streamed: true, status: "success" });
  });
});

/** A funded account for these tests ($10). */
function fundedAccount() {
  return t.newAccountWithKey({ credit: 10 });
}
