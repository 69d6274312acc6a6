/**
 * What two worker processes share (GATEWAY_WORKERS=2, core/primary.ts): the rate-limit windows (kept by the primary
 * when there is no Redis: src/plugins/rate-limit/primary-store.ts) and the metrics (GET /metrics merges every
 * worker's: src/plugins/metrics/workers.ts). The gateway runs as its own processes; every request goes on a new
 * connection, so the kernel spreads them over both workers (SO_REUSEPORT), and the request lines' `worker` field
 * shows which worker served each one.
 */
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { PROCESS_ADMIN_TOKEN, startGatewayProcess, type GatewayProcess } from "../helpers/gateway-process.ts";
import { waitFor } from "../helpers/processes.ts";

setDefaultTimeout(60_000);

const MODEL = "gpt-6-luna";
const METRICS_TOKEN = "metrics-token-workers-9f3a";
/** Leases of 1 s: a key with rpm 300 takes 5 requests per lease (rpm 10: none, every request asks the primary). */
const LEASE_MS = 1_000;

let fake: FakeUpstream;
let gateway: GatewayProcess;
let accountId: string;

beforeAll(async () => {
  fake = await startFakeUpstream();
  gateway = await startGatewayProcess({
    GATEWAY_WORKERS: "2",
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "sk-workers-upstream",
    METRICS_TOKEN,
    RATE_LIMIT_LEASE_MS: String(LEASE_MS),
  });
  // /ready answers once worker 0 listens; the primary says "gateway listening" once both do.
  await waitFor(() => gateway.stdout.text().includes('"message":"gateway listening"'), 30_000, "both workers listening");
  accountId = (await gateway.newAccountWithKey(50)).accountId; // card-funded: no promotional caps
});

afterAll(async () => {
  if (gateway?.alive()) {
    gateway.child.kill("SIGTERM"); // the primary stops its workers
    await gateway.child.exited;
  }
  await gateway?.stop();
  await fake?.stop();
});

async function keyWithLimit(requestsPerMinute: number): Promise<string> {
  const created = await gateway.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: `rpm ${requestsPerMinute}`, rate_limit: { requests_per_minute: requestsPerMinute } });
  expect(created.status).toBe(201);
  return created.body.data.key;
}

/** One chat completion on a connection of its own: the status and the gateway's request id. */
async function chat(key: string): Promise<{ status: number; requestId: string | null }> {
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", connection: "close" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 16 }),
    keepalive: false,
  });
  await response.arrayBuffer();
  return { status: response.status, requestId: response.headers.get("x-gateway-request-id") };
}

/** `count` requests, `concurrency` at a time. */
async function burst(key: string, count: number, concurrency: number): Promise<{ status: number; requestId: string | null }[]> {
  const results: { status: number; requestId: string | null }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        results.push(await chat(key));
      }
    }),
  );
  return results;
}

/** The request lines written so far (stdout, one JSON object per line). */
function requestLines(): any[] {
  return gateway.stdout
    .text()
    .split("\n")
    .filter((line) => line.includes('"message":"request"'))
    .map((line) => JSON.parse(line));
}

/** The worker that served each request id (its request line). */
async function workersOf(requestIds: string[]): Promise<number[]> {
  const wanted = new Set(requestIds);
  let byId = new Map<string, number>();
  await waitFor(
    () => {
      byId = new Map(requestLines().filter((line) => wanted.has(line.request_id)).map((line) => [line.request_id, line.worker]));
      return byId.size === wanted.size;
    },
    5_000,
    "the request lines of every request",
  );
  return requestIds.map((id) => byId.get(id)!);
}

describe("two workers share one rate-limit count (the primary's, no Redis)", () => {
  it("a key with rpm 10 gets exactly 10 of 30 requests, whichever worker serves them", async () => {
    const key = await keyWithLimit(10);
    const started = performance.now();
    const results = await burst(key, 30, 5);
    // One request drains every 6 s: the burst must end before that for the count to be exact.
    expect(performance.now() - started).toBeLessThan(6_000);
    expect(results.filter((result) => result.status === 200).length).toBe(10);
    expect(results.filter((result) => result.status === 429).length).toBe(20);
    const workers = await workersOf(results.map((result) => result.requestId!));
    expect(new Set(workers)).toEqual(new Set([0, 1]));
  });

  it("a key with a large limit (served from leases) never gets more than its limit across the workers", async () => {
    const rpm = 300;
    const key = await keyWithLimit(rpm);
    const started = performance.now();
    const results = await burst(key, 400, 16);
    const elapsed = performance.now() - started;
    const admitted = results.filter((result) => result.status === 200);
    // GCRA lets the whole minute's burst through at once, then one request per 60 000 / rpm ms.
    const drained = Math.floor((rpm * elapsed) / 60_000);
    expect(admitted.length).toBeLessThanOrEqual(rpm + drained);
    // At most one lease per worker (5 requests) can be left unused at the end.
    expect(admitted.length).toBeGreaterThanOrEqual(rpm - 2 * ((rpm * LEASE_MS) / 60_000));
    expect(results.filter((result) => result.status !== 200 && result.status !== 429)).toEqual([]);
    const workers = await workersOf(admitted.map((result) => result.requestId!));
    expect(workers.filter((worker) => worker === 0).length).toBeGreaterThan(0);
    expect(workers.filter((worker) => worker === 1).length).toBeGreaterThan(0);
  });
});

describe("GET /metrics with two workers", () => {
  /** gateway_requests_total summed over its series. */
  function requestsTotal(text: string): number {
    return text
      .split("\n")
      .filter((line) => line.startsWith("gateway_requests_total{"))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
  }

  async function scrape(token: string | null): Promise<{ status: number; text: string }> {
    const response = await fetch(`${gateway.url}/metrics`, {
      headers: { connection: "close", ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
      keepalive: false,
    });
    return { status: response.status, text: await response.text() };
  }

  it("answers every worker's requests, merged, whichever worker the scrape reaches", async () => {
    // The rate-limit tests above went through the pipeline too: count from here on.
    const before = requestsTotal((await scrape(METRICS_TOKEN)).text);
    const key = (await gateway.newAccountWithKey(5)).key;
    const results = await burst(key, 40, 4);
    expect(results.every((result) => result.status === 200)).toBe(true);
    expect(new Set(await workersOf(results.map((result) => result.requestId!)))).toEqual(new Set([0, 1]));

    const metricsLines = () => requestLines().filter((line) => line.path === "/metrics" && line.status === 200);
    const already = metricsLines().length;
    let scrapes = 0;
    // Scrape until both workers have answered at least once (each scrape lands on either at random).
    while (scrapes < 60) {
      const { status, text } = await scrape(METRICS_TOKEN);
      scrapes++;
      expect(status).toBe(200);
      expect(requestsTotal(text) - before).toBe(40);
      expect(text).toContain("\ngateway_workers 2\n");
      const answeredBy = new Set(metricsLines().slice(already).map((line) => line.worker));
      if (answeredBy.has(0) && answeredBy.has(1)) break;
    }
    expect(scrapes).toBeLessThan(60);
  });

  it("still needs the token", async () => {
    const refused = await scrape(null);
    expect(refused.status).toBe(401);
    expect(refused.text).not.toContain("gateway_requests_total");
    expect((await scrape("wrong-token")).status).toBe(401);
  });
});

describe("two workers share upstream breaker transitions (through the primary, no Redis)", () => {
  /** GET /admin/v1/upstreams on a connection of its own: the OpenAI deployment's breaker as the answering worker sees it. */
  async function openaiBreaker(): Promise<string> {
    const response = await fetch(`${gateway.url}/admin/v1/upstreams`, {
      headers: { authorization: `Bearer ${PROCESS_ADMIN_TOKEN}`, connection: "close" },
      keepalive: false,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { provider: string; deployments: { breaker: string }[] }[] };
    return body.data.find((entry) => entry.provider === "openai")!.deployments[0]!.breaker;
  }

  // Last in this file: the OpenAI deployment stays down for its cooldown.
  it("a breaker one worker opens (the upstream refused its key) is open on every worker", async () => {
    const key = (await gateway.newAccountWithKey(5)).key;
    const refused = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", connection: "close" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: 'hi [[fake {"status":401}]]' }], max_tokens: 16 }),
      keepalive: false,
    });
    await refused.arrayBuffer();
    expect(refused.status).toBeGreaterThanOrEqual(400);

    const viewLines = () => requestLines().filter((line) => line.path === "/admin/v1/upstreams" && line.status === 200);
    let asked = 0;
    // Ask until both workers have answered (each connection lands on either); a transition reaches the other
    // worker through the primary within milliseconds.
    await waitFor(async () => (await openaiBreaker()) === "open", 2_000, "the breaker open");
    while (asked < 60) {
      expect(await openaiBreaker()).toBe("open");
      asked++;
      if (new Set(viewLines().map((line) => line.worker)).size === 2) break;
    }
    expect(asked).toBeLessThan(60);
  });
});
