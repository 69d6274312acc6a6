/**
 * Scale-out benchmark: throughput and p99 of non-streaming chat completions (autocannon, c=64 by
 * default, ~5 s each) against the fake upstream, in one run, for
 *
 *   1. SQLite, one instance (rate limits counted in memory),
 *   2. Postgres + Redis, one instance,
 *   3. Postgres + Redis, two instances on the same database and Redis: the connections are split
 *      across both ports (two autocannon runs in parallel, one per instance), req/s summed, p99 pooled.
 *
 * Each case runs twice: all connections on ONE account and key (the hot-account case: every reservation,
 * from every instance, serializes on that account's row lock), then each connection on its own account
 * and key (64 accounts at c=64: the multi-tenant case). Every key sits on an account with 1,000,000 USD of
 * card credit and has a 1,000,000 USD key budget and RPM/TPM limits of 10,000,000 (checked and charged on
 * every request, never reached), so each request takes the whole path: key cache, rate-limit script
 * (memory or Redis), budget reservation (on Postgres: the reservations of one event-loop turn decided in one
 * row-locked transaction), group-committed metering.
 *
 *   node_modules/.bin/bun bench/scale-out.ts [--duration 5] [--warmup 1] [--connections 64] [--accounts 1,64] [--pool-size 20] [--json]
 *
 * Postgres: a scratch database `gw_bench_scale_<pid>_<time>` is created on POSTGRES_TEST_URL, DATABASE_URL
 * (when postgres://) or postgres://postgres@127.0.0.1:5432/postgres, and dropped at the end.
 * Redis: REDIS_URL or redis://127.0.0.1:6379, with a per-run key prefix.
 *
 * Library use (to wire it into bench/run.ts): `const result = await runScaleOut({ durationMs: 5000 })`.
 */
import autocannon from "autocannon";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { ADMIN_TOKEN, BUN, UPSTREAM_KEY, createScratchDatabase, f, fInt, freePort, postgresServerUrl, startFakeUpstream, installCleanup, log, spawnChild, stopChild, table, waitReady, type Child } from "./lib.ts";
import { chatBody } from "./stream-client.ts";

export interface ScaleOutOptions {
  /** Measured time per case (default 5,000 ms). */
  durationMs?: number;
  /** Warm-up per case, same load, not measured (default 1,000 ms). */
  warmupMs?: number;
  /** Total autocannon connections per case, split evenly over the instances (default 64). */
  connections?: number;
  /** A Postgres server URL whose user may create databases (the scratch database is made on it). */
  postgresUrl?: string;
  redisUrl?: string;
  /** Account spreads to measure: 1 = every connection on one account and key; N = connection i on account i mod N (default [1, connections]). */
  accounts?: number[];
  /** Postgres connections per gateway process (DATABASE_POOL_SIZE); default: the config's (20). */
  poolSize?: number;
  /** A running fake upstream to use (e.g. bench/run.ts's); default: one is started and stopped here. */
  upstreamUrl?: string;
  /** Print the table (default true). */
  print?: boolean;
}

export interface ScaleOutFigures {
  /** 2xx responses per second, summed over the instances. */
  rps: number;
  p50: number;
  p99: number;
  mean: number;
  /** 2xx responses measured. */
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** req/s of each instance. */
  perInstanceRps: number[];
}

export interface ScaleOutCase {
  name: string;
  store: "sqlite" | "postgres";
  rateLimits: "memory" | "redis";
  instances: number;
  /** Accounts (one key each) the connections are spread over. */
  accounts: number;
  figures: ScaleOutFigures;
}

export interface ScaleOutResult {
  settings: { duration_ms: number; warmup_ms: number; connections: number; accounts: number[]; model: string; cpus: number; pool_size: number | null };
  cases: ScaleOutCase[];
  /** By account spread ("1", "64"). */
  ratios: Record<
    string,
    {
      /** Postgres + Redis (one instance) ÷ SQLite, req/s. */
      postgres_one_over_sqlite: number;
      /** Two instances ÷ one instance (Postgres + Redis), req/s. */
      postgres_two_over_one: number;
      postgres_two_over_sqlite: number;
    }
  >;
}

const KEY_LIMIT = 10_000_000;

interface Run {
  latencies: number[];
  ok: number;
  durationS: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

/** `keyOf(i)` is the key of this run's i-th connection. */
function cannonRun(url: string, keyOf: (connection: number) => string, body: string, connections: number, durationMs: number): Promise<Run> {
  const latencies: number[] = [];
  const headers = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" });
  let connection = 0;
  const options = {
    url: `${url}/v1/chat/completions`,
    method: "POST",
    headers: headers(keyOf(0)),
    body,
    connections,
    duration: durationMs / 1000,
    // autocannon calls this once per connection: each connection keeps its own key.
    setupClient: (client: { setHeaders(headers: Record<string, string>): void }) => client.setHeaders(headers(keyOf(connection++))),
  };
  const instance = autocannon(options as Parameters<typeof autocannon>[0]);
  // Every response time (float ms): autocannon's own histogram has 1 ms resolution.
  instance.on("response", (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    latencies.push(responseTime);
  });
  return Promise.resolve(instance).then((result) => ({
    latencies,
    ok: result["2xx"],
    durationS: result.duration,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  }));
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/**
 * `connections` split evenly over the instances, all in parallel for `durationMs`; figures summed / pooled.
 * Connection i (counted over all instances) uses keys[i mod keys.length].
 */
async function splitLoad(urls: string[], keys: string[], body: string, connections: number, durationMs: number): Promise<ScaleOutFigures> {
  const share = (index: number) => Math.floor(connections / urls.length) + (index < connections % urls.length ? 1 : 0);
  let first = 0;
  const runs = await Promise.all(
    urls.map((url, index) => {
      const offset = first;
      first += share(index);
      return cannonRun(url, (connection) => keys[(offset + connection) % keys.length]!, body, share(index), durationMs);
    }),
  );
  const latencies = runs.flatMap((run) => run.latencies).sort((a, b) => a - b);
  const perInstanceRps = runs.map((run) => run.ok / run.durationS);
  return {
    rps: perInstanceRps.reduce((sum, rps) => sum + rps, 0),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    mean: latencies.reduce((sum, value) => sum + value, 0) / Math.max(1, latencies.length),
    requests: runs.reduce((sum, run) => sum + run.ok, 0),
    non2xx: runs.reduce((sum, run) => sum + run.non2xx, 0),
    errors: runs.reduce((sum, run) => sum + run.errors, 0),
    timeouts: runs.reduce((sum, run) => sum + run.timeouts, 0),
    perInstanceRps,
  };
}

async function startGateway(name: string, upstreamUrl: string, env: Record<string, string>): Promise<Child> {
  const port = freePort();
  const child = spawnChild(
    name,
    [BUN, "src/index.ts"],
    {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: String(port),
      HOST: "127.0.0.1",
      EDGE_RATE_LIMIT_RPS: "0",
      GATEWAY_LOG: "silent",
      GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
      GATEWAY_SANDBOX: "false",
      OPENAI_BASE_URL: `${upstreamUrl}/v1`,
      OPENAI_API_KEY: UPSTREAM_KEY,
      REDIS_URL: "",
      ...env,
    },
    `http://127.0.0.1:${port}`,
  );
  await waitReady(child, "/ready", true, 30_000);
  return child;
}

async function admin(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text).data;
}

/** `count` accounts with one key each (see the header): limits checked on every request, never reached. */
async function provisionKeys(url: string, count: number): Promise<string[]> {
  const keys: string[] = [];
  for (let index = 0; index < count; index++) keys.push(await provisionKey(url));
  return keys;
}

async function provisionKey(url: string): Promise<string> {
  const account = await admin(url, "POST", "/admin/v1/accounts", { name: "scale-out bench" });
  await admin(url, "POST", `/admin/v1/accounts/${account.id}/credits`, { amount: 1_000_000, kind: "card", reference: `scale-${crypto.randomUUID()}` });
  const key = await admin(url, "POST", `/admin/v1/accounts/${account.id}/keys`, {
    name: "scale-out bench",
    limit: 1_000_000,
    rate_limit: { requests_per_minute: KEY_LIMIT, tokens_per_minute: KEY_LIMIT },
  });
  return key.key;
}

/** Runs the three cases; stops every process it started and drops its scratch database, also on error. */
export async function runScaleOut(options: ScaleOutOptions = {}): Promise<ScaleOutResult> {
  const durationMs = options.durationMs ?? 5_000;
  const warmupMs = options.warmupMs ?? 1_000;
  const connections = options.connections ?? 64;
  const spreads = options.accounts ?? [1, connections];
  const maxAccounts = Math.max(...spreads);
  const redisUrl = options.redisUrl ?? process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  const serverUrl = postgresServerUrl(options.postgresUrl);
  const body = chatBody({ stream: false });
  const started: Child[] = [];
  const tmp = mkdtempSync(join(tmpdir(), "gateway-scale-out-"));
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>> | undefined;
  const cases: ScaleOutCase[] = [];

  /** The case once per account spread. */
  async function measure(name: string, store: ScaleOutCase["store"], urls: string[], keys: string[]): Promise<void> {
    for (const accounts of spreads) {
      const label = `${name}, ${accounts} account${accounts === 1 ? "" : "s"}`;
      log(`scale-out: ${label}: warm-up ${warmupMs} ms, then ${durationMs} ms at c=${connections}${urls.length > 1 ? ` (${urls.length} × ${connections / urls.length})` : ""}`);
      const used = keys.slice(0, accounts);
      await splitLoad(urls, used, body, connections, warmupMs);
      const figures = await splitLoad(urls, used, body, connections, durationMs);
      if (figures.non2xx > 0 || figures.errors > 0) log(`WARNING: ${label}: ${figures.non2xx} non-2xx, ${figures.errors} errors`);
      cases.push({ name, store, rateLimits: store === "sqlite" ? "memory" : "redis", instances: urls.length, accounts, figures });
    }
  }

  try {
    let upstreamUrl = options.upstreamUrl;
    if (!upstreamUrl) {
      const upstream = await startFakeUpstream();
      started.push(upstream);
      upstreamUrl = upstream.url;
    }

    // 1. SQLite, one instance.
    const sqlite = await startGateway("gateway (SQLite)", upstreamUrl, { DATABASE_URL: `sqlite:${join(tmp, "scale.db")}` });
    started.push(sqlite);
    await measure("SQLite, 1 instance", "sqlite", [sqlite.url], await provisionKeys(sqlite.url, maxAccounts));
    await stopChild(sqlite);

    // 2. and 3. Postgres + Redis: one instance, then a second one on the same database and Redis.
    scratch = await createScratchDatabase(serverUrl, "gw_bench_scale");
    const shared: Record<string, string> = {
      DATABASE_URL: scratch.url,
      REDIS_URL: redisUrl,
      RATE_LIMIT_REDIS_PREFIX: `gateway-scale-bench:${crypto.randomUUID().slice(0, 8)}:`,
    };
    if (options.poolSize !== undefined) shared.DATABASE_POOL_SIZE = String(options.poolSize);
    const first = await startGateway("gateway 1 (Postgres + Redis)", upstreamUrl, shared);
    started.push(first);
    const keys = await provisionKeys(first.url, maxAccounts);
    await measure("Postgres + Redis, 1 instance", "postgres", [first.url], keys);
    const second = await startGateway("gateway 2 (Postgres + Redis)", upstreamUrl, shared);
    started.push(second);
    await measure("Postgres + Redis, 2 instances", "postgres", [first.url, second.url], keys);
  } finally {
    for (const child of started.reverse()) await stopChild(child);
    await scratch?.drop();
    rmSync(tmp, { recursive: true, force: true });
  }

  const rps = (store: ScaleOutCase["store"], instances: number, accounts: number) =>
    cases.find((c) => c.store === store && c.instances === instances && c.accounts === accounts)?.figures.rps ?? Number.NaN;
  const result: ScaleOutResult = {
    settings: {
      duration_ms: durationMs,
      warmup_ms: warmupMs,
      connections,
      accounts: spreads,
      model: "gpt-6-luna",
      cpus: cpus().length,
      pool_size: options.poolSize ?? null,
    },
    cases,
    ratios: Object.fromEntries(
      spreads.map((accounts) => [
        String(accounts),
        {
          postgres_one_over_sqlite: rps("postgres", 1, accounts) / rps("sqlite", 1, accounts),
          postgres_two_over_one: rps("postgres", 2, accounts) / rps("postgres", 1, accounts),
          postgres_two_over_sqlite: rps("postgres", 2, accounts) / rps("sqlite", 1, accounts),
        },
      ]),
    ),
  };
  if (options.print ?? true) printScaleOut(result);
  return result;
}

export function printScaleOut(result: ScaleOutResult): void {
  const rps = (store: ScaleOutCase["store"], instances: number, accounts: number) =>
    result.cases.find((c) => c.store === store && c.instances === instances && c.accounts === accounts)?.figures.rps ?? Number.NaN;
  const ordered = [...result.cases].sort((a, b) => a.accounts - b.accounts);
  table(
    `Scale-out: non-streaming chat (${result.settings.model}), c=${result.settings.connections} in total (split over the instances), ` +
      `${result.settings.duration_ms / 1000} s each; keys with RPM/TPM ${KEY_LIMIT.toLocaleString("en-US")} and a key budget; ${result.settings.cpus} CPUs shared by everything`,
    ["case", "accounts", "rate limits", "req/s", "p50 ms", "p99 ms", "×SQLite", "×1 instance", "req/s per instance", "non2xx/err"],
    ordered.map((c) => [
      c.name,
      String(c.accounts),
      c.rateLimits,
      fInt(c.figures.rps),
      f(c.figures.p50, 2),
      f(c.figures.p99, 2),
      f(c.figures.rps / rps("sqlite", 1, c.accounts)),
      c.store === "postgres" ? f(c.figures.rps / rps("postgres", 1, c.accounts)) : "-",
      c.figures.perInstanceRps.map((value) => fInt(value)).join(" + "),
      `${c.figures.non2xx}/${c.figures.errors}`,
    ]),
  );
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const value = (name: string) => {
    const index = args.indexOf(name);
    return index >= 0 ? args[index + 1] : args.find((arg) => arg.startsWith(name + "="))?.slice(name.length + 1);
  };
  const seconds = (name: string) => (value(name) === undefined ? undefined : Number(value(name)) * 1000);
  installCleanup();
  const result = await runScaleOut({
    durationMs: seconds("--duration"),
    warmupMs: seconds("--warmup"),
    connections: value("--connections") === undefined ? undefined : Number(value("--connections")),
    accounts: value("--accounts")?.split(",").map(Number),
    poolSize: value("--pool-size") === undefined ? undefined : Number(value("--pool-size")),
  });
  if (args.includes("--json")) console.log(JSON.stringify(result, null, 2));
  process.exit(0);
}
