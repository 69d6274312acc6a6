import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * GET /metrics (the metrics plugin) on a real gateway: exact counts, token sums and money after known traffic
 * through the official SDK, bounded series under a flood of made-up model ids and paths, the token, the upstream
 * attempts and breakers with two deployments, and the Grafana dashboard's queries against the exposition.
 */

const MODEL = "gpt-6-luna";
const USD = 1_000_000_000;
const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;
/** Every answer's usage, as the fake upstream reports it (the directive). */
const USAGE = { prompt_tokens: 1000, completion_tokens: 500, cached_tokens: 200, cache_write_tokens: 100, reasoning_tokens: 50 };

/** The samples of an exposition: `name{labels}` (labels as written) -> value. */
function samples(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const out: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    out.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return out;
}

/** The value of the one sample of `name` whose labels include `labels`; undefined when none. */
function value(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples(text).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${found.length} samples`);
  return found[0]?.value;
}

/** The sum of every sample of `name` whose labels include `labels`. */
function total(text: string, name: string, labels: Record<string, string> = {}): number {
  return samples(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

async function scrape(t: TestGateway, token?: string): Promise<string> {
  const response = await fetch(t.url + "/metrics", token ? { headers: { authorization: `Bearer ${token}` } } : {});
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
  return response.text();
}

/** Metered generations are written by the group commit: flush it so the store and the commit histogram have them. */
async function flush(t: TestGateway): Promise<void> {
  await t.gateway.service("storage")!.flush();
}

describe("GET /metrics after known traffic", () => {
  let t: TestGateway;
  let text: string;
  let accountId: string;
  const NON_STREAM = 3;
  const STREAMED = 2;

  beforeAll(async () => {
    t = await startTestGateway({ env: { METRICS_TOKEN: "" } });
    const funded = await t.newAccountWithKey({ credit: 10 });
    accountId = funded.accountId;
    const client = t.client(funded.key);
    for (let i = 0; i < NON_STREAM; i++) {
      const answer = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `hello ${directive({ usage: USAGE })}` }] });
      expect(answer.usage?.prompt_tokens).toBe(1000);
    }
    for (let i = 0; i < STREAMED; i++) {
      const stream = await client.chat.completions.create({
        model: MODEL,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: `hello ${directive({ usage: USAGE })}` }],
      });
      for await (const _chunk of stream) {
        // read to the end
      }
    }
    // A wrong key (401 from the headers), a refusal for balance, an unknown model.
    const unauthorized = await t.client("sk-gw-not-a-key").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(unauthorized.status).toBe(401);
    const broke = await t.newAccountWithKey({ credit: 0 });
    const refused = await t.client(broke.key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(refused.code).toBe("insufficient_balance");
    const unknown = await client.chat.completions.create({ model: "gpt-does-not-exist", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    expect(unknown.status).toBe(400);
    await flush(t);
    text = await scrape(t);
  });

  afterAll(async () => {
    await t?.stop();
  });

  it("counts requests by ingress, model, provider, status class and code, exactly", () => {
    const ok = { ingress: "openai-chat", model: MODEL, provider: "openai", status_class: "2xx", code: "ok" };
    expect(value(text, "gateway_requests_total", ok)).toBe(NON_STREAM + STREAMED);
    expect(value(text, "gateway_requests_total", { model: "other", provider: "other", status_class: "4xx", code: "invalid_api_key" })).toBe(1);
    expect(value(text, "gateway_requests_total", { model: MODEL, provider: "openai", status_class: "4xx", code: "insufficient_balance" })).toBe(1);
    expect(value(text, "gateway_requests_total", { model: "other", status_class: "4xx", code: "model_not_found" })).toBe(1);
    expect(total(text, "gateway_requests_total")).toBe(NON_STREAM + STREAMED + 3);
    expect(value(text, "gateway_refused_requests_total", { reason: "balance" })).toBe(1);
    expect(total(text, "gateway_refused_requests_total")).toBe(1);
  });

  it("observes durations of every request and the time to first token of each answer", () => {
    expect(value(text, "gateway_request_duration_seconds_count", { ingress: "openai-chat", model: MODEL })).toBe(NON_STREAM + STREAMED + 1);
    expect(value(text, "gateway_request_duration_seconds_count", { ingress: "openai-chat", model: "other" })).toBe(2);
    expect(value(text, "gateway_request_duration_seconds_bucket", { ingress: "openai-chat", model: MODEL, le: "+Inf" })).toBe(NON_STREAM + STREAMED + 1);
    expect(value(text, "gateway_time_to_first_token_seconds_count", { ingress: "openai-chat", model: MODEL })).toBe(NON_STREAM + STREAMED);
    expect(value(text, "gateway_time_to_first_token_seconds_sum", { model: MODEL })!).toBeGreaterThan(0);
  });

  it("sums tokens by type as the upstream reported them", () => {
    const answered = NON_STREAM + STREAMED;
    expect(value(text, "gateway_tokens_total", { model: MODEL, type: "input" })).toBe(answered * USAGE.prompt_tokens);
    expect(value(text, "gateway_tokens_total", { model: MODEL, type: "output" })).toBe(answered * USAGE.completion_tokens);
    expect(value(text, "gateway_tokens_total", { model: MODEL, type: "cache_read" })).toBe(answered * USAGE.cached_tokens);
    expect(value(text, "gateway_tokens_total", { model: MODEL, type: "cache_write" })).toBe(answered * USAGE.cache_write_tokens);
    expect(value(text, "gateway_tokens_total", { model: MODEL, type: "reasoning" })).toBe(answered * USAGE.reasoning_tokens);
  });

  it("bills exactly the generations' total cost; credits and holds are the ledger's own numbers", async () => {
    const generations = await t.gateway.service("storage")!.listGenerations(accountId, { limit: 100 });
    expect(generations).toHaveLength(NON_STREAM + STREAMED);
    const billed = generations.reduce((sum, g) => sum + g.totalCost, 0);
    expect(billed).toBeGreaterThan(0);
    expect(value(text, "gateway_billed_nano_usd_total", { model: MODEL })).toBe(billed);
    expect(total(text, "gateway_unbilled_nano_usd_total")).toBe(0);
    // One card credit of 10 USD (the broke account got none).
    expect(value(text, "gateway_credits_nano_usd", { kind: "card" })).toBe(10 * USD);
    expect(value(text, "gateway_credits_nano_usd", { kind: "bonus" })).toBe(0);
    expect(value(text, "gateway_holds_outstanding")).toBe(0);
    expect(value(text, "gateway_holds_outstanding_nano_usd")).toBe(0);
  });

  it("exports attempts, in-flight requests, commit latency and the process", () => {
    expect(value(text, "gateway_upstream_attempts_total", { provider: "openai", deployment: "openai#1", outcome: "ok" })).toBe(NON_STREAM + STREAMED);
    expect(value(text, "gateway_breaker_state", { provider: "openai", deployment: "openai#1" })).toBe(0);
    expect(value(text, "gateway_requests_in_flight")).toBe(0);
    expect(value(text, "gateway_store_commit_seconds_count")!).toBeGreaterThanOrEqual(1);
    expect(value(text, "process_resident_memory_bytes")!).toBeGreaterThan(0);
    expect(value(text, "process_cpu_seconds_total")!).toBeGreaterThan(0);
    expect(value(text, "gateway_event_loop_lag_seconds")!).toBeGreaterThanOrEqual(0);
    // Dropped: untrue under Bun (registry.ts).
    for (const name of ["process_heap_bytes", "nodejs_gc_duration_seconds", "nodejs_eventloop_lag_seconds", "nodejs_version_info"]) {
      expect(text).not.toContain(`# TYPE ${name} `);
    }
    // Account and key ids are never labels.
    expect(text).not.toContain(accountId);
  });

  it("keeps the number of series under a flood of unknown model ids and random paths", async () => {
    const { key } = await t.newAccountWithKey({ credit: 5 });
    // One unknown path first: the one series every unknown path counts in (route "other") exists before the flood.
    await (await fetch(`${t.url}/an-unknown-path`)).body?.cancel();
    const before = (await scrape(t)).split("\n").length;
    const client = t.client(key);
    for (let i = 0; i < 200; i++) {
      const id = `made-up-${crypto.randomUUID()}`;
      const answer = await client.chat.completions.create({ model: id, messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
      expect(answer.status).toBe(400);
      const stray = await fetch(`${t.url}/${crypto.randomUUID()}/${id}?q=${i}`);
      expect(stray.status).toBe(404);
      await stray.body?.cancel();
    }
    const after = await scrape(t);
    expect(after.split("\n").length).toBe(before);
    expect(after).not.toContain("made-up-");
    expect(value(after, "gateway_requests_total", { model: "other", status_class: "4xx", code: "model_not_found" })).toBe(201);
  });

  it("queries only metrics of the exposition in the Grafana dashboard (docs/grafana-dashboard.json)", () => {
    const dashboard = JSON.parse(readFileSync(join(import.meta.dir, "../../docs/grafana-dashboard.json"), "utf8"));
    const exprs: string[] = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === "object") {
        for (const [k, v] of Object.entries(node)) {
          if (k === "expr" && typeof v === "string") exprs.push(v);
          else walk(v);
        }
      }
    };
    walk(dashboard.panels);
    expect(exprs.length).toBeGreaterThanOrEqual(8);
    expect(dashboard.__inputs?.[0]?.name).toBe("DS_PROMETHEUS");
    const exported = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const missing: string[] = [];
    for (const expr of exprs) {
      for (const [name] of expr.matchAll(/\b(?:gateway|process|nodejs)_[a-z0-9_]+/g)) {
        const family = name.replace(/_(bucket|sum|count)$/, "");
        if (!exported.has(family) && !exported.has(name)) missing.push(`${name} (${expr})`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe("GET /metrics with METRICS_TOKEN", () => {
  let t: TestGateway;
  const TOKEN = "metrics-token-for-the-test";

  beforeAll(async () => {
    t = await startTestGateway({ env: { METRICS_TOKEN: TOKEN } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("answers 401 without the token or with another, 200 with it", async () => {
    const none = await fetch(t.url + "/metrics");
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    const wrong = await fetch(t.url + "/metrics", { headers: { authorization: "Bearer not-the-token" } });
    expect(wrong.status).toBe(401);
    await wrong.body?.cancel();
    const text = await scrape(t, TOKEN);
    expect(text).toContain("# TYPE gateway_requests_total counter");
  });
});

describe("GET /metrics: requests outside the pipeline", () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("counts them by route template and status class; unknown paths all go to route=\"other\"", async () => {
    for (let i = 0; i < 3; i++) expect((await fetch(t.url + "/health")).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await fetch(`${t.url}/no-such-path-${crypto.randomUUID()}`)).status).toBe(404);
    const unauthorized = await fetch(t.url + "/admin/v1/accounts/acct_missing");
    expect(unauthorized.status).toBe(401);
    const text = await scrape(t);
    expect(value(text, "gateway_route_requests_total", { route: "/health", status_class: "2xx" })).toBe(3);
    // The unknown paths, and the admin guard's refusal (it answers before any route is matched): never the path asked for.
    expect(value(text, "gateway_route_requests_total", { route: "other", status_class: "4xx" })).toBe(5);
    expect(text).not.toContain("acct_missing");
    expect(text).not.toContain("no-such-path");
    expect(total(text, "gateway_route_requests_total", { status_class: "4xx" })).toBe(5);
    // The scrape counts itself in the next one.
    expect(value(await scrape(t), "gateway_route_requests_total", { route: "/metrics", status_class: "2xx" })).toBe(1);
  });
});

describe("GET /metrics: requests the edge limit refused", () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway({ env: { EDGE_RATE_LIMIT_RPS: "3" } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("counts them as gateway_refused_requests_total{reason=\"edge\"} (they never reach the pipeline)", async () => {
    await Bun.sleep(1_000 - (Date.now() % 1000) + 5); // a fresh second
    const statuses = await Promise.all(Array.from({ length: 8 }, async () => (await fetch(t.url + "/health")).status));
    const refused = statuses.filter((status) => status === 429).length;
    expect(refused).toBeGreaterThanOrEqual(8 - 2 * 3); // whatever second each landed in, at most 6 passed
    await Bun.sleep(1_000 - (Date.now() % 1000) + 5); // the scrape in a second of its own
    const text = await scrape(t);
    expect(value(text, "gateway_refused_requests_total", { reason: "edge" })).toBe(refused);
    expect(total(text, "gateway_requests_total")).toBe(0); // /health is no inference request
  });
});

describe("GET /metrics: upstream attempts and breakers with two deployments", () => {
  let fake: FakeUpstream;
  let down: ReturnType<typeof Bun.serve>;
  let t: TestGateway;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    down = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => Response.json({ error: { message: "primary is down", type: "server_error", code: null } }, { status: 500 }),
    });
    t = await startTestGateway({
      fake,
      env: {
        UPSTREAM_HEALTH_REDIS_PREFIX: `metrics-test-${crypto.randomUUID()}:`,
        OPENAI_BASE_URL: `http://127.0.0.1:${down.port}/v1,${fake.url}/v1`,
        OPENAI_API_KEY: "sk-primary-key,sk-secondary-key",
      },
    });
  });
  afterAll(async () => {
    await t?.stop();
    down?.stop(true);
    await fake?.stop();
  });

  it("counts each deployment's attempts by outcome and shows the primary's breaker open after 5 failures", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    const client = t.client(key);
    const idle = await scrape(t);
    expect(value(idle, "gateway_breaker_state", { provider: "openai", deployment: "openai#1" })).toBe(0);
    expect(value(idle, "gateway_breaker_state", { provider: "openai", deployment: "openai#2" })).toBe(0);
    // The breaker opens after 5 consecutive failures (plugins-config.yaml): the 6th request goes to the secondary only.
    for (let i = 0; i < 6; i++) {
      const answer = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hello" }] });
      expect(answer.choices[0]?.message.content).toBeString();
    }
    const text = await scrape(t);
    expect(value(text, "gateway_upstream_attempts_total", { provider: "openai", deployment: "openai#1", outcome: "server_error" })).toBe(5);
    expect(value(text, "gateway_upstream_attempts_total", { provider: "openai", deployment: "openai#2", outcome: "ok" })).toBe(6);
    expect(total(text, "gateway_upstream_attempts_total")).toBe(11);
    expect(value(text, "gateway_breaker_state", { provider: "openai", deployment: "openai#1" })).toBe(2);
    expect(value(text, "gateway_breaker_state", { provider: "openai", deployment: "openai#2" })).toBe(0);
    expect(value(text, "gateway_requests_total", { model: MODEL, code: "ok" })).toBe(6);
  });
});
