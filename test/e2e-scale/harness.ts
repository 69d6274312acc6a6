/**
 * Shared by the scale-out suites: real gateway processes (`bun src/index.ts`) on one Postgres scratch
 * database and one Redis, the fake upstream behind them, and the service restarts of the outage suite.
 *
 * Needs DATABASE_URL (or POSTGRES_TEST_URL) = postgres://… of a user that may create databases, and
 * REDIS_URL. Each suite file creates its own scratch database through that server and drops it at the end.
 */
import { SQL, type Subprocess } from "bun";
import { expect } from "bun:test";
import { join, resolve } from "node:path";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { spawnGatewayChild, untilReady, waitFor } from "../helpers/processes.ts";
import { countPromptTokens } from "../../src/plugins/token-count/count.ts";

export const ROOT = resolve(import.meta.dir, "../..");
export const ADMIN_TOKEN = "e2e-scale-admin-token";

/** The Postgres server the suites create their scratch databases on, or undefined (suite skipped). */
export const POSTGRES_URL: string | undefined =
  process.env.POSTGRES_TEST_URL ?? (/^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "") ? process.env.DATABASE_URL : undefined);
export const REDIS_URL: string | undefined = /^rediss?:\/\//i.test(process.env.REDIS_URL ?? "") ? process.env.REDIS_URL : undefined;

/** Why the suites are skipped, or null when both services are configured. */
export const SKIP_REASON: string | null =
  POSTGRES_URL && REDIS_URL
    ? null
    : `skipped: set ${[POSTGRES_URL ? null : "DATABASE_URL=postgres://… (or POSTGRES_TEST_URL)", REDIS_URL ? null : "REDIS_URL=redis://…"]
        .filter(Boolean)
        .join(" and ")}, e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379`;

// ------------------------------------------------------------------------------------------------
// Scratch database
// ------------------------------------------------------------------------------------------------

export interface ScratchDatabase {
  name: string;
  url: string;
  /** A small pool on the scratch database, for the checks. */
  sql: SQL;
  drop(): Promise<void>;
}

/** A new, empty database on the suite's server (gw_scale_<pid>_<time>_<label>), dropped by `drop()`. */
export async function createScratchDatabase(label: string): Promise<ScratchDatabase> {
  const adminUrl = POSTGRES_URL!;
  const name = `gw_scale_${process.pid}_${Date.now().toString(36)}_${label}`;
  const admin = new SQL({ url: adminUrl, max: 1 });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.close();
  }
  const parsed = new URL(adminUrl);
  parsed.pathname = "/" + name;
  const url = parsed.toString();
  const sql = new SQL({ url, max: 2, idleTimeout: 5 });
  return {
    name,
    url,
    sql,
    async drop() {
      await sql.close().catch(() => {});
      const dropper = new SQL({ url: adminUrl, max: 1 });
      try {
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.close();
      }
    },
  };
}

/** One row of numbers: int8/numeric come back as strings from Bun SQL. */
export async function numbers(sql: SQL, query: string, params: unknown[] = []): Promise<Record<string, number>> {
  const [row] = await sql.unsafe(query, params);
  return Object.fromEntries(Object.entries(row ?? {}).map(([key, value]) => [key, value === null ? 0 : Number(value)]));
}

// ------------------------------------------------------------------------------------------------
// Gateway processes
// ------------------------------------------------------------------------------------------------

export { waitFor };

export interface GatewayProcess {
  name: string;
  url: string;
  child: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything the process printed so far (stdout, then stderr). */
  output(): string;
}

export interface GatewayOptions {
  databaseUrl: string;
  upstreamUrl: string;
  /** Prefix of the rate-limit keys in Redis: one per suite, so suites never share counters. */
  redisPrefix: string;
  /** Log lines on stdout (default: silent). */
  logs?: boolean;
  env?: Record<string, string>;
}

/** Starts `bun src/index.ts` and waits for GET /ready. */
export async function spawnGateway(name: string, options: GatewayOptions): Promise<GatewayProcess> {
  const started = spawnGatewayChild({
    DATABASE_URL: options.databaseUrl,
    REDIS_URL: REDIS_URL!,
    RATE_LIMIT_REDIS_PREFIX: options.redisPrefix,
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    GATEWAY_SANDBOX: "false",
    OPENAI_BASE_URL: `${options.upstreamUrl}/v1`,
    OPENAI_API_KEY: "sk-upstream",
    GATEWAY_LOG: options.logs ? "" : "silent",
    ...options.env,
  });
  await untilReady(started, 20_000, name);
  return { name, url: started.url, child: started.child, output: () => started.stdout.text() + started.stderr.text() };
}

/** SIGTERM (graceful: drains and flushes), SIGKILL after `graceMs`; resolves with the exit code. */
export async function stopGateway(gateway: GatewayProcess, graceMs = 5_000): Promise<number | null> {
  const { child } = gateway;
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGTERM");
    const exited = await Promise.race([child.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
    if (!exited) child.kill("SIGKILL");
  }
  await child.exited;
  return child.exitCode;
}

// ------------------------------------------------------------------------------------------------
// HTTP
// ------------------------------------------------------------------------------------------------

export async function admin(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await response.json()) as any;
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json.data;
}

export interface FundedKey {
  accountId: string;
  keyId: string;
  key: string;
}

/** An account with a card credit (paid: no promotional caps) and a key on it, through one instance's admin API. */
export async function newAccountWithKey(url: string, creditUsd: string | number, key: Record<string, unknown> = {}): Promise<FundedKey> {
  const account = await admin(url, "POST", "/admin/v1/accounts", { name: "scale-out" });
  await admin(url, "POST", `/admin/v1/accounts/${account.id}/credits`, { amount: creditUsd, kind: "card", reference: crypto.randomUUID() });
  const created = await admin(url, "POST", `/admin/v1/accounts/${account.id}/keys`, { name: "scale-out key", ...key });
  return { accountId: account.id, keyId: created.id, key: created.key };
}

export interface Outcome {
  /** Index of the instance the request went to. */
  instance: number;
  status: number;
  code: string | null;
  message: string | null;
  requestId: string | null;
  retryAfter: string | null;
  /** Client-side times (performance.now()). */
  sentAt: number;
  answeredAt: number;
  /** Network failure or timeout (no HTTP answer). */
  error?: string;
}

/** POST /v1/chat/completions; never throws (a failure without an HTTP answer is `status: 0`). */
export async function chat(url: string, instance: number, key: string, body: unknown, timeoutMs = 10_000): Promise<Outcome> {
  const sentAt = performance.now();
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const json = (await response.json().catch(() => null)) as any;
    return {
      instance,
      status: response.status,
      code: json?.error?.code ?? null,
      message: json?.error?.message ?? null,
      requestId: response.headers.get("x-gateway-request-id"),
      retryAfter: response.headers.get("retry-after"),
      sentAt,
      answeredAt: performance.now(),
    };
  } catch (error) {
    return { instance, status: 0, code: null, message: null, requestId: null, retryAfter: null, sentAt, answeredAt: performance.now(), error: String(error) };
  }
}

export async function getJson(url: string, path: string, key: string): Promise<{ status: number; body: any }> {
  const response = await fetch(url + path, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, body: await response.json().catch(() => null) };
}

/** `count` requests at once, spread round-robin over the instances. */
export function burst(urls: string[], key: string, body: unknown, count: number): Promise<Outcome[]> {
  return Promise.all(Array.from({ length: count }, (_, index) => chat(urls[index % urls.length]!, index % urls.length, key, body)));
}

/** "status code" tallies, e.g. {"200": 7, "400 insufficient_balance": 93}. */
export function tally(outcomes: Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) {
    const label = o.status === 200 ? "200" : o.status === 0 ? `no answer: ${o.error}` : `${o.status} ${o.code}`;
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
}

// ------------------------------------------------------------------------------------------------
// Requests of a known cost
// ------------------------------------------------------------------------------------------------

const catalog = loadCatalog(join(ROOT, "catalog.yaml"));
/** $40 per million output tokens: 18,000 output tokens ≈ $0.72 a request. */
export const EXPENSIVE_MODEL = "gpt-6.2-astra";
/** $0.10 / $0.50 per million: a cheap request. */
export const CHEAP_MODEL = "gpt-6-luna";

/**
 * A request whose real cost equals the reservation the gateway holds for it: the fake upstream reports
 * the prompt's token bound as cache-write tokens (the dearest input price) and max_tokens of output.
 */
export function exactCostRequest(label: string, maxTokens = 18_000) {
  const entry = catalog.get(EXPENSIVE_MODEL)!;
  let bound = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    const directive = { usage: { prompt_tokens: bound, completion_tokens: maxTokens, cache_write_tokens: bound } };
    const messages = [{ role: "user" as const, content: `${label} [[fake ${JSON.stringify(directive)}]]` }];
    const next = countPromptTokens({ messages }, true);
    if (next === bound) {
      const prices = catalog.pricesFor(entry, bound, new Date());
      expect(prices.cacheWrite).toBe(Math.max(prices.input, prices.cacheRead, prices.cacheWrite));
      return { body: { model: EXPENSIVE_MODEL, messages, max_tokens: maxTokens }, cost: bound * prices.cacheWrite + maxTokens * prices.output };
    }
    bound = next;
  }
  throw new Error("prompt bound did not converge");
}

/** A cheap request with a fixed usage; `delayMs` keeps it in flight that long at the upstream. */
export function cheapRequest(label: string, delayMs = 0) {
  const directive = { usage: { prompt_tokens: 40, completion_tokens: 20 }, ...(delayMs > 0 ? { delay_ms: delayMs } : {}) };
  return { model: CHEAP_MODEL, max_tokens: 100, messages: [{ role: "user", content: `${label} [[fake ${JSON.stringify(directive)}]]` }] };
}

// ------------------------------------------------------------------------------------------------
// Services (outage suite)
// ------------------------------------------------------------------------------------------------

async function run(cmd: string[], timeoutMs = 30_000): Promise<{ code: number | null; out: string }> {
  const child = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
  await child.exited;
  clearTimeout(timer);
  return { code: child.exitCode, out: (out + err).trim() };
}

export async function redisUp(): Promise<boolean> {
  const { code, out } = await run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"], 5_000);
  return code === 0 && out === "PONG";
}

export async function postgresUp(): Promise<boolean> {
  return (await run(["pg_isready", "-h", "127.0.0.1", "-p", "5432"], 5_000)).code === 0;
}

export async function stopRedis(): Promise<void> {
  await run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave"], 10_000);
  await waitFor(async () => !(await redisUp()), 5_000, "redis to stop", 20);
}

/** Starts Redis exactly as CI does; a no-op when it already answers. */
export async function startRedis(): Promise<void> {
  if (await redisUp()) return;
  const { code, out } = await run([
    "redis-server",
    "--daemonize", "yes",
    "--bind", "127.0.0.1", "-::1",
    "--port", "6379",
    "--save", "",
    "--appendonly", "no",
    "--dir", "/var/lib/redis",
    "--logfile", "/var/log/redis/ci.log",
  ]);
  if (code !== 0) throw new Error(`redis-server failed (${code}): ${out}`);
  await waitFor(redisUp, 10_000, "redis to answer PING", 20);
}

async function postgresCluster(): Promise<string> {
  const { out } = await run(["ls", "/etc/postgresql"]);
  const version = out.split(/\s+/).filter(Boolean)[0];
  if (!version) throw new Error("no cluster under /etc/postgresql");
  return version;
}

export async function stopPostgres(): Promise<void> {
  const { code, out } = await run(["pg_ctlcluster", "--skip-systemctl-redirect", await postgresCluster(), "main", "stop"]);
  if (code !== 0 && (await postgresUp())) throw new Error(`pg_ctlcluster stop failed (${code}): ${out}`);
}

/** Starts the cluster; a no-op when it already accepts connections. */
export async function startPostgres(): Promise<void> {
  if (await postgresUp()) return;
  const { code, out } = await run(["pg_ctlcluster", "--skip-systemctl-redirect", await postgresCluster(), "main", "start"]);
  if (code !== 0 && !(await postgresUp())) throw new Error(`pg_ctlcluster start failed (${code}): ${out}`);
  await waitFor(postgresUp, 20_000, "postgres to accept connections", 50);
}

/** Both services running again, whatever happened: called from afterAll. */
export async function ensureServices(): Promise<void> {
  const failures: string[] = [];
  await startRedis().catch((error) => failures.push(`redis: ${error}`));
  await startPostgres().catch((error) => failures.push(`postgres: ${error}`));
  if (failures.length > 0) throw new Error(`could not restore the services: ${failures.join("; ")}`);
}
