import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { computeUsage } from "../fake-upstream/openai.ts";
import { countTextTokens } from "../../src/plugins/token-count/count.ts";
import { nanoToUsd, nanoToUsdString, usdToNano } from "../../src/core/money.ts";
import { waitFor } from "../helpers/processes.ts";
import { burst, catalog, credits, exactCostRequest, topUp, worstCase, type Message } from "../helpers/budget.ts";

/**
 * Budget reservations end to end: real HTTP through the official SDK, real SQLite. A request holds
 * its worst-case cost (prompt bound at the dearest prompt price + output cap at the output price)
 * before it goes upstream; the hold is released with the exact debit, or at once when nothing is billed.
 */

let t: TestGateway;
let db: Database;
beforeAll(async () => {
  // Holds as rows of the file, so the tests can watch them; process-mode holds: budget-process-holds.test.ts.
  t = await startTestGateway({ env: { SQLITE_HOLDS: "shared" } });
  db = new Database(join(t.dataDir, "gateway.db"), { readonly: true });
}, 30_000); // a cold start on a loaded machine took 5.6 s, past bun's 5 s hook default
afterAll(async () => {
  db?.close();
  await t?.stop();
});

function reservationCount(): number {
  return db.query<{ n: number }, []>("select count(*) as n from reservations").get()!.n;
}


async function noReservationsLeft(): Promise<void> {
  await waitFor(() => reservationCount() === 0, 2_000, "the reservations table to empty");
}

function generationRow(id: string) {
  return db
    .query<{ status: string; error_code: string | null; total_cost_nano: number; completion_tokens: number; prompt_tokens: number }, [string]>(
      "select status, error_code, total_cost_nano, completion_tokens, prompt_tokens from generations where id = ?",
    )
    .get(id);
}

function generationCount(accountId: string): number {
  return db.query<{ n: number }, [string]>("select count(*) as n from generations where account_id = ?").get(accountId)!.n;
}

/** Samples the funds while `work` runs: credits − committed debits − holds must never go below zero. */
async function watchFunds<T>(sql: string, id: string, work: Promise<T>): Promise<{ result: T; lowest: number; samples: number }> {
  const query = db.query<{ available: number }, [string]>(sql);
  let lowest = Number.POSITIVE_INFINITY;
  let samples = 0;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      lowest = Math.min(lowest, query.get(id)!.available);
      samples++;
      await Bun.sleep(1);
    }
  })();
  const result = await work.finally(() => (done = true));
  await sampler;
  return { result, lowest, samples };
}

const ACCOUNT_AVAILABLE = `select a.total_credits_nano - a.total_debits_nano
    - coalesce((select sum(r.amount_nano) from reservations r where r.account_id = a.id), 0) as available
  from accounts a where a.id = ?`;
const KEY_AVAILABLE = `select k.limit_nano - k.usage_nano
    - coalesce((select sum(r.amount_nano) from reservations r where r.key_id = k.id), 0) as available
  from api_keys k where k.id = ?`;

// gpt-6.2-astra: $40 per million output tokens, so 18,000 output tokens ≈ $0.72 and 7 of them pass the $5 card minimum.
const MODEL = "gpt-6.2-astra";
const MAX_TOKENS = 18_000;

describe("concurrent requests against a balance that covers 7", () => {
  it("serves exactly 7 of 100, refuses the rest with 400 insufficient_balance, never overspends", async () => {
    const { body, reservation } = exactCostRequest(MODEL, MAX_TOKENS, "account race");
    const credit = 7 * reservation + Math.floor(reservation / 2);
    const { accountId, key } = await t.newAccountWithKey({ credit: 0 });
    await topUp(t, accountId, nanoToUsdString(credit));
    t.fake.reset();

    const { result: outcomes, lowest, samples } = await watchFunds(ACCOUNT_AVAILABLE, accountId, burst(t.client(key), body, 100));
    const served = outcomes.filter((outcome) => outcome.ok);
    const refused = outcomes.filter((outcome) => !outcome.ok).map((outcome) => outcome.error);
    expect(served).toHaveLength(7);
    expect(refused).toHaveLength(93);
    expect(t.fake.requests).toHaveLength(7);
    for (const error of refused) {
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.status).toBe(400);
      expect(error.code).toBe("insufficient_balance");
      expect(error.type).toBe("invalid_request_error");
      expect(error.message).toContain("Retrying will not help");
    }
    expect(samples).toBeGreaterThan(0);
    expect(lowest).toBeGreaterThanOrEqual(0);

    await noReservationsLeft();
    const balance = await credits(t, key);
    expect(balance.total_usage).toBeLessThanOrEqual(balance.total_credits);
    expect(balance.total_usage).toBe(nanoToUsd(7 * reservation));
    expect(balance.balance).toBe(nanoToUsd(credit - 7 * reservation));
    expect(balance.balance).toBeGreaterThanOrEqual(0);
    expect(generationCount(accountId)).toBe(7);
  });

  it("serves exactly 7 of 100 against a key budget, refusing the rest with 429 key_budget_exceeded", async () => {
    const { body, reservation } = exactCostRequest(MODEL, MAX_TOKENS, "key race");
    const limit = 7 * reservation + Math.floor(reservation / 2);
    const { accountId, keyId, key } = await t.newAccountWithKey({ credit: 0, key: { limit: nanoToUsd(limit) } });
    await topUp(t, accountId, 100);
    t.fake.reset();

    const { result: outcomes, lowest } = await watchFunds(KEY_AVAILABLE, keyId, burst(t.client(key), body, 100));
    const served = outcomes.filter((outcome) => outcome.ok);
    const refused = outcomes.filter((outcome) => !outcome.ok).map((outcome) => outcome.error);
    expect(served).toHaveLength(7);
    expect(t.fake.requests).toHaveLength(7);
    for (const error of refused) {
      expect(error).toBeInstanceOf(OpenAI.RateLimitError);
      expect(error.status).toBe(429);
      expect(error.code).toBe("key_budget_exceeded");
      expect(error.type).toBe("rate_limit_error");
      expect(error.message).toContain("Retrying will not help");
      // A spend limit is not a rate limit: nothing tells the client to come back later.
      expect(error.headers?.get("retry-after") ?? null).toBeNull();
    }
    expect(lowest).toBeGreaterThanOrEqual(0);

    await noReservationsLeft();
    const keyView = await fetch(`${t.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as Promise<any>);
    expect(keyView.data.usage).toBe(nanoToUsd(7 * reservation));
    expect(keyView.data.limit_remaining).toBe(nanoToUsd(limit - 7 * reservation));
    const balance = await credits(t, key);
    expect(balance.total_usage).toBe(nanoToUsd(7 * reservation));
    expect(balance.balance).toBe(nanoToUsd(usdToNano(100) - 7 * reservation));
  });
});

describe("insufficient balance", () => {
  it("names the affordable output tokens, calls no upstream, charges and records nothing", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 5 });
    const messages: Message[] = [{ role: "user", content: "write me a very long story" }];
    const { bound, promptPrice, outputPrice } = worstCase(MODEL, messages, 0);
    const affordable = Math.floor((usdToNano(5) - bound * promptPrice) / outputPrice);
    expect(affordable).toBeLessThan(128_000);
    t.fake.reset();

    const refused = await t
      .client(key)
      .chat.completions.create({ model: MODEL, messages, max_tokens: affordable + 1 })
      .then(() => null, (error) => error as InstanceType<typeof OpenAI.APIError>);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused!.code).toBe("insufficient_balance");
    expect(refused!.type).toBe("invalid_request_error");
    expect(refused!.message).toContain(`affords at most ${affordable} output tokens`);
    expect(refused!.message).toContain(`max_tokens=${affordable + 1}`);
    expect(refused!.message).toContain("$5");
    const requestId = refused!.headers?.get("x-gateway-request-id");
    expect(requestId).toMatch(/^gen-/);
    expect(t.fake.requests).toHaveLength(0);
    expect(generationCount(accountId)).toBe(0);
    expect(await credits(t, key)).toEqual({ total_credits: 5, total_usage: 0, balance: 5, currency: "USD" });
    expect(reservationCount()).toBe(0);

    // Exactly the affordable figure is served.
    const completion = await t.client(key).chat.completions.create({ model: MODEL, messages, max_tokens: affordable });
    expect(completion.choices[0]!.message.content).toBe(`Hello from ${MODEL}.`);
    expect(t.fake.requests).toHaveLength(1);
    expect((t.fake.requests[0]!.body as any).max_tokens).toBe(affordable);
  });

  it("refuses an empty balance with 400 and a top-up restores service at once", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 0 });
    const client = t.client(key);
    const request = { model: "gpt-6-luna", messages: [{ role: "user" as const, content: "hello" }] };
    t.fake.reset();

    for (const extra of [{}, { max_tokens: 10 }, { stream: true as const }]) {
      const error = await client.chat.completions.create({ ...request, ...extra } as any).then(
        () => null,
        (thrown) => thrown as InstanceType<typeof OpenAI.APIError>,
      );
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error!.code).toBe("insufficient_balance");
      expect(error!.message).toContain("available balance is $0");
      expect(error!.message).toContain("top up");
    }
    expect(t.fake.requests).toHaveLength(0);
    expect(generationCount(accountId)).toBe(0);

    await topUp(t, accountId, 5);
    const completion = await client.chat.completions.create(request);
    expect(completion.choices[0]!.message.content).toBe("Hello from gpt-6-luna.");
    const usage = computeUsage(request);
    const cost = usage.prompt_tokens * 100 + usage.completion_tokens * 500;
    await noReservationsLeft();
    expect(await credits(t, key)).toEqual({ total_credits: 5, total_usage: nanoToUsd(cost), balance: nanoToUsd(usdToNano(5) - cost), currency: "USD" });
  });
});

describe("output cap from the balance when the client sets none", () => {
  it("caps max_completion_tokens at what a small balance pays for, and at the model maximum when the balance covers it", async () => {
    const messages: Message[] = [{ role: "user", content: "no cap from me" }];
    const { bound, promptPrice, outputPrice } = worstCase(MODEL, messages, 0);
    const small = await t.newAccountWithKey({ credit: 5 });
    t.fake.reset();
    await t.client(small.key).chat.completions.create({ model: MODEL, messages });
    const cap = Math.floor((usdToNano(5) - bound * promptPrice) / outputPrice);
    expect(cap).toBeLessThan(catalog.get(MODEL)!.max_output_tokens);
    const sent = t.fake.requests[0]!.body as any;
    expect(sent.max_completion_tokens).toBe(cap);
    expect(sent.max_tokens).toBeUndefined();

    const large = await t.newAccountWithKey({ credit: 100 });
    t.fake.reset();
    await t.client(large.key).chat.completions.create({ model: MODEL, messages });
    const uncapped = t.fake.requests[0]!.body as any;
    // The cap the hold assumed always goes upstream: here the model's maximum.
    expect(uncapped.max_completion_tokens).toBe(catalog.get(MODEL)!.max_output_tokens);
    expect(uncapped.max_tokens).toBeUndefined();

    // The client's own cap is never replaced.
    t.fake.reset();
    await t.client(small.key).chat.completions.create({ model: MODEL, messages, max_completion_tokens: 50 });
    expect((t.fake.requests[0]!.body as any).max_completion_tokens).toBe(50);
    expect((t.fake.requests[0]!.body as any).max_tokens).toBeUndefined();
    await noReservationsLeft();
  });

  it("caps an OpenAI-compatible vendor with max_tokens when the key budget binds, never above the model maximum", async () => {
    const model = "deepseek-flash";
    const messages: Message[] = [{ role: "user", content: "compatible vendor" }];
    const { bound, promptPrice, outputPrice } = worstCase(model, messages, 0);
    const { key } = await t.newAccountWithKey({ credit: 5, key: { limit: 0.01 } });
    t.fake.reset();
    await t.client(key).chat.completions.create({ model, messages });
    const sent = t.fake.requests[0]!.body as any;
    expect(sent.max_tokens).toBe(Math.floor((usdToNano(0.01) - bound * promptPrice) / outputPrice));
    expect(sent.max_completion_tokens).toBeUndefined();

    // $5 covers deepseek-flash's whole 384K output at $1.20 per million: the model's maximum is sent.
    const { key: rich } = await t.newAccountWithKey({ credit: 5 });
    t.fake.reset();
    await t.client(rich).chat.completions.create({ model, messages });
    expect((t.fake.requests[0]!.body as any).max_tokens).toBe(catalog.get(model)!.max_output_tokens);
    await noReservationsLeft();
  });
});

describe("requests that end early", () => {
  it("a client disconnecting mid-stream is recorded cancelled, billed for the streamed text, and its hold released", async () => {
    const model = "gpt-6-luna";
    const { accountId, key } = await t.newAccountWithKey({ credit: 5 });
    const directive = { text: "alpha beta gamma delta epsilon zeta", hang_after_chunks: 4, no_usage: true };
    const messages: Message[] = [{ role: "user", content: `stream then hang [[fake ${JSON.stringify(directive)}]]` }];
    const controller = new AbortController();
    const { data: stream, response } = await t
      .client(key)
      .chat.completions.create({ model, messages, stream: true }, { signal: controller.signal })
      .withResponse();
    const requestId = response.headers.get("x-gateway-request-id")!;
    expect(reservationCount()).toBe(1);

    let text = "";
    const reading = (async () => {
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        if (text === "alpha beta gamma") controller.abort();
      }
    })().catch((error) => error);
    // The SDK ends the iteration quietly (or with an abort error) once the signal fires.
    const ended = await reading;
    if (ended !== undefined) expect(String(ended)).toMatch(/abort/i);
    expect(controller.signal.aborted).toBe(true);
    expect(text).toBe("alpha beta gamma");

    await waitFor(() => generationRow(requestId) !== null, 2_000, "the cancelled generation");
    const row = generationRow(requestId)!;
    expect(row.status).toBe("cancelled");
    const outputTokens = countTextTokens("alpha beta gamma", true);
    const { bound } = worstCase(model, messages, 0);
    expect(row.completion_tokens).toBe(outputTokens);
    expect(row.prompt_tokens).toBe(bound);
    expect(row.total_cost_nano).toBe(bound * 100 + outputTokens * 500);
    expect(row.total_cost_nano).toBeGreaterThan(0);
    await noReservationsLeft();
    const balance = await credits(t, key);
    expect(balance.total_usage).toBe(nanoToUsd(row.total_cost_nano));
    expect(balance.balance).toBe(nanoToUsd(usdToNano(5) - row.total_cost_nano));
    expect(generationCount(accountId)).toBe(1);
  });

  it("an upstream 500 charges nothing, releases the hold and records a failure in the OpenAI error shape", async () => {
    const { key } = await t.newAccountWithKey({ credit: 5 });
    const body = { model: MODEL, messages: [{ role: "user", content: `[[fake {"status":500}]]` }], max_tokens: 1000 };
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(502);
    const json = (await response.json()) as any;
    expect(Object.keys(json)).toEqual(["error"]);
    expect(json.error).toMatchObject({ type: "upstream_error", code: "upstream_error", param: null });
    expect(typeof json.error.message).toBe("string");
    const requestId = response.headers.get("x-gateway-request-id")!;
    await waitFor(() => generationRow(requestId) !== null, 2_000, "the failed generation");
    expect(generationRow(requestId)).toMatchObject({ status: "failed", error_code: "upstream_error", total_cost_nano: 0 });
    await noReservationsLeft();
    expect(await credits(t, key)).toEqual({ total_credits: 5, total_usage: 0, balance: 5, currency: "USD" });
  });

  it("an upstream timeout is a 504 that charges nothing and releases the hold", async () => {
    const slow = await startTestGateway({ env: { UPSTREAM_TIMEOUT_MS: "300", SQLITE_HOLDS: "shared" } });
    const slowDb = new Database(join(slow.dataDir, "gateway.db"), { readonly: true });
    try {
      const { key } = await slow.newAccountWithKey({ credit: 5 });
      const started = performance.now();
      const error = await slow
        .client(key)
        .chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `[[fake {"delay_ms":2000}]]` }], max_tokens: 1000 })
        .then(() => null, (thrown) => thrown as InstanceType<typeof OpenAI.APIError>);
      expect(performance.now() - started).toBeLessThan(1_500);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect(error!.status).toBe(504);
      expect(error!.code).toBe("upstream_timeout");
      expect(error!.type).toBe("upstream_error");
      const requestId = error!.headers!.get("x-gateway-request-id")!;
      const row = () =>
        slowDb.query<{ status: string; error_code: string; total_cost_nano: number }, [string]>("select status, error_code, total_cost_nano from generations where id = ?").get(requestId);
      await waitFor(() => row() !== null, 2_000, "the timed-out generation");
      expect(row()).toEqual({ status: "failed", error_code: "upstream_timeout", total_cost_nano: 0 });
      await waitFor(() => slowDb.query<{ n: number }, []>("select count(*) as n from reservations").get()!.n === 0, 2_000, "no reservation");
      const balance = await fetch(`${slow.url}/v1/credits`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as Promise<any>);
      expect(balance.data).toEqual({ total_credits: 5, total_usage: 0, balance: 5, currency: "USD" });
    } finally {
      slowDb.close();
      await slow.stop();
    }
  });
});

describe("error wire format", () => {
  it("budget refusals are OpenAI error bodies with message, type, code and param", async () => {
    const empty = await t.newAccountWithKey({ credit: 0 });
    const limited = await t.newAccountWithKey({ credit: 5, key: { limit: 0.000001 } });
    const cases = [
      { key: empty.key, status: 400, type: "invalid_request_error", code: "insufficient_balance" },
      { key: limited.key, status: 429, type: "rate_limit_error", code: "key_budget_exceeded" },
    ];
    for (const { key, status, type, code } of cases) {
      for (const stream of [false, true]) {
        const response = await fetch(`${t.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 100, stream }),
        });
        expect(response.status).toBe(status);
        expect(response.headers.get("content-type")).toContain("application/json");
        expect(response.headers.get("x-gateway-request-id")).toMatch(/^gen-/);
        const json = (await response.json()) as any;
        expect(Object.keys(json)).toEqual(["error"]);
        expect(json.error).toEqual({ message: expect.stringContaining("Retrying will not help"), type, code, param: null });
      }
    }
    expect(await credits(t, limited.key)).toEqual({ total_credits: 5, total_usage: 0, balance: 5, currency: "USD" });
  });
});
