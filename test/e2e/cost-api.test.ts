import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { computeUsage, type FakeDirective } from "../fake-upstream/openai.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage, type CostBreakdown } from "../../src/plugins/metering/cost.ts";
import { readChatUsage } from "../../src/formats/openai-chat/relay.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";
import { createLogger } from "../../src/core/log.ts";
import { createSqliteRepository } from "../../src/plugins/storage/sqlite/repository.ts";
import type { Generation, Repository } from "../../src/plugins/storage/repository.ts";
import { hashApiKey, maskApiKey, generateApiKey } from "../../src/plugins/auth/keys.ts";

const catalog = loadCatalog("catalog.yaml");

let t: TestGateway;
let dbPath: string;
beforeAll(async () => {
  // Shared holds: some tests write generations with chosen timestamps through a second repository on the file.
  t = await startTestGateway({ env: { SQLITE_HOLDS: "shared" } });
  dbPath = join(t.dataDir, "gateway.db");
});
afterAll(async () => {
  await t.stop();
});

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------

/** The exact nano-USD cost breakdown the gateway must bill for a fake-upstream usage on a model. */
function expectedCost(model: string, usage: Parameters<typeof readChatUsage>[0]): CostBreakdown {
  const normalized = readChatUsage(usage)!;
  return priceUsage(normalized, catalog.pricesFor(catalog.get(model)!, normalized.inputTokens, new Date()));
}

/** A decimal JSON number's source text (plain or exponent form) as exact nano-USD. */
function nanoOf(source: string): number {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(source);
  if (!match) throw new Error(`not a JSON number: ${source}`);
  const [, sign = "", whole = "", fraction = "", exponent = "0"] = match;
  const digits = whole + fraction;
  const point = whole.length + Number(exponent); // the decimal point sits after this many digits
  const padded =
    point <= 0 ? "0." + "0".repeat(-point) + digits
    : point >= digits.length ? digits + "0".repeat(point - digits.length)
    : digits.slice(0, point) + "." + digits.slice(point);
  return usdToNano(sign + padded);
}

interface ApiAnswer {
  status: number;
  headers: Headers;
  /** The parsed body. */
  body: any;
  /** The same body with every number left as its JSON source text (for exact money checks). */
  exact: any;
}

/** GET on the gateway with the key in `Authorization: Bearer` (default) or `x-api-key`. */
async function get(path: string, key?: string, how: "bearer" | "x-api-key" = "bearer"): Promise<ApiAnswer> {
  const headers: Record<string, string> = {};
  if (key !== undefined) headers[how === "bearer" ? "authorization" : "x-api-key"] = how === "bearer" ? `Bearer ${key}` : key;
  const response = await fetch(t.url + path, { headers });
  const text = await response.text();
  const reviver = (_key: string, value: unknown, context?: { source?: string }) => (typeof value === "number" ? context!.source : value);
  return { status: response.status, headers: response.headers, body: JSON.parse(text), exact: (JSON.parse as any)(text, reviver) };
}

async function newKey(accountId: string, key: Record<string, unknown> = {}): Promise<{ keyId: string; key: string; label: string }> {
  const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "extra key", ...key });
  if (created.status !== 201) throw new Error(JSON.stringify(created.body));
  return { keyId: created.body.data.id, key: created.body.data.key, label: created.body.data.label };
}

function expectError(answer: ApiAnswer, status: number, code: string, type?: string) {
  expect(answer.status).toBe(status);
  expect(Object.keys(answer.body)).toEqual(["error"]);
  expect(typeof answer.body.error.message).toBe("string");
  expect(answer.body.error.message.length).toBeGreaterThan(0);
  expect(answer.body.error.code).toBe(code);
  expect(typeof answer.body.error.type).toBe("string");
  if (type) expect(answer.body.error.type).toBe(type);
}

const directive = (d: FakeDirective) => `[[fake ${JSON.stringify(d)}]]`;
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const DAY_MS = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Sleeps until just after the next whole second (the cost API counts in one-second windows). */
const nextSecond = () => sleep(1000 - (Date.now() % 1000) + 5);

/** A second repository on the gateway's own SQLite file: writes rows with chosen timestamps, then flushes and closes. */
async function withSecondRepository<T>(use: (repo: Repository) => Promise<T> | T): Promise<T> {
  const repo = createSqliteRepository(dbPath, { log: createLogger("test-second-repo", { silent: true }) });
  try {
    const result = await use(repo);
    await repo.flush();
    return result;
  } finally {
    await repo.close();
  }
}

function generationRow(g: Partial<Generation> & Pick<Generation, "accountId" | "keyId" | "model" | "createdAt">): Generation {
  const inputCost = g.inputCost ?? 0;
  const cacheReadCost = g.cacheReadCost ?? 0;
  const cacheWriteCost = g.cacheWriteCost ?? 0;
  const outputCost = g.outputCost ?? 0;
  return {
    id: "gen-" + crypto.randomUUID().replaceAll("-", ""),
    responseId: null,
    provider: "openai",
    ingress: "openai-chat",
    stream: false,
    status: "success",
    errorCode: null,
    latencyMs: 321,
    timeToFirstTokenMs: 123,
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    ...g,
    inputCost,
    cacheReadCost,
    cacheWriteCost,
    outputCost,
    totalCost: inputCost + cacheReadCost + cacheWriteCost + outputCost,
  };
}

/** Checks the spec's generation record: every field, its type, the cost rules, in exact nano-USD. */
function expectGenerationRecord(answer: ApiAnswer, expected: { id: string; gatewayRequestId: string; model: string; cost: CostBreakdown; usage: any; mine: boolean }) {
  expect(answer.status).toBe(200);
  expect(Object.keys(answer.body)).toEqual(["data"]);
  const data = answer.body.data;
  const exact = answer.exact.data;
  expect(data).toMatchObject({
    id: expected.id,
    gateway_request_id: expected.gatewayRequestId,
    model: expected.model,
    status: "success",
    made_with_this_key: expected.mine,
    currency: "USD",
  });
  expect(data.created_at).toMatch(ISO_WITH_OFFSET);
  expect(Number.isInteger(data.latency_ms) && data.latency_ms >= 0).toBe(true);
  expect(Number.isInteger(data.time_to_first_token_ms) && data.time_to_first_token_ms >= 0).toBe(true);
  expect(data.time_to_first_token_ms).toBeLessThanOrEqual(data.latency_ms);
  const u = expected.usage;
  expect(data.usage).toEqual({
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0,
    cache_write_tokens: u.prompt_tokens_details?.cache_write_tokens ?? 0,
    // An OpenAI-format upstream reports no lifetimes: every write is a 5-minute one.
    cache_write_tokens_details: { ephemeral_5m: u.prompt_tokens_details?.cache_write_tokens ?? 0, ephemeral_1h: 0 },
    reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? 0,
  });
  const { cache_write_tokens_details: lifetimes, ...counts } = data.usage;
  for (const value of [...Object.values(counts), ...Object.values(lifetimes)]) expect(Number.isInteger(value)).toBe(true);
  expect(Object.keys(data.cost_breakdown).sort()).toEqual(["cache_read", "cache_write", "input", "output"]);
  const c = expected.cost;
  const breakdown = exact.cost_breakdown;
  expect(nanoOf(exact.cache_discount)).toBe(c.cacheDiscount);
  expect(nanoOf(breakdown.input)).toBe(c.inputCost + c.cacheReadCost + c.cacheWriteCost);
  expect(nanoOf(breakdown.cache_read)).toBe(c.cacheReadCost);
  expect(nanoOf(breakdown.cache_write)).toBe(c.cacheWriteCost);
  expect(nanoOf(breakdown.output)).toBe(c.outputCost);
  expect(nanoOf(exact.total_cost)).toBe(c.totalCost);
  // Spec rules: input already includes cache_read and cache_write; total_cost = input + output.
  expect(nanoOf(exact.total_cost)).toBe(nanoOf(breakdown.input) + nanoOf(breakdown.output));
  expect(nanoOf(breakdown.input)).toBeGreaterThanOrEqual(nanoOf(breakdown.cache_read) + nanoOf(breakdown.cache_write));
}

// ------------------------------------------------------------------------------------------------
// GET /v1/generation
// ------------------------------------------------------------------------------------------------

describe("GET /v1/generation", () => {
  it("returns every field of a non-streamed request at once, by request id and by chat-completion id, at the exact cost", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    const d = { usage: { prompt_tokens: 1237, completion_tokens: 411, cached_tokens: 203, cache_write_tokens: 97, reasoning_tokens: 59 }, delay_ms: 20 };
    const request = { model: "gpt-6.2-sol", messages: [{ role: "user" as const, content: `cost me ${directive(d)}` }] };
    const before = Date.now();
    const { data: completion, response } = await t.client(key).chat.completions.create(request).withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;
    const cost = expectedCost("gpt-6.2-sol", computeUsage(request, d));
    expect(cost.cacheReadCost).toBeGreaterThan(0);
    expect(cost.cacheWriteCost).toBeGreaterThan(0);

    // Immediately after the response: no waiting, no retry.
    const byRequestId = await get(`/v1/generation?id=${requestId}`, key);
    const expected = { id: completion.id, gatewayRequestId: requestId, model: "gpt-6.2-sol", cost, usage: computeUsage(request, d), mine: true };
    expectGenerationRecord(byRequestId, expected);
    expect(byRequestId.body.data.latency_ms).toBeGreaterThanOrEqual(20);
    const created = Date.parse(byRequestId.body.data.created_at);
    expect(created).toBeGreaterThanOrEqual(before - 5);
    expect(created).toBeLessThanOrEqual(Date.now());
    // The cost header and the record agree.
    expect(usdToNano(response.headers.get("x-gateway-cost")!)).toBe(cost.totalCost);

    // OpenRouter's convention: the completion's id is the request id, whatever the upstream called it.
    expect(completion.id).toBe(requestId);
    const byCompletionId = await get(`/v1/generation?id=${encodeURIComponent(completion.id)}`, key);
    expect(byCompletionId.body).toEqual(byRequestId.body);
  });

  it("keeps every upstream attempt on the record: one deployment, one attempt that answered, in /v1/generation and the admin request log", async () => {
    const { key, accountId } = await t.newAccountWithKey({ credit: 10 });
    const d = { usage: { prompt_tokens: 12, completion_tokens: 3 }, delay_ms: 15 };
    const request = { model: "gpt-6.2-sol", messages: [{ role: "user" as const, content: `attempts ${directive(d)}` }] };
    const { response } = await t.client(key).chat.completions.create(request).withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;

    const record = (await get(`/v1/generation?id=${requestId}`, key)).body.data;
    expect(record.attempts).toHaveLength(1);
    const [attempt] = record.attempts;
    expect(Object.keys(attempt).sort()).toEqual(["deployment", "error_class", "latency_ms", "status"]);
    expect(attempt).toMatchObject({ status: 200, error_class: null });
    expect(attempt.deployment).toBe("openai#1");
    expect(Number.isInteger(attempt.latency_ms)).toBe(true);
    expect(attempt.latency_ms).toBeGreaterThanOrEqual(15);
    expect(attempt.latency_ms).toBeLessThanOrEqual(record.latency_ms);
    expect(record.deployment).toBe(attempt.deployment);

    // The admin request log shows the same, queued or stored.
    const log = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests`);
    const row = log.body.data.find((r: { id: string }) => r.id === requestId);
    expect(row).toMatchObject({ deployment: attempt.deployment, attempts: record.attempts });
  });

  it("finds a STREAMED request the moment its stream ends, by the request id header and by the chunk id", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    const d = { usage: { prompt_tokens: 3001, completion_tokens: 777, cached_tokens: 1499, cache_write_tokens: 13, reasoning_tokens: 101 }, chunk_delay_ms: 5 };
    const request = { model: "deepseek-v4-pro", messages: [{ role: "user" as const, content: `stream me ${directive(d)}` }] };
    const { data: stream, response } = await t.client(key).chat.completions.create({ ...request, stream: true }).withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;
    expect(requestId).toMatch(/^gen-/);
    expect(response.headers.get("x-gateway-cost")).toBeNull();
    const chunkIds = new Set<string>();
    for await (const chunk of stream) chunkIds.add(chunk.id);
    expect([...chunkIds]).toEqual([requestId]);
    const chunkId = requestId;

    const byRequestId = await get(`/v1/generation?id=${requestId}`, key);
    const cost = expectedCost("deepseek-v4-pro", computeUsage(request, d));
    expectGenerationRecord(byRequestId, { id: chunkId, gatewayRequestId: requestId, model: "deepseek-v4-pro", cost, usage: computeUsage(request, d), mine: true });
    expect(byRequestId.body.data.time_to_first_token_ms).toBeLessThan(byRequestId.body.data.latency_ms);

    const byChunkId = await get(`/v1/generation?id=${encodeURIComponent(chunkId)}`, key);
    expect(byChunkId.body).toEqual(byRequestId.body);
  });

  it("lets any key of the account look up any request of the account (made_with_this_key false)", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const other = await newKey(accountId);
    const { data: completion, response } = await t
      .client(key)
      .chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "shared" }] })
      .withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;
    const mine = await get(`/v1/generation?id=${requestId}`, key);
    const theirs = await get(`/v1/generation?id=${requestId}`, other.key, "x-api-key");
    expect(mine.body.data.made_with_this_key).toBe(true);
    expect(theirs.status).toBe(200);
    expect(theirs.body.data.made_with_this_key).toBe(false);
    expect({ ...theirs.body.data, made_with_this_key: true }).toEqual(mine.body.data);
    const byCompletionId = await get(`/v1/generation?id=${completion.id}`, other.key);
    expect(byCompletionId.body.data.gateway_request_id).toBe(requestId);
  });

  it("answers 404 not_found for another account's request, exactly as for an id that never existed", async () => {
    const a = await t.newAccountWithKey();
    const b = await t.newAccountWithKey();
    const { data: completion, response } = await t
      .client(b.key)
      .chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "private" }] })
      .withResponse();
    const foreignId = response.headers.get("x-gateway-request-id")!;
    const missingId = "gen-" + "0".repeat(32);
    const foreign = await get(`/v1/generation?id=${foreignId}`, a.key);
    const foreignByCompletion = await get(`/v1/generation?id=${completion.id}`, a.key);
    const missing = await get(`/v1/generation?id=${missingId}`, a.key);
    for (const answer of [foreign, foreignByCompletion, missing]) expectError(answer, 404, "not_found");
    // Same shape and same wording: the answer does not reveal that the id exists elsewhere.
    expect({ ...foreign.body.error, message: foreign.body.error.message.replace(foreignId, "ID") }).toEqual({
      ...missing.body.error,
      message: missing.body.error.message.replace(missingId, "ID"),
    });
    expect(foreign.headers.get("content-type")).toBe(missing.headers.get("content-type"));
    // The owner still sees it.
    expect((await get(`/v1/generation?id=${foreignId}`, b.key)).status).toBe(200);
  });

  it("answers 400 invalid_request for a missing, empty or malformed id", async () => {
    const { key } = await t.newAccountWithKey();
    const paths = [
      "/v1/generation",
      "/v1/generation?id=",
      `/v1/generation?id=${encodeURIComponent("gen-abc def")}`,
      `/v1/generation?id=${"a".repeat(300)}`,
      `/v1/generation?id=${encodeURIComponent("gen-1;drop table")}`,
      `/v1/generation?id=${encodeURIComponent("ü-gen")}`,
    ];
    for (const path of paths) expectError(await get(path, key), 400, "invalid_request", "invalid_request_error");
  });

  it("stores a response id only where the client's id is not the request id: chat and Messages none, a relayed Responses answer its resp_ id", async () => {
    const { key } = await t.newAccountWithKey();
    const post = (path: string, body: unknown) =>
      fetch(`${t.url}${path}`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });
    const chat = await post("/v1/chat/completions", { model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] });
    const messages = await post("/v1/messages", { model: "gpt-6-luna", max_tokens: 50, messages: [{ role: "user", content: "hi" }] });
    const responses = await post("/v1/responses", { model: "gpt-6.2-sol", input: "hi" });
    expect([chat.status, messages.status, responses.status]).toEqual([200, 200, 200]);
    const [chatId, messagesId, responsesId] = [chat, messages, responses].map((r) => r.headers.get("x-gateway-request-id")!);
    expect(((await chat.json()) as { id: string }).id).toBe(chatId!);
    const responsesAnswerId = ((await responses.json()) as { id: string }).id;
    expect(responsesAnswerId).toMatch(/^resp_/);
    expect(responsesAnswerId).not.toBe(`resp_${responsesId!.slice(4)}`); // the upstream's own id, relayed

    const db = new Database(dbPath, { readonly: true });
    try {
      const stored = () => db.query<{ id: string; response_id: string | null }, string[]>("select id, response_id from generations where id in (?, ?, ?)").all(chatId!, messagesId!, responsesId!);
      for (let waited = 0; stored().length < 3 && waited < 2000; waited += 10) await Bun.sleep(10);
      expect(Object.fromEntries(stored().map((row) => [row.id, row.response_id]))).toEqual({ [chatId!]: null, [messagesId!]: null, [responsesId!]: responsesAnswerId });
      // Looked up by that id through the partial index, which only such rows enter.
      const plan = db.query("explain query plan select id from generations where account_id = ? and response_id = ?").all("acct_x", responsesAnswerId);
      expect(JSON.stringify(plan)).toContain("generations_account_response_idx");
    } finally {
      db.close();
    }
    expect((await get(`/v1/generation?id=${encodeURIComponent(responsesAnswerId)}`, key)).body.data.gateway_request_id).toBe(responsesId);
  });

  it("records a failed upstream call with status other than success and zero cost", async () => {
    const { key } = await t.newAccountWithKey();
    const error = (await t
      .client(key)
      .chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: directive({ status: 500, error: "boom" }) }] })
      .catch((e) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error.status).toBeGreaterThanOrEqual(500);
    const requestId = error.headers!.get("x-gateway-request-id")!;
    const answer = await get(`/v1/generation?id=${requestId}`, key);
    expect(answer.status).toBe(200);
    expect(answer.body.data.status).not.toBe("success");
    expect(nanoOf(answer.exact.data.total_cost)).toBe(0);
  });
});

// ------------------------------------------------------------------------------------------------
// GET /v1/usage
// ------------------------------------------------------------------------------------------------

const COUNTER_KEYS = ["cache_write_tokens", "cached_tokens", "completion_tokens", "cost", "failed_requests", "prompt_tokens", "requests", "successful_requests"];

function counters(rows: Generation[]) {
  const sum = (f: (g: Generation) => number) => rows.reduce((total, g) => total + f(g), 0);
  return {
    cost: nanoToUsd(sum((g) => g.totalCost)),
    requests: rows.length,
    successful_requests: rows.filter((g) => g.status === "success").length,
    failed_requests: rows.filter((g) => g.status !== "success").length,
    prompt_tokens: sum((g) => g.promptTokens),
    completion_tokens: sum((g) => g.completionTokens),
    cached_tokens: sum((g) => g.cachedTokens),
    cache_write_tokens: sum((g) => g.cacheWriteTokens),
  };
}

describe("GET /v1/usage", () => {
  it("splits usage by UTC day across midnight, per model, end day inclusive, and per key with scope=key", async () => {
    const { accountId, keyId, key } = await t.newAccountWithKey({ credit: 50 });
    const second = await newKey(accountId);
    const at = (iso: string) => Date.parse(iso);
    const rows = {
      beforeWindow: generationRow({ accountId, keyId, model: "gpt-6-luna", createdAt: at("2026-03-30T23:59:59.999Z"), promptTokens: 1, inputCost: 100 }),
      lastOfDay: generationRow({
        accountId, keyId, model: "gpt-6-luna", createdAt: at("2026-03-31T23:59:59.900Z"),
        promptTokens: 1001, completionTokens: 333, cachedTokens: 101, cacheWriteTokens: 7, reasoningTokens: 3,
        inputCost: 89_300, cacheReadCost: 1_010, cacheWriteCost: 875, outputCost: 166_500,
      }),
      firstOfDay: generationRow({
        accountId, keyId, model: "gpt-6-luna", createdAt: at("2026-04-01T00:00:00.100Z"),
        promptTokens: 2003, completionTokens: 71, cachedTokens: 999, cacheWriteTokens: 1,
        inputCost: 100_300, cacheReadCost: 9_990, cacheWriteCost: 125, outputCost: 35_500,
      }),
      otherModelOtherKey: generationRow({
        accountId, keyId: second.keyId, model: "deepseek-flash", createdAt: at("2026-04-01T00:00:00.100Z"),
        promptTokens: 777, completionTokens: 55, cachedTokens: 333,
        inputCost: 133_200, cacheReadCost: 1_998, outputCost: 66_000,
      }),
      failed: generationRow({ accountId, keyId, model: "gpt-6-luna", createdAt: at("2026-04-01T13:14:15.016Z"), status: "failed", errorCode: "upstream_error" }),
      afterWindow: generationRow({ accountId, keyId, model: "gpt-6-luna", createdAt: at("2026-04-02T00:00:00.000Z"), promptTokens: 1, inputCost: 100 }),
    };
    await withSecondRepository((repo) => {
      for (const row of Object.values(rows)) repo.recordGeneration(row);
    });

    const report = await get("/v1/usage?start_date=2026-03-31&end_date=2026-04-01", key);
    expect(report.status).toBe(200);
    const day1 = [rows.lastOfDay];
    const day2 = [rows.firstOfDay, rows.otherModelOtherKey, rows.failed];
    expect(report.body).toEqual({
      data: {
        scope: "account",
        start_date: "2026-03-31",
        end_date: "2026-04-01",
        currency: "USD",
        total: counters([...day1, ...day2]),
        days: [
          { date: "2026-03-31", ...counters(day1), models: { "gpt-6-luna": counters(day1) } },
          {
            date: "2026-04-01",
            ...counters(day2),
            models: { "gpt-6-luna": counters([rows.firstOfDay, rows.failed]), "deepseek-flash": counters([rows.otherModelOtherKey]) },
          },
        ],
      },
    });
    expect(Object.keys(report.body.data.total).sort()).toEqual(COUNTER_KEYS);
    expect(report.body.data.days[1].failed_requests).toBe(1);

    // scope=key: only the calling key's requests.
    const mine = await get("/v1/usage?start_date=2026-03-31&end_date=2026-04-01&scope=key", key);
    expect(mine.body.data.scope).toBe("key");
    expect(mine.body.data.total).toEqual(counters([rows.lastOfDay, rows.firstOfDay, rows.failed]));
    expect(mine.body.data.days.map((day: any) => Object.keys(day.models))).toEqual([["gpt-6-luna"], ["gpt-6-luna"]]);
    const theirs = await get("/v1/usage?start_date=2026-03-31&end_date=2026-04-01&scope=key", second.key, "x-api-key");
    expect(theirs.body.data.total).toEqual(counters([rows.otherModelOtherKey]));
    expect(theirs.body.data.days).toEqual([
      { date: "2026-04-01", ...counters([rows.otherModelOtherKey]), models: { "deepseek-flash": counters([rows.otherModelOtherKey]) } },
    ]);
    // The same key asking for scope=account sees the whole account.
    expect((await get("/v1/usage?start_date=2026-03-31&end_date=2026-04-01&scope=account", second.key)).body.data.total).toEqual(report.body.data.total);

    // A wider window picks up the neighbouring days; a one-day window only its day.
    const wide = await get("/v1/usage?start_date=2026-03-30&end_date=2026-04-02", key);
    expect(wide.body.data.days.map((day: any) => day.date)).toEqual(["2026-03-30", "2026-03-31", "2026-04-01", "2026-04-02"]);
    expect(wide.body.data.total).toEqual(counters(Object.values(rows)));
    const oneDay = await get("/v1/usage?start_date=2026-04-02&end_date=2026-04-02", key);
    expect(oneDay.body.data.total).toEqual(counters([rows.afterWindow]));

    // The inserted record is also a generation record, with its timestamp kept to the millisecond.
    const record = await get(`/v1/generation?id=${rows.lastOfDay.id}`, key);
    expect(record.body.data.created_at).toMatch(/^2026-03-31T23:59:59\.900(Z|\+00:00)$/);
    expect(nanoOf(record.exact.data.cost_breakdown.input)).toBe(89_300 + 1_010 + 875);
  });

  it("defaults to the 30 UTC days ending today and counts live requests, failed ones at zero cost", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const other = await newKey(accountId);
    const d = { usage: { prompt_tokens: 999, completion_tokens: 101, cached_tokens: 333, cache_write_tokens: 11 } };
    const request = { model: "grok-4.7", messages: [{ role: "user" as const, content: directive(d) }] };
    await t.client(key).chat.completions.create(request);
    await t.client(other.key).chat.completions.create(request);
    const failure = await t
      .client(key)
      .chat.completions.create({ model: "grok-4.7", messages: [{ role: "user", content: directive({ status: 500 }) }] })
      .catch((e) => e);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    const cost = expectedCost("grok-4.7", computeUsage(request, d)).totalCost;

    const now = Date.now();
    const today = utcDay(now);
    const report = await get("/v1/usage", key);
    expect(report.status).toBe(200);
    expect(report.body.data).toMatchObject({ scope: "account", start_date: utcDay(now - 29 * DAY_MS), end_date: today, currency: "USD" });
    expect(report.body.data.days.length).toBe(1);
    const day = report.body.data.days[0];
    expect(day.date).toBe(today);
    expect(nanoOf(report.exact.data.total.cost)).toBe(2 * cost);
    expect(report.body.data.total).toMatchObject({
      requests: 3,
      successful_requests: 2,
      failed_requests: 1,
      prompt_tokens: 2 * 999,
      completion_tokens: 2 * 101,
      cached_tokens: 666,
      cache_write_tokens: 22,
    });
    expect(day.models["grok-4.7"]).toEqual(report.body.data.total);

    const keyOnly = await get("/v1/usage?scope=key", key);
    expect(keyOnly.body.data.total).toMatchObject({ requests: 2, successful_requests: 1, failed_requests: 1, prompt_tokens: 999 });
    expect(nanoOf(keyOnly.exact.data.total.cost)).toBe(cost);

    // Only end_date: the window starts 29 days before it. Only start_date: it ends today.
    expect((await get("/v1/usage?end_date=2026-04-01", key)).body.data).toMatchObject({ start_date: "2026-03-03", end_date: "2026-04-01" });
    const fromYesterday = await get(`/v1/usage?start_date=${utcDay(now - DAY_MS)}`, key);
    expect(fromYesterday.body.data).toMatchObject({ start_date: utcDay(now - DAY_MS), end_date: today });
  });

  it("accepts a 92-day window and refuses 93 days, bad dates, reversed windows and bad scopes with 400 invalid_request", async () => {
    const { key } = await t.newAccountWithKey();
    const ok = await get("/v1/usage?start_date=2026-01-01&end_date=2026-04-02", key); // 31 + 28 + 31 + 2 = 92 days
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({ start_date: "2026-01-01", end_date: "2026-04-02", days: [] });
    expect(ok.body.data.total).toEqual({ cost: 0, requests: 0, successful_requests: 0, failed_requests: 0, prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 });
    expect((await get("/v1/usage?start_date=2026-04-01&end_date=2026-04-01", key)).status).toBe(200);

    const bad = [
      "start_date=2025-12-31&end_date=2026-04-02", // 93 days
      "start_date=2025-01-01&end_date=2026-04-02",
      "start_date=2026-02-30&end_date=2026-03-01", // no such day
      "start_date=2026-01-01&end_date=2026-02-29", // 2026 is not a leap year
      "start_date=2026-13-01",
      "start_date=2026-1-5&end_date=2026-02-01",
      "start_date=20261105",
      "end_date=2026-04-01T00:00:00Z",
      "end_date=",
      "start_date=2026-04-02&end_date=2026-04-01", // start after end
      "scope=all",
      "scope=KEY",
      "scope=",
    ];
    for (const query of bad) {
      const answer = await get(`/v1/usage?${query}`, key);
      expectError(answer, 400, "invalid_request", "invalid_request_error");
    }
    // 2024 was a leap year.
    expect((await get("/v1/usage?start_date=2024-02-29&end_date=2024-03-01", key)).status).toBe(200);
  });
});

// ------------------------------------------------------------------------------------------------
// GET /v1/credits and GET /v1/key
// ------------------------------------------------------------------------------------------------

describe("GET /v1/credits", () => {
  it("reports credits with bonus included, usage and balance = credits - usage exactly", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const bonus = await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: "2.345678901", kind: "bonus", reference: crypto.randomUUID() });
    expect(bonus.status).toBe(201);

    const fresh = await get("/v1/credits", key);
    expect(fresh.body).toEqual({ data: { total_credits: 12.345678901, total_usage: 0, balance: 12.345678901, currency: "USD" } });

    let spent = 0;
    for (const [model, usage] of [
      ["gpt-6.2-sol", { prompt_tokens: 1111, completion_tokens: 333, cached_tokens: 77, cache_write_tokens: 5 }],
      ["deepseek-flash", { prompt_tokens: 12345, completion_tokens: 6789, cached_tokens: 4321 }],
    ] as const) {
      const request = { model, messages: [{ role: "user" as const, content: directive({ usage }) }] };
      await t.client(key).chat.completions.create(request);
      spent += expectedCost(model, computeUsage(request, { usage })).totalCost;
    }
    const answer = await get("/v1/credits", key, "x-api-key");
    expect(answer.status).toBe(200);
    expect(answer.body.data.currency).toBe("USD");
    const credits = nanoOf(answer.exact.data.total_credits);
    const usage = nanoOf(answer.exact.data.total_usage);
    expect(credits).toBe(usdToNano("12.345678901"));
    expect(usage).toBe(spent);
    expect(nanoOf(answer.exact.data.balance)).toBe(credits - usage);
    const account = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
    expect(usdToNano(String(account.body.data.balance))).toBe(credits - usage);
  });
});

describe("GET /v1/key", () => {
  it("describes the calling key: masked label, usage, limit, rate limits, models, dates", async () => {
    const { accountId, key, keyId } = await t.newAccountWithKey({ credit: 10 });
    const expiresAt = "2031-05-06T07:08:09.010Z";
    const restricted = await newKey(accountId, {
      name: "ci runner",
      limit: 1.5,
      models: ["gpt-6-luna", "deepseek-flash"],
      rate_limit: { requests_per_minute: 600, tokens_per_minute: 1_000_000 },
      expires_at: expiresAt,
    });
    const usage = { prompt_tokens: 4321, completion_tokens: 1234, cached_tokens: 17 };
    const request = { model: "gpt-6-luna", messages: [{ role: "user" as const, content: directive({ usage }) }] };
    await t.client(restricted.key).chat.completions.create(request);
    const cost = expectedCost("gpt-6-luna", computeUsage(request, { usage })).totalCost;

    const before = Date.now();
    const answer = await get("/v1/key", restricted.key);
    expect(answer.status).toBe(200);
    const data = answer.body.data;
    expect(Object.keys(data).sort()).toEqual(["blocked", "created_at", "expires_at", "label", "limit", "limit_remaining", "models", "name", "rate_limit", "usage"]);
    expect(data).toMatchObject({
      name: "ci runner",
      label: restricted.label,
      limit: 1.5,
      rate_limit: { requests_per_minute: 600, tokens_per_minute: 1_000_000 },
      models: ["gpt-6-luna", "deepseek-flash"],
      blocked: false,
    });
    expect(data.label).not.toContain(restricted.key);
    expect(data.label.length).toBeLessThan(restricted.key.length);
    expect(JSON.stringify(answer.body)).not.toContain(restricted.key);
    expect(nanoOf(answer.exact.data.usage)).toBe(cost);
    expect(nanoOf(answer.exact.data.limit_remaining)).toBe(usdToNano("1.5") - cost);
    expect(data.created_at).toMatch(ISO_WITH_OFFSET);
    expect(Date.parse(data.created_at)).toBeLessThanOrEqual(before);
    expect(data.expires_at).toMatch(ISO_WITH_OFFSET);
    expect(Date.parse(data.expires_at)).toBe(Date.parse(expiresAt));

    // A plain key: no limit, no rate limit, every model, no expiry, and only its own usage.
    const plain = await get("/v1/key", key, "x-api-key");
    expect(plain.body.data).toMatchObject({
      name: "test key",
      usage: 0,
      limit: null,
      limit_remaining: null,
      rate_limit: { requests_per_minute: null, tokens_per_minute: null },
      models: null,
      blocked: false,
      expires_at: null,
    });
    expect(plain.body.data.label).not.toContain(key);
    expect(keyId).not.toBe(restricted.keyId);
  });
});

// ------------------------------------------------------------------------------------------------
// Authentication, rate limit, store failures
// ------------------------------------------------------------------------------------------------

describe("authentication on the cost and usage endpoints", () => {
  it("accepts Bearer and x-api-key and refuses missing, unknown, malformed, expired and deleted keys with 401 invalid_api_key", async () => {
    const { accountId, key } = await t.newAccountWithKey();
    const { response } = await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] }).withResponse();
    const paths = ["/v1/generation?id=" + response.headers.get("x-gateway-request-id"), "/v1/usage", "/v1/credits", "/v1/key"];

    // Expired: the admin API refuses a past expiry, so the key is written to the store directly.
    const expiredSecret = generateApiKey();
    await withSecondRepository((repo) =>
      repo.createKey({
        id: "key_expired" + crypto.randomUUID().replaceAll("-", "").slice(0, 12),
        accountId,
        name: "expired",
        keyHash: hashApiKey(expiredSecret),
        label: maskApiKey(expiredSecret),
        limit: null,
        models: null,
        requestsPerMinute: null,
        tokensPerMinute: null,
        expiresAt: Date.now() - 1000,
      }),
    );
    // Deleted: used first (so it is cached), then revoked.
    const deleted = await newKey(accountId);
    for (const path of paths) expect((await get(path, deleted.key)).status).toBe(200);
    expect((await t.admin("DELETE", `/admin/v1/keys/${deleted.keyId}`)).status).toBe(200);

    for (const path of paths) {
      expect((await get(path, key, "bearer")).status).toBe(200);
      expect((await get(path, key, "x-api-key")).status).toBe(200);
      const refused = [
        await get(path),
        await get(path, "sk-gw-" + "x".repeat(40)),
        await get(path, "sk-gw-" + "x".repeat(40), "x-api-key"),
        await fetch(t.url + path, { headers: { authorization: `Basic ${key}` } }).then(async (r) => ({ status: r.status, headers: r.headers, body: await r.json(), exact: null })),
        await get(path, expiredSecret),
        await get(path, deleted.key),
        await get(path, deleted.key, "x-api-key"),
      ];
      for (const answer of refused) expectError(answer, 401, "invalid_api_key", "authentication_error");
    }
  });
});

describe("rate limit of the cost and usage endpoints", () => {
  it("allows about 30 requests per second per key across the four endpoints, then 429 with retry-after, apart from inference", async () => {
    const { key, accountId } = await t.newAccountWithKey();
    const other = await newKey(accountId);
    const paths = ["/v1/usage", "/v1/credits", "/v1/key", "/v1/generation?id=gen-" + "0".repeat(32)];
    await nextSecond();
    const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => get(paths[i % 4]!, key)));
    const limited = burst.filter((answer) => answer.status === 429);
    expect(burst.length - limited.length).toBe(30);
    expect(limited.length).toBe(10);
    for (const answer of limited) {
      expectError(answer, 429, "rate_limit_exceeded", "rate_limit_error");
      expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
    // Inference with the same key and the cost API with another key are not held back.
    const completion = await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "still fine" }] });
    expect(completion.choices[0]!.message.content).toBe("Hello from gpt-6-luna.");
    expect((await get("/v1/credits", other.key)).status).toBe(200);
    // After the advertised wait the key is served again.
    await sleep(Number(limited[0]!.headers.get("retry-after")) * 1000 - (Date.now() % 1000) + 5);
    expect((await get("/v1/credits", key)).status).toBe(200);
  });
});

describe("store failures", () => {
  it("keeps answering reads while another connection holds the SQLite write lock", async () => {
    const { key } = await t.newAccountWithKey({ credit: 7 });
    const holder = new Database(dbPath);
    try {
      holder.exec("BEGIN EXCLUSIVE");
      const started = performance.now();
      const answer = await get("/v1/credits", key);
      expect(answer.status).toBe(200);
      expect(answer.body.data.balance).toBe(7);
      expect(performance.now() - started).toBeLessThan(500); // WAL readers do not wait for the writer
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
  });

  it("answers 503 unavailable with a retry hint while the store cannot answer, and recovers", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const uncached = await newKey(accountId); // never used: verifying it needs the store
    const { response } = await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "before outage" }] }).withResponse();
    const paths = ["/v1/generation?id=" + response.headers.get("x-gateway-request-id"), "/v1/usage", "/v1/credits", "/v1/key"];
    const healthy = await Promise.all(paths.map((path) => get(path, key)));
    for (const answer of healthy) expect(answer.status).toBe(200);
    await sleep(30); // the metering group commit has written the request

    // Break the store for real: another connection takes the tables away (and later puts them back).
    const tables = ["accounts", "api_keys", "generations", "usage_daily"];
    const operator = new Database(dbPath);
    operator.exec("PRAGMA busy_timeout = 2000");
    const rename = (from: (t: string) => string, to: (t: string) => string) =>
      operator.transaction(() => {
        for (const table of tables) operator.exec(`ALTER TABLE "${from(table)}" RENAME TO "${to(table)}"`);
      }).immediate();
    rename((table) => table, (table) => `${table}_offline`);
    try {
      for (const path of paths) {
        const answer = await get(path, key);
        expectError(answer, 503, "unavailable");
        expect(Number(answer.headers.get("retry-after"))).toBeGreaterThan(0);
      }
      expectError(await get("/v1/credits", uncached.key), 503, "unavailable");
    } finally {
      rename((table) => `${table}_offline`, (table) => table);
      operator.close();
    }
    const recovered = await Promise.all(paths.map((path) => get(path, key)));
    expect(recovered.map((answer) => answer.body)).toEqual(healthy.map((answer) => answer.body));
    expect((await get("/v1/credits", uncached.key)).status).toBe(200);
  });
});

// ------------------------------------------------------------------------------------------------
// Exactness over many requests
// ------------------------------------------------------------------------------------------------

describe("exactness", () => {
  it("1000 requests: credits usage = sum of the generation records = usage report total, to the nano-dollar", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 1000 });
    const models = ["gpt-6.2-sol", "deepseek-flash", "deepseek-v4-pro", "grok-4.7", "gpt-6-luna"];
    const client = t.client(key);
    const total = 1000;
    const results: { requestId: string; model: string; cost: CostBreakdown; usage: any }[] = new Array(total);
    let next = 0;
    async function worker() {
      while (next < total) {
        const i = next++;
        const model = models[i % models.length]!;
        const prompt = 1001 + ((i * 7919) % 4999);
        const usage = {
          prompt_tokens: prompt,
          completion_tokens: 1 + ((i * 613) % 2999),
          cached_tokens: (i * 31) % 3 === 0 ? 0 : (i * 977) % Math.floor(prompt / 2),
          cache_write_tokens: i % 4 === 0 ? (i * 53) % 401 : 0,
          reasoning_tokens: (i * 11) % 97,
        };
        const request = { model, messages: [{ role: "user" as const, content: `#${i} ${directive({ usage })}` }] };
        const { response } = await client.chat.completions.create(request).withResponse();
        results[i] = { requestId: response.headers.get("x-gateway-request-id")!, model, cost: expectedCost(model, computeUsage(request, { usage })), usage: computeUsage(request, { usage }) };
      }
    }
    await Promise.all(Array.from({ length: 20 }, worker));

    // 1000 lookups stay under 30 per second per key: spread them over 40 keys of the account.
    const readers = await Promise.all(Array.from({ length: 40 }, () => newKey(accountId).then((k) => k.key)));
    let sum = 0;
    const perModel = new Map<string, number>();
    let cursor = 0;
    async function reader() {
      while (cursor < total) {
        const i = cursor++;
        const r = results[i]!;
        const answer = await get(`/v1/generation?id=${r.requestId}`, readers[i % readers.length]);
        expect(answer.status).toBe(200);
        const cost = nanoOf(answer.exact.data.total_cost);
        expect(cost).toBe(r.cost.totalCost);
        expect(cost).toBe(nanoOf(answer.exact.data.cost_breakdown.input) + nanoOf(answer.exact.data.cost_breakdown.output));
        expect(answer.body.data.usage.cached_tokens).toBe(r.usage.prompt_tokens_details.cached_tokens);
        sum += cost;
        perModel.set(r.model, (perModel.get(r.model) ?? 0) + cost);
      }
    }
    await Promise.all(Array.from({ length: 20 }, reader));
    expect(sum).toBe(results.reduce((s, r) => s + r.cost.totalCost, 0));
    expect(sum % 1000).not.toBe(0); // the costs carry nano-dollar digits

    const credits = await get("/v1/credits", key);
    const usage = await get("/v1/usage", key);
    expect(nanoOf(credits.exact.data.total_usage)).toBe(sum);
    expect(nanoOf(usage.exact.data.total.cost)).toBe(sum);
    expect(nanoOf(credits.exact.data.total_credits)).toBe(usdToNano(1000));
    expect(nanoOf(credits.exact.data.balance)).toBe(usdToNano(1000) - sum);
    expect(usage.body.data.total).toMatchObject({
      requests: total,
      successful_requests: total,
      failed_requests: 0,
      prompt_tokens: results.reduce((s, r) => s + r.usage.prompt_tokens, 0),
      completion_tokens: results.reduce((s, r) => s + r.usage.completion_tokens, 0),
      cached_tokens: results.reduce((s, r) => s + r.usage.prompt_tokens_details.cached_tokens, 0),
      cache_write_tokens: results.reduce((s, r) => s + (r.usage.prompt_tokens_details.cache_write_tokens ?? 0), 0),
    });
    // Per model, summed over days (a run across midnight UTC spans two).
    for (const model of models) {
      const fromReport = usage.exact.data.days.reduce((s: number, day: any) => s + (day.models[model] ? nanoOf(day.models[model].cost) : 0), 0);
      expect(fromReport).toBe(perModel.get(model)!);
    }
    expect(nanoOf((await get("/v1/key", key)).exact.data.usage)).toBe(sum);
  }, 30_000);
});
