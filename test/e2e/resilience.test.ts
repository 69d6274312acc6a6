/**
 * The resilience scenarios of issue 27: several deployments of one provider (comma-separated base URLs and
 * keys), each a controllable fake (test/fake-upstream/deployment.ts) whose next answers a test scripts.
 *
 * Each scenario runs in every client format (chat completions, Messages, Responses, through the official SDK
 * clients), streaming and not, against a gateway of its own (fresh deployments, fresh health), and checks:
 *   the client's view   status, body shape, text, retry-after, through the SDK
 *   the bill            the account's balance = credit - the record's cost; the cost of an answer after a
 *                       failed attempt equals that of the same request answered at the first try (the failed
 *                       attempt costs nothing); a failure before any text costs nothing
 *   the record          GET /v1/generation?id=<x-gateway-request-id>: status, cost and `attempts`
 *                       [{deployment, status, error_class, latency_ms}]
 *   the deployments     how many requests each one received
 */
import { afterAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";
import { usdToNano } from "../../src/core/money.ts";
import { startFakeDeployment, type FakeDeployment, type ScriptedAnswer } from "../fake-upstream/deployment.ts";
import { httpErrorBody, sendInFormat, sseEvents, streamErrorEvent, type ClientFormat, type Exchange } from "../helpers/format-clients.ts";

setDefaultTimeout(30_000);

const ADMIN = "resilience-admin-token";
const CREDIT_USD = 5;
const MAX_TOKENS = 50;
const FORMATS: ClientFormat[] = ["chat", "messages", "responses"];
const MODELS = { openai: "gpt-6.2-sol", anthropic: "claude-haiku-5-5" } as const;
type Provider = keyof typeof MODELS;

// ------------------------------------------------------------------------------------------------
// One gateway over N fake deployments of one provider
// ------------------------------------------------------------------------------------------------

interface Rig {
  url: string;
  deployments: FakeDeployment[];
  logs: string[];
  gateway: RunningGateway;
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  account(): Promise<{ accountId: string; key: string }>;
  balanceNano(accountId: string): Promise<number>;
  record(id: string | null, key: string): Promise<any>;
  send(format: ClientFormat, key: string, stream: boolean, text: string): Promise<Exchange>;
  stop(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(cleanups.map((cleanup) => cleanup().catch(() => {})));
});

/** plugins-config.yaml with the upstream-health plugin's config merged in (JSON is YAML). */
function configWith(dir: string, health: Record<string, unknown>): string {
  const config = parseYaml(readFileSync(join(import.meta.dir, "../../plugins-config.yaml"), "utf8"));
  const entry = (config.plugins["upstream-health"] ??= { enabled: true, config: {} });
  entry.enabled = true;
  entry.config = { ...(entry.config ?? {}), ...health };
  const file = join(dir, "plugins-config.yaml");
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

async function startRig(options: {
  provider?: Provider;
  deployments?: number;
  env?: Record<string, string>;
  health?: Record<string, unknown>;
  /** Deployments of another rig (two gateways over the same deployments). */
  share?: FakeDeployment[];
}): Promise<Rig> {
  const provider = options.provider ?? "openai";
  const deployments = options.share ?? (await Promise.all(Array.from({ length: options.deployments ?? 2 }, (_, i) => startFakeDeployment(`${provider}#${i + 1}`))));
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-resilience-"));
  const logs: string[] = [];
  const urls = deployments.map((d) => (provider === "openai" ? `${d.url}/v1` : d.url)).join(",");
  const keys = deployments.map((_, i) => `sk-${provider}-deployment-${i + 1}-5e1f`).join(",");
  const env: Record<string, string | undefined> = {
    ...process.env,
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
    EDGE_RATE_LIMIT_RPS: "0",
    GATEWAY_ADMIN_TOKEN: ADMIN,
    GATEWAY_SANDBOX: "false",
    [provider === "openai" ? "OPENAI_BASE_URL" : "ANTHROPIC_BASE_URL"]: urls,
    [provider === "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY"]: keys,
    UPSTREAM_TIMEOUT_MS: "10000",
    // Health is this rig's own unless a test shares it (two instances over one Redis).
    REDIS_URL: "",
    UPSTREAM_HEALTH_REDIS_PREFIX: `resilience-${crypto.randomUUID()}:`,
    ...options.env,
  };
  const configFile = options.health ? configWith(dataDir, options.health) : undefined;
  const gateway = await startGateway({ env, port: 0, configFile, log: createLogger("test", { silent: false, sink: (line: string) => void logs.push(line) }) });
  const url = gateway.url;
  async function admin(method: string, path: string, body?: unknown) {
    const response = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${ADMIN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  }
  let stopped = false;
  const rig: Rig = {
    url,
    deployments,
    logs,
    gateway,
    admin,
    async account() {
      const account = await admin("POST", "/admin/v1/accounts", { name: "resilience" });
      const accountId = account.body.data.id;
      await admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: CREDIT_USD, kind: "card", reference: crypto.randomUUID() });
      const key = await admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "resilience key" });
      return { accountId, key: key.body.data.key };
    },
    async balanceNano(accountId) {
      const answer = await admin("GET", `/admin/v1/accounts/${accountId}`);
      return usdToNano(String(answer.body.data.balance));
    },
    async record(id, key) {
      if (!id) return null;
      for (let tries = 0; tries < 40; tries++) {
        const response = await fetch(`${url}/v1/generation?id=${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${key}` } });
        if (response.status === 200) {
          const body: any = await response.json();
          return body?.data ?? body;
        }
        await Bun.sleep(50);
      }
      return null;
    },
    send: (format, key, stream, text) => sendInFormat(format, { url, key, model: MODELS[provider], text, stream, maxTokens: MAX_TOKENS }),
    async stop() {
      if (stopped) return;
      stopped = true;
      await gateway.stop();
      if (!options.share) await Promise.all(deployments.map((d) => d.stop()));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  cleanups.push(() => rig.stop());
  return rig;
}

/** Starts a rig, runs `body`, stops the rig whatever happens. */
async function withRig(options: Parameters<typeof startRig>[0], body: (rig: Rig) => Promise<void>): Promise<void> {
  const rig = await startRig(options);
  try {
    await body(rig);
  } finally {
    await rig.stop().catch(() => {});
  }
}

// ------------------------------------------------------------------------------------------------
// What the client saw
// ------------------------------------------------------------------------------------------------

const describeExchange = (x: Exchange) =>
  `HTTP ${x.status} in ${Math.round(x.elapsedMs)} ms | text ${JSON.stringify(x.text)} | completed ${x.completed} | sdk ${String((x.sdkError as Error)?.message ?? "none").slice(0, 160)} | raw ${JSON.stringify(x.raw.slice(0, 400))}`;

/** A complete, well-formed answer with text. */
function expectAnswer(exchange: Exchange): void {
  const ok = exchange.status === 200 && exchange.completed && exchange.sdkError === undefined && exchange.text.length > 0;
  const framesOk = sseEvents(exchange.raw).malformed.length === 0;
  expect({ ok, framesOk, got: ok && framesOk ? "answer" : describeExchange(exchange) }).toEqual({ ok: true, framesOk: true, got: "answer" });
}

/** An HTTP error in the client's format, read by the SDK as an API error of that status. */
function expectHttpError(format: ClientFormat, exchange: Exchange, status: number, code?: string): { message: string; code: string | null; type: string } {
  const body = httpErrorBody(format, exchange.raw);
  const sdkClass = format === "messages" ? Anthropic.APIError : OpenAI.APIError;
  const sdkStatus = (exchange.sdkError as { status?: number })?.status;
  expect({ status: exchange.status, shaped: body !== null, sdk: exchange.sdkError instanceof sdkClass && sdkStatus === status, seen: describeExchange(exchange) }).toEqual({
    status,
    shaped: true,
    sdk: true,
    seen: expect.any(String),
  });
  if (code !== undefined) expect(body!.code).toBe(code);
  return body!;
}

/** A stream that delivered text, then ended with a well-formed error event (never a finish). */
function expectTextThenErrorEvent(format: ClientFormat, exchange: Exchange): void {
  const event = streamErrorEvent(format, exchange.raw);
  expect({
    status: exchange.status,
    text: exchange.text.length > 0,
    completed: exchange.completed,
    errorEvent: event !== null,
    malformed: sseEvents(exchange.raw).malformed,
    seen: describeExchange(exchange),
  }).toEqual({ status: 200, text: true, completed: false, errorEvent: true, malformed: [], seen: expect.any(String) });
}

/** A failure before any text: an HTTP error, or (a stream whose headers went out) 200 with only an error event. */
function expectErrorBeforeText(format: ClientFormat, exchange: Exchange, status: number): void {
  if (exchange.status === 200) {
    expect({ text: exchange.text, completed: exchange.completed, errorEvent: streamErrorEvent(format, exchange.raw) !== null }).toEqual({ text: "", completed: false, errorEvent: true });
  } else expectHttpError(format, exchange, status);
}

/** Retry-after of an answer, in seconds. */
function retryAfterOf(exchange: Exchange): number {
  return Number(exchange.headers["retry-after"]);
}

// ------------------------------------------------------------------------------------------------
// The bill and the record
// ------------------------------------------------------------------------------------------------

const costOf = (record: any): number => usdToNano(String(record?.total_cost ?? 0));

/** The balance equals the credit less the recorded cost (the ledger agrees with the record). */
async function expectBilled(rig: Rig, accountId: string, record: any): Promise<number> {
  const cost = costOf(record);
  const expected = usdToNano(String(CREDIT_USD)) - cost;
  let balance = await rig.balanceNano(accountId);
  for (let tries = 0; balance !== expected && tries < 40; tries++) {
    await Bun.sleep(50);
    balance = await rig.balanceNano(accountId);
  }
  expect(balance).toBe(expected);
  return cost;
}

/** The cost of the same request answered at the first try by a healthy deployment (what one answer costs). */
async function costOfOneAnswer(format: ClientFormat, stream: boolean, text: string, provider: Provider = "openai"): Promise<number> {
  const control = await startRig({ provider, deployments: 1 });
  try {
    const { key } = await control.account();
    const exchange = await control.send(format, key, stream, text);
    expectAnswer(exchange);
    return costOf(await control.record(exchange.requestId, key));
  } finally {
    await control.stop();
  }
}

/** The record's attempts, shaped: [deployment, status, error_class] (latency checked to be a number). */
function attemptsOf(record: any): [string, number | null, string | null][] | undefined {
  if (!Array.isArray(record?.attempts)) return undefined;
  for (const attempt of record.attempts) expect(typeof attempt.latency_ms).toBe("number");
  return record.attempts.map((a: any) => [a.deployment, a.status, a.error_class]);
}

/** Whether the record side of issue 27 has landed (the generation record shows attempts). */
let recordsAttempts = true;

function expectAttempts(record: any, expected: [string, number | null, string | null][]): void {
  const attempts = attemptsOf(record);
  if (attempts === undefined && !recordsAttempts) return; // the record side has not landed
  expect(attempts).toEqual(expected);
}

const counts = (rig: Rig) => rig.deployments.map((d) => d.count);

// ------------------------------------------------------------------------------------------------
// The scenarios
// ------------------------------------------------------------------------------------------------

type Case = (format: ClientFormat, stream: boolean) => Promise<void>;

const MODES = [false, true] as const;
let textCounter = 0;
const textFor = (scenario: string) => `Resilience ${scenario} ${++textCounter}: say something short.`;

/** An answer after a failed first attempt: the client gets it whole, billed once, the record shows both attempts. */
async function answeredBySecond(format: ClientFormat, stream: boolean, options: { provider?: Provider; env?: Record<string, string>; first: ScriptedAnswer; status: number | null; errorClass: string; scenario: string; withinMs?: number }) {
  const provider = options.provider ?? "openai";
  const text = textFor(options.scenario);
  await withRig({ provider, env: options.env }, async (rig) => {
    rig.deployments[0]!.script(options.first);
    const { accountId, key } = await rig.account();
    const exchange = await rig.send(format, key, stream, text);
    expectAnswer(exchange);
    if (options.withinMs !== undefined) expect(exchange.elapsedMs).toBeLessThan(options.withinMs);
    expect(counts(rig)).toEqual([1, 1]);
    const record = await rig.record(exchange.requestId, key);
    expect(record?.status).toBe("success");
    const cost = await expectBilled(rig, accountId, record);
    expect(cost).toBe(await costOfOneAnswer(format, stream, text, provider));
    expectAttempts(record, [
      [`${provider}#1`, options.status, options.errorClass],
      [`${provider}#2`, 200, null],
    ]);
  });
}

/**
 * Two gateways over the same deployments and one Redis: the breaker one opens keeps the other's requests off
 * that deployment. `warm`: the second instance has served that provider before the breaker opens.
 */
async function sharedBreaker(format: ClientFormat, stream: boolean, warm: boolean): Promise<void> {
  const redis = { REDIS_URL: process.env.REDIS_URL || "redis://127.0.0.1:6379", UPSTREAM_HEALTH_REDIS_PREFIX: `resilience-${crypto.randomUUID()}:` };
  const health = { breaker: { failures: 2, cooldown_ms: 60_000 } };
  // Both instances up first: an instance learns the transitions made after it subscribed.
  await withRig({ env: redis, health }, async (one) => {
    await withRig({ env: redis, health, share: one.deployments }, async (two) => {
      const [first] = one.deployments as [FakeDeployment, FakeDeployment];
      const { key } = await one.account();
      const other = await two.account();
      if (warm) expectAnswer(await two.send(format, other.key, stream, textFor("shared-warm")));
      const before = first.count;
      first.fallback = { status: 500 };
      await Bun.sleep(200); // both subscribed
      for (let i = 0; i < 2; i++) expectAnswer(await one.send(format, key, stream, textFor(`shared-${i}`)));
      expect(first.count).toBe(before + 2);
      await Bun.sleep(300); // the transition travels
      for (let i = 0; i < 3; i++) expectAnswer(await two.send(format, other.key, stream, textFor(`shared-two-${i}`)));
      // The second instance knows the breaker is open: nothing more reached the failing deployment.
      expect(first.count).toBe(before + 2);
    });
  });
}

/** `serial`: timing matters (waits, cooldowns, latency), so its cases run one at a time, not beside the rest. */
const SCENARIOS: { name: string; ready: boolean; serial?: boolean; run: Case }[] = [
  {
    name: "primary 500 → secondary answers",
    ready: true,
    run: (format, stream) => answeredBySecond(format, stream, { first: { status: 500 }, status: 500, errorClass: "server_error", scenario: "primary-500" }),
  },
  {
    name: "429 with Retry-After → skipped until then",
    ready: true,
    serial: true,
    run: (format, stream) =>
      withRig({}, async (rig) => {
        const [first, second] = rig.deployments as [FakeDeployment, FakeDeployment];
        first.script({ status: 429, headers: { "retry-after": "3" } });
        const { key } = await rig.account();
        expectAnswer(await rig.send(format, key, stream, textFor("retry-after-1")));
        expect(counts(rig)).toEqual([1, 1]);
        const limitedAt = first.requests[0]!.at;
        // Within the wait: the first (priority) deployment is not asked again.
        for (let i = 0; i < 2; i++) expectAnswer(await rig.send(format, key, stream, textFor(`retry-after-during-${i}`)));
        expect(Date.now() - limitedAt).toBeLessThan(2_800);
        expect(counts(rig)).toEqual([1, 3]);
        // After it: the first deployment serves again.
        await Bun.sleep(Math.max(0, limitedAt + 3_300 - Date.now()));
        expectAnswer(await rig.send(format, key, stream, textFor("retry-after-after")));
        expect(counts(rig)).toEqual([2, 3]);
      }),
  },
  {
    name: "all deployments 429 → the client gets 429 with the shortest retry-after",
    ready: true,
    run: (format, stream) =>
      withRig({}, async (rig) => {
        rig.deployments[0]!.script({ status: 429, headers: { "retry-after": "7" } });
        rig.deployments[1]!.script({ status: 429, headers: { "retry-after": "3" } });
        const { accountId, key } = await rig.account();
        const exchange = await rig.send(format, key, stream, textFor("all-429"));
        expectHttpError(format, exchange, 429);
        const retryAfter = retryAfterOf(exchange);
        expect(retryAfter >= 2 && retryAfter <= 3).toBe(true);
        expect(counts(rig)).toEqual([1, 1]);
        const record = await rig.record(exchange.requestId, key);
        if (record) {
          expect(record.status).not.toBe("success");
          expectAttempts(record, [
            ["openai#1", 429, "rate_limited"],
            ["openai#2", 429, "rate_limited"],
          ]);
        }
        expect(await expectBilled(rig, accountId, record)).toBe(0);
      }),
  },
  {
    name: "timeout before the first byte → next",
    ready: true,
    serial: true,
    run: (format, stream) =>
      answeredBySecond(format, stream, { env: { UPSTREAM_FIRST_BYTE_TIMEOUT_MS: "1500", UPSTREAM_FIRST_BYTE_TIMEOUT_NON_STREAM_MS: "1500" }, first: { delayMs: 9_000 }, status: null, errorClass: "timeout", scenario: "first-byte-timeout", withinMs: 7_000 }),
  },
  {
    name: "reset after the first byte → no retry, well-formed error, billed delivered",
    ready: true,
    run: (format, stream) =>
      withRig({}, async (rig) => {
        rig.deployments[0]!.script({ resetAfterFirstText: true });
        const { accountId, key } = await rig.account();
        const exchange = await rig.send(format, key, stream, textFor("reset-after-first-byte"));
        if (stream) expectTextThenErrorEvent(format, exchange);
        else expectHttpError(format, exchange, 502, "upstream_error");
        expect(counts(rig)).toEqual([1, 0]);
        const record = await rig.record(exchange.requestId, key);
        expect(record?.status).toBe("failed");
        const cost = await expectBilled(rig, accountId, record);
        // What was delivered is billed (a stream's counted text); a JSON answer delivered nothing.
        if (stream) {
          expect(cost).toBeGreaterThan(0);
          expect(record.usage_estimated).toBe(true);
        } else expect(cost).toBe(0);
        // The one attempt, on the first deployment (its error_class: the todo below).
        expect(attemptsOf(record)?.map(([deployment, status]) => [deployment, status])).toEqual([["openai#1", 200]]);
      }),
  },
  {
    name: "400 → no retry",
    ready: true,
    run: (format, stream) =>
      withRig({}, async (rig) => {
        rig.deployments[0]!.script({ status: 400 });
        const { accountId, key } = await rig.account();
        const exchange = await rig.send(format, key, stream, textFor("400"));
        expectHttpError(format, exchange, 400);
        expect(counts(rig)).toEqual([1, 0]);
        const record = await rig.record(exchange.requestId, key);
        if (record) {
          expect(record.status).not.toBe("success");
          expectAttempts(record, [["openai#1", 400, "client_error"]]);
        }
        expect(await expectBilled(rig, accountId, record)).toBe(0);
      }),
  },
  {
    name: "upstream 401 → deployment marked down, next answers, operator warned",
    ready: true,
    run: async (format, stream) => {
      await answeredBySecond(format, stream, { first: { status: 401 }, status: 401, errorClass: "auth", scenario: "401" });
      await withRig({}, async (rig) => {
        rig.deployments[0]!.fallback = { status: 401 };
        const { key } = await rig.account();
        expectAnswer(await rig.send(format, key, stream, textFor("401-a")));
        expectAnswer(await rig.send(format, key, stream, textFor("401-b")));
        // Marked down: the second request went straight to the next deployment.
        expect(counts(rig)).toEqual([1, 2]);
        const warnings = rig.logs.map((line) => JSON.parse(line)).filter((line) => line.level === "warn" || line.level === "error");
        expect(warnings.some((line) => JSON.stringify(line).includes("openai#1"))).toBe(true);
        // The deployment's key never reaches a log line.
        expect(rig.logs.join("\n")).not.toContain("sk-openai-deployment-1-5e1f");
      });
    },
  },
  {
    name: "breaker opens after N failures and no request reaches that deployment while open",
    ready: true,
    run: (format, stream) =>
      withRig({ health: { breaker: { failures: 3, cooldown_ms: 60_000 } } }, async (rig) => {
        rig.deployments[0]!.fallback = { status: 500 };
        const { key } = await rig.account();
        for (let i = 0; i < 3; i++) expectAnswer(await rig.send(format, key, stream, textFor(`breaker-${i}`)));
        expect(counts(rig)).toEqual([3, 3]);
        for (let i = 0; i < 4; i++) expectAnswer(await rig.send(format, key, stream, textFor(`breaker-open-${i}`)));
        expect(counts(rig)).toEqual([3, 7]);
      }),
  },
  {
    name: "half-open probe recovers",
    ready: true,
    serial: true,
    run: (format, stream) =>
      withRig({ health: { breaker: { failures: 2, cooldown_ms: 2_000 } } }, async (rig) => {
        const [first] = rig.deployments as [FakeDeployment, FakeDeployment];
        first.script({ status: 500 }, { status: 500 });
        const { key } = await rig.account();
        for (let i = 0; i < 2; i++) expectAnswer(await rig.send(format, key, stream, textFor(`half-open-${i}`)));
        const openedAt = Date.now();
        expectAnswer(await rig.send(format, key, stream, textFor("half-open-open")));
        expect(Date.now() - openedAt).toBeLessThan(1_800);
        expect(first.count).toBe(2);
        await Bun.sleep(Math.max(0, openedAt + 2_300 - Date.now()));
        // The probe reaches the recovered deployment; the breaker closes and it serves again.
        expectAnswer(await rig.send(format, key, stream, textFor("half-open-probe")));
        expect(first.count).toBe(3);
        expectAnswer(await rig.send(format, key, stream, textFor("half-open-closed")));
        expect(first.count).toBe(4);
      }),
  },
  {
    name: "every deployment down → 503 provider_unavailable with retry-after",
    ready: true,
    run: (format, stream) =>
      withRig({}, async (rig) => {
        for (const deployment of rig.deployments) await deployment.down();
        const { accountId, key } = await rig.account();
        const exchange = await rig.send(format, key, stream, textFor("all-down"));
        expectHttpError(format, exchange, 503, "provider_unavailable");
        expect(retryAfterOf(exchange)).toBeGreaterThan(0);
        const record = await rig.record(exchange.requestId, key);
        if (record) {
          expect(record.status).not.toBe("success");
          expectAttempts(record, [
            ["openai#1", null, "connection"],
            ["openai#2", null, "connection"],
          ]);
        }
        expect(await expectBilled(rig, accountId, record)).toBe(0);
      }),
  },
  {
    name: "truncated stream (no finish, no usage) → not a success",
    ready: true,
    run: (format, stream) =>
      withRig({}, async (rig) => {
        rig.deployments[0]!.script({ truncateAfterFirstText: true });
        const { accountId, key } = await rig.account();
        const exchange = await rig.send(format, key, stream, textFor("truncated"));
        if (stream) expectTextThenErrorEvent(format, exchange);
        else expectHttpError(format, exchange, 502);
        expect(counts(rig)).toEqual([1, 0]);
        const record = await rig.record(exchange.requestId, key);
        expect(record?.status).toBe("failed");
        const cost = await expectBilled(rig, accountId, record);
        if (stream) expect(cost).toBeGreaterThan(0);
        else expect(cost).toBe(0);
      }),
  },
  {
    name: "Anthropic 529 overloaded → next",
    ready: true,
    run: (format, stream) => answeredBySecond(format, stream, { provider: "anthropic", first: { status: 529 }, status: 529, errorClass: "overloaded", scenario: "529" }),
  },
  {
    name: "stream idle past the timeout → final error event",
    ready: true,
    run: (format, stream) =>
      withRig({ env: { UPSTREAM_IDLE_TIMEOUT_MS: "300" } }, async (rig) => {
        rig.deployments[0]!.script({ idleAfterFirstText: true });
        const { accountId, key } = await rig.account();
        const exchange = await rig.send(format, key, stream, textFor("idle"));
        expect(exchange.elapsedMs).toBeLessThan(5_000);
        if (stream) {
          expectTextThenErrorEvent(format, exchange);
          const event = streamErrorEvent(format, exchange.raw)!;
          if (format !== "responses" && event.code !== null) expect(event.code).toBe("upstream_timeout");
        } else expectErrorBeforeText(format, exchange, 504);
        expect(counts(rig)).toEqual([1, 0]);
        const record = await rig.record(exchange.requestId, key);
        expect(record?.status).toBe("failed");
        await expectBilled(rig, accountId, record);
      }),
  },
  {
    name: "slow deployment beside a fast one under least-in-flight",
    ready: true,
    serial: true,
    run: (format, stream) =>
      withRig({ health: { strategy: "least_in_flight" } }, async (rig) => {
        const [slow, fast] = rig.deployments as [FakeDeployment, FakeDeployment];
        slow.fallback = { delayMs: 1_500 };
        // A key per request: stickiness would keep one key to the deployment it used last.
        const keys = await Promise.all(Array.from({ length: 8 }, () => rig.account()));
        const sent: Promise<Exchange>[] = [];
        for (let i = 0; i < 8; i++) {
          sent.push(rig.send(format, keys[i]!.key, stream, textFor(`least-in-flight-${i}`)));
          await Bun.sleep(60);
        }
        for (const exchange of await Promise.all(sent)) expectAnswer(exchange);
        // The slow one holds its requests: new ones go to the fast one.
        expect(slow.count).toBeLessThanOrEqual(2);
        expect(fast.count).toBeGreaterThanOrEqual(6);
      }),
  },
  {
    name: "breaker state shared by two instances via Redis",
    ready: true,
    serial: true,
    run: (format, stream) => sharedBreaker(format, stream, true),
  },
];

for (const scenario of SCENARIOS) {
  (scenario.serial ? describe : describe.concurrent)(scenario.name, () => {
    for (const format of FORMATS) {
      for (const stream of MODES) {
        const name = `${scenario.name} (${format}, ${stream ? "stream" : "non-stream"})`;
        if (scenario.ready) it(name, () => scenario.run(format, stream));
        else it.todo(name, () => scenario.run(format, stream));
      }
    }
  });
}

/** An instance that has not served the provider yet still skips a deployment whose breaker another instance opened. */
describe("breaker state shared by two instances via Redis: an instance that has not served the provider yet", () => {
  for (const format of FORMATS) {
    for (const stream of MODES) {
      it(`breaker state shared by two instances via Redis, second instance cold (${format}, ${stream ? "stream" : "non-stream"})`, () => sharedBreaker(format, stream, false));
    }
  }
});

/** A failure after bytes reached the client is on the record as `broken_stream` (src/core/deployments.ts). */
describe("reset after the first byte → no retry, well-formed error, billed delivered: the attempt's error class", () => {
  for (const format of FORMATS) {
    for (const stream of MODES) {
      it(`reset after the first byte → the record's attempt says broken_stream (${format}, ${stream ? "stream" : "non-stream"})`, () =>
        withRig({}, async (rig) => {
          rig.deployments[0]!.script({ resetAfterFirstText: true });
          const { key } = await rig.account();
          const exchange = await rig.send(format, key, stream, textFor("reset-error-class"));
          expectAttempts(await rig.record(exchange.requestId, key), [["openai#1", 200, "broken_stream"]]);
        }),
      );
    }
  }
});
