import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { computeUsage } from "../fake-upstream/openai.ts";
import { computeResponsesUsage, parseResponsesDirective, type ResponsesDirective } from "../fake-upstream/responses.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { readChatUsage } from "../../src/formats/openai-chat/relay.ts";
import { readResponsesUsage } from "../../src/formats/openai-responses/usage.ts";
import type { Usage } from "../../src/core/canonical.ts";
import { expectCodexCompatible, parseSse } from "../formats/openai-responses/helpers.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";

type Json = Record<string, any>;

const catalog = loadCatalog("catalog.yaml");

function costOf(model: string, usage: Usage): number {
  return priceUsage(usage, catalog.pricesFor(catalog.get(model)!, usage.inputTokens, new Date())).totalCost;
}

const fake = (directive: ResponsesDirective) => `[[fake ${JSON.stringify(directive)}]]`;

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

async function generation(id: string, key: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${t.url}/v1/generation?id=${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, body: (await response.json()) as Json };
}

/** The request the fake upstream received on `path` (the last one). */
function upstreamRequest(path: string): Json {
  const recorded = t.fake.requests.filter((request) => request.path === path).at(-1);
  if (!recorded) throw new Error(`no upstream request on ${path}; got ${t.fake.requests.map((r) => r.path).join(", ")}`);
  return recorded.body;
}

const SHELL = { type: "function" as const, name: "shell", description: "Run a command", parameters: { type: "object", properties: { command: { type: "array", items: { type: "string" } } } }, strict: false };
const APPLY_PATCH = { type: "custom" as const, name: "apply_patch", description: "Edit files", format: { type: "grammar" as const, syntax: "lark" as const, definition: "start: begin_patch hunk+ end_patch" } };

describe("POST /v1/responses on an OpenAI model (native: the same-format relay)", () => {
  it("relays a non-streamed request to {base_url}/responses as sent and bills the exact cost", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const d: ResponsesDirective = { usage: { input_tokens: 1000, output_tokens: 300, cached_tokens: 400, cache_write_tokens: 100, reasoning_tokens: 50 } };
    const request = { model: "gpt-6.2-sol", instructions: "Be brief.", input: `Say hello. ${fake(d)}`, store: false, max_output_tokens: 4000 };
    const { data, response } = await t.client(key).responses.create(request).withResponse();
    expect(data.output_text).toBe("Hello from gpt-6.2-sol.");
    expect(data).toMatchObject({ object: "response", status: "completed", model: "gpt-6.2-sol" });
    expect(data.id).toMatch(/^resp_/);

    expect(t.fake.requests.map((r) => r.path)).toEqual(["/v1/responses"]);
    expect(upstreamRequest("/v1/responses")).toEqual(request);
    const usage = readResponsesUsage(data.usage)!;
    expect(usage).toEqual(readResponsesUsage(computeResponsesUsage(request, d))!);
    // gpt-6.2-sol: $2 in, $10 out, $0.10 cache read, $2.50 cache write per million tokens.
    const cost = costOf("gpt-6.2-sol", usage);
    expect(cost).toBe(500 * 2000 + 400 * 100 + 100 * 2500 + 300 * 10_000);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);

    const requestId = response.headers.get("x-gateway-request-id")!;
    expect(requestId).toMatch(/^gen-[0-9a-f]{32}$/);
    const byRequestId = await generation(requestId, key);
    expect(byRequestId.body.data).toMatchObject({ id: data.id, gateway_request_id: requestId, model: "gpt-6.2-sol", status: "success", streamed: false, total_cost: nanoToUsd(cost) });
    expect((await generation(data.id, key)).body).toEqual(byRequestId.body);
  });

  it("relays a stream event by event (reasoning, tool call, usage) and the next turn replays the whole history", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const d: ResponsesDirective = { reasoning: "I will list the files", tool_calls: [{ name: "shell", arguments: { command: ["ls"] } }], usage: { cached_tokens: 2 } };
    const first = {
      model: "gpt-6-luna",
      input: [{ role: "user" as const, content: `list the files ${fake(d)}` }],
      tools: [SHELL],
      reasoning: { effort: "medium" as const, summary: "auto" as const },
      include: ["reasoning.encrypted_content" as const],
      store: false,
    };
    const stream = t.client(key).responses.stream(first);
    const types: string[] = [];
    stream.on("event", (event) => types.push(event.type));
    const final = await stream.finalResponse();
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(types.filter((type) => type === "response.output_item.done").length).toBe(2);
    expect(final.output.map((item) => item.type)).toEqual(["reasoning", "function_call"]);
    const call = final.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ call_id: "call_fake0", name: "shell", arguments: '{"command":["ls"]}' });

    const usage = readResponsesUsage(final.usage)!;
    expect(usage).toEqual(readResponsesUsage(computeResponsesUsage(first, d))!);
    expect(usage.reasoningTokens).toBeGreaterThan(0);
    const firstCost = costOf("gpt-6-luna", usage);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - firstCost);

    // Codex's next turn: no previous_response_id, the full history, encrypted reasoning as OpenAI issued it.
    const history = final.output.map(({ parsed_arguments, ...item }: Json) => item);
    const second = { ...first, input: [...first.input, ...history, { type: "function_call_output", call_id: call.call_id, output: "a.txt" }], stream: true };
    const next = await t.client(key).responses.create(second as never);
    let status = "";
    for await (const event of next as unknown as AsyncIterable<Json>) if (event.type === "response.completed") status = event.response.status;
    // The fake accepted the replay: each output has its call, and the encrypted reasoning is the one it issued.
    expect(status).toBe("completed");
    expect(upstreamRequest("/v1/responses").input).toEqual(second.input);
    const secondCost = costOf("gpt-6-luna", readResponsesUsage(computeResponsesUsage(second, parseResponsesDirective(second)))!);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - firstCost - secondCost);
  });

  it("refuses previous_response_id with a 400 before any upstream call or charge", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const error = await t
      .client(key)
      .responses.create({ model: "gpt-6-luna", input: "and then?", previous_response_id: "resp_abc" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param: "previous_response_id" });
    expect(error.message).toContain("does not store responses");
    expect(t.fake.requests.length).toBe(0);
    expect(await balanceOf(accountId)).toBe(usdToNano(10));
  });

  it("passes an upstream rate limit on as a 429 in the OpenAI error shape", async () => {
    const { key } = await t.newAccountWithKey();
    const error = await t
      .client(key)
      .responses.create({ model: "gpt-6-luna", input: fake({ status: 429, headers: { "retry-after": "3" } }) })
      .catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.headers.get("retry-after")).toBe("3");
    expect(error.headers.get("x-gateway-request-id")).toMatch(/^gen-/);
  });
});

describe("POST /v1/responses on a chat-only model (translated: Responses <-> Chat)", () => {
  it("answers a non-streamed request from the chat upstream and bills the chat usage exactly", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const d = { usage: { prompt_tokens: 2000, completion_tokens: 120, cached_tokens: 1500, reasoning_tokens: 20 } };
    const { data, response } = await t
      .client(key)
      .responses.create({ model: "deepseek-flash", instructions: "You are terse.", input: `Hello? ${fake(d)}`, max_output_tokens: 500 })
      .withResponse();
    expect(data).toMatchObject({ object: "response", status: "completed", model: "deepseek-flash", output_text: "Hello from deepseek-flash." });
    expect(data.id).toMatch(/^resp_/);
    expect(data.usage).toEqual({
      input_tokens: 2000,
      input_tokens_details: { cached_tokens: 1500, cache_write_tokens: 0 },
      output_tokens: 120,
      output_tokens_details: { reasoning_tokens: 20 },
      total_tokens: 2120,
    });

    const chat = upstreamRequest("/v1/chat/completions");
    expect(chat.messages[0]).toEqual({ role: "system", content: "You are terse." });
    expect(chat.max_completion_tokens).toBe(500);
    const usage = readChatUsage(computeUsage(chat, d))!;
    // deepseek-flash: $0.30 in, $1.20 out, $0.006 cache read per million tokens.
    const cost = costOf("deepseek-flash", usage);
    expect(cost).toBe(500 * 300 + 1500 * 6 + 120 * 1200);
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - cost);

    const requestId = response.headers.get("x-gateway-request-id")!;
    const record = await generation(requestId, key);
    expect(record.status).toBe(200);
    expect(record.body.data).toMatchObject({ gateway_request_id: requestId, model: "deepseek-flash", status: "success", total_cost: nanoToUsd(cost) });
  });

  it("streams tool calls as function_call and custom_tool_call items, and the tool outputs of the next turn reach the chat upstream paired", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch";
    const d = { tool_calls: [{ name: "shell", arguments: { command: ["ls"] } }, { name: "apply_patch", arguments: { input: patch } }] };
    const first = { model: "deepseek-flash", input: [{ role: "user" as const, content: `fix it ${fake(d as never)}` }], tools: [SHELL, APPLY_PATCH], store: false };
    const { data: stream, response } = await t.client(key).responses.create({ ...first, stream: true }).withResponse();
    const events: Json[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    expect(events[0]!.type).toBe("response.created");
    const completed = events.at(-1)!;
    expect(completed.type).toBe("response.completed");
    const done = events.filter((event) => event.type === "response.output_item.done").map((event) => event.item);
    expect(done).toEqual(completed.response.output);
    expect(done.map((item) => item.type)).toEqual(["function_call", "custom_tool_call"]);
    expect(done[0]).toMatchObject({ name: "shell", arguments: '{"command":["ls"]}', status: "completed" });
    expect(done[1]).toMatchObject({ name: "apply_patch", input: patch });

    const chat = upstreamRequest("/v1/chat/completions");
    expect(chat.stream_options).toEqual({ include_usage: true });
    const usage = readChatUsage(computeUsage(chat, d as never))!;
    expect(completed.response.usage).toMatchObject({ input_tokens: usage.inputTokens, output_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens });
    const firstCost = costOf("deepseek-flash", usage);
    expect(await balanceOf(accountId)).toBe(usdToNano(10) - firstCost);
    const requestId = response.headers.get("x-gateway-request-id")!;
    expect((await generation(requestId, key)).body.data).toMatchObject({ gateway_request_id: requestId, streamed: true, total_cost: nanoToUsd(firstCost) });

    const second = {
      ...first,
      input: [
        ...first.input,
        ...done,
        { type: "function_call_output", call_id: done[0].call_id, output: "hello.txt" },
        { type: "custom_tool_call_output", call_id: done[1].call_id, output: "Done!" },
      ],
    };
    const answer = (await t.client(key).responses.create(second as never)) as Json;
    expect(answer.status).toBe("completed");
    const replayed = upstreamRequest("/v1/chat/completions").messages;
    const assistant = replayed.find((message: Json) => message.role === "assistant");
    expect(assistant.tool_calls.map((call: Json) => [call.id, call.function.name, call.function.arguments])).toEqual([
      [done[0].call_id, "shell", '{"command":["ls"]}'],
      [done[1].call_id, "apply_patch", JSON.stringify({ input: patch })],
    ]);
    expect(replayed.filter((message: Json) => message.role === "tool")).toEqual([
      { role: "tool", tool_call_id: done[0].call_id, content: "hello.txt" },
      { role: "tool", tool_call_id: done[1].call_id, content: "Done!" },
    ]);
  });

  it("streams a text answer Codex can parse (event lines, sequence numbers, every item done, completed with usage, no [DONE])", async () => {
    const { key } = await t.newAccountWithKey();
    t.fake.reset();
    const body = { model: "deepseek-flash", input: [{ role: "user", content: "stream it" }], stream: true, store: false, tools: [SHELL], tool_choice: "auto" };
    const response = await fetch(`${t.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const text = await response.text();
    expect(text).not.toContain("[DONE]");
    const items = expectCodexCompatible(parseSse(text));
    expect(items.map((item) => item.content[0].text)).toEqual(["Hello from deepseek-flash."]);
    const usage = readChatUsage(computeUsage(upstreamRequest("/v1/chat/completions")))!;
    expect(parseSse(text).at(-1)!.data.response.usage).toEqual({
      input_tokens: usage.inputTokens,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: usage.outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.inputTokens + usage.outputTokens,
    });
    // And the SDK's own stream helper assembles the same answer.
    const final = await t.client(key).responses.stream({ model: "deepseek-flash", input: "stream it" }).finalResponse();
    expect(final.output_text).toBe("Hello from deepseek-flash.");
  });

  it("reports a chat upstream's mid-stream error as response.failed with the error inside response.error", async () => {
    const { key } = await t.newAccountWithKey();
    const stream = await t
      .client(key)
      .responses.create({ model: "deepseek-flash", input: fake({ stream_error_after_chunks: 2, error: { message: "upstream exploded", code: "server_error" } }), stream: true });
    const events: Json[] = [];
    for await (const event of stream) events.push(event);
    const last = events.at(-1)!;
    expect(last.type).toBe("response.failed");
    expect(last.response.status).toBe("failed");
    expect(last.response.error).toEqual({ code: "server_error", message: "upstream exploded" });
    expect(events.some((event) => event.type === "response.completed")).toBe(false);
  });
});
