/** Shared by bench/run.ts and bench/profile.ts: child processes, the gateway's set-up, the autocannon driver. */
import autocannon from "autocannon";
import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { SQL, type Subprocess } from "bun";
import { Database } from "bun:sqlite";
import { percentile, streamLoop, type StreamSample } from "./stream-client.ts";
import { makeCertificates } from "./tls-front.ts";

export const ROOT = resolve(import.meta.dir, "..");
export const BUN = process.execPath;
export const UPSTREAM_KEY = "bench-upstream";
export const ADMIN_TOKEN = "bench";
/** Bun's fetch keeps at most 256 requests in flight per process unless this is set at start-up. */
export const LIFTED_FETCH_CAP = "4096";

// ------------------------------------------------------------------------------------------------
// Child processes
// ------------------------------------------------------------------------------------------------

export interface Child {
  name: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  output: () => string;
}

export const children = new Set<Child>();

/**
 * A load client (a child process with Bun's fetch cap lifted, so it can hold thousands of streams), registered with
 * the other children so it is killed with them; its whole output is read.
 */
export function spawnStreamClient(cmd: string[]): { proc: Subprocess<"ignore", "pipe", "pipe">; child: Child; stdout: Promise<string>; stderr: Promise<string> } {
  const proc = Bun.spawn({
    cmd,
    cwd: ROOT,
    env: { ...process.env, BUN_CONFIG_MAX_HTTP_REQUESTS: LIFTED_FETCH_CAP } as Record<string, string>,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const child: Child = { name: "stream client", proc, url: "", output: () => "" };
  children.add(child);
  return { proc, child, stdout: new Response(proc.stdout).text(), stderr: new Response(proc.stderr).text() };
}

export function spawnChild(name: string, cmd: string[], env: Record<string, string | undefined>, url: string, cwd = ROOT): Child {
  const proc = Bun.spawn({ cmd, cwd, env: env as Record<string, string>, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let tail = "";
  const sink = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of stream) {
        tail = (tail + decoder.decode(chunk, { stream: true })).slice(-8000);
      }
    } catch {}
  };
  void sink(proc.stdout);
  void sink(proc.stderr);
  const child: Child = { name, proc, url, output: () => tail.trim() };
  children.add(child);
  return child;
}

export async function stopChild(child: Child, graceMs = 3000): Promise<void> {
  if (child.proc.exitCode === null && child.proc.signalCode === null) {
    child.proc.kill("SIGTERM");
    const exited = await Promise.race([child.proc.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
    if (!exited) {
      child.proc.kill("SIGKILL");
      await child.proc.exited;
    }
  }
  children.delete(child);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((child) => stopChild(child)));
}

/** Kills every child on exit, SIGINT and SIGTERM. */
export function installCleanup(): void {
process.on("exit", () => {
  for (const child of children) {
    try {
      child.proc.kill("SIGKILL");
    } catch {}
  }
});
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping child processes`);
    void stopAll().finally(() => process.exit(130));
  });
}
}

export function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

/** Polls `path` until it answers (`okOnly`: with a 2xx); throws when the child dies or time runs out. */
export async function waitReady(child: Child, path: string, okOnly: boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      throw new Error(`${child.name} exited (${child.proc.exitCode ?? child.proc.signalCode}) before it was ready:\n${child.output()}`);
    }
    try {
      const response = await fetch(child.url + path, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (!okOnly || response.ok) return;
    } catch {}
    await Bun.sleep(100);
  }
  throw new Error(`${child.name} not ready after ${timeoutMs} ms:\n${child.output()}`);
}

/** The fake upstream on a free port, answering. */
export async function startFakeUpstream(pin: string[] = []): Promise<Child> {
  const port = freePort();
  const upstream = spawnChild("fake upstream", [...pin, BUN, "test/fake-upstream/server.ts", "--port", String(port)], process.env, `http://127.0.0.1:${port}`);
  await waitReady(upstream, "/v1/models", false);
  return upstream;
}

/** The fake upstream over https: a TLS front (tls-front.ts) with its own CA, made in `dir`; give the proxies `env`. */
export async function startHttpsUpstream(upstream: Child, dir: string): Promise<{ front: Child; url: string; env: Record<string, string> }> {
  const certificates = makeCertificates(dir);
  const port = freePort();
  const upstreamPort = new URL(upstream.url).port;
  const cmd = [BUN, "bench/tls-front.ts", "--port", String(port), "--upstream-port", upstreamPort, "--cert", certificates.certPath, "--key", certificates.keyPath];
  const url = `https://localhost:${port}`;
  const env = { NODE_EXTRA_CA_CERTS: certificates.caPath };
  const front = spawnChild("tls front", cmd, process.env, url);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const answered = await fetch(`${url}/v1/models`, { tls: { ca: readFileSync(certificates.caPath, "utf8") } }).then(
      (response) => response.arrayBuffer().then(() => true),
      () => false,
    );
    if (answered) break;
    if (Date.now() > deadline || front.proc.exitCode !== null) throw new Error(`tls front not ready:\n${front.output()}`);
    await Bun.sleep(100);
  }
  return { front, url, env };
}

/** A proxy script of bench/ (`--port`, `--upstream` and its own `args`) in front of `upstreamUrl`, on a free port, answering. */
async function startProxyScript(name: string, script: string, args: string[], upstreamUrl: string, extraEnv: Record<string, string>, pin: string[], bunArgs: string[] = []): Promise<Child> {
  const port = freePort();
  const cmd = [...pin, BUN, ...bunArgs, script, "--port", String(port), "--upstream", upstreamUrl, ...args];
  const proxy = spawnChild(name, cmd, { ...process.env, ...extraEnv }, `http://127.0.0.1:${port}`);
  await waitReady(proxy, "/v1/models", false);
  return proxy;
}

/** The bare proxy (bare-proxy.ts) in front of `upstreamUrl`, on a free port, answering. */
export function startBareProxy(upstreamUrl: string, extraEnv: Record<string, string> = {}, pin: string[] = [], bunArgs: string[] = []): Promise<Child> {
  return startProxyScript("bare proxy", "bench/bare-proxy.ts", [], upstreamUrl, extraEnv, pin, bunArgs);
}

/** A floor proxy (floor-proxy.ts) in `mode` in front of `upstreamUrl`, on a free port, answering. */
export function startFloorProxy(mode: string, upstreamUrl: string, extraEnv: Record<string, string> = {}, pin: string[] = []): Promise<Child> {
  return startProxyScript(`floor proxy (${mode})`, "bench/floor-proxy.ts", ["--mode", mode, "--upstream-key", UPSTREAM_KEY], upstreamUrl, extraEnv, pin);
}

export function gatewayEnv(port: number, databasePath: string, upstreamUrl: string, extra: Record<string, string> = {}) {
  return {
    ...process.env,
    PORT: String(port),
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${databasePath}`,
    EDGE_RATE_LIMIT_RPS: "0",
    GATEWAY_LOG: "silent",
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    GATEWAY_SANDBOX: "false",
    OPENAI_BASE_URL: `${upstreamUrl}/v1`,
    OPENAI_API_KEY: UPSTREAM_KEY,
    // Anthropic-family models (cross-format case) go to the same fake upstream's /v1/messages.
    ANTHROPIC_BASE_URL: upstreamUrl,
    ANTHROPIC_API_KEY: UPSTREAM_KEY,
    // The rate-limit plugin counts in memory unless a case asks for Redis (REDIS_URL in `extra`): a REDIS_URL
    // in the bench's own environment is for the plugins case only, never silently for every gateway.
    REDIS_URL: "",
    ...extra,
  };
}

export async function startGatewayProcess(
  name: string,
  databasePath: string,
  upstreamUrl: string,
  extra: Record<string, string> = {},
  bunArgs: string[] = [],
  readyTimeoutMs = 30_000,
): Promise<Child> {
  const port = freePort();
  const child = spawnChild(name, [BUN, ...bunArgs, "src/index.ts"], gatewayEnv(port, databasePath, upstreamUrl, extra), `http://127.0.0.1:${port}`);
  await waitReady(child, "/ready", true, readyTimeoutMs);
  return child;
}

export async function adminCall(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/**
 * An account with 1,000,000 USD of card credit and a key on it, through the admin API. `keyOptions` go into the
 * key's creation body (e.g. `{ limit, rate_limit: { requests_per_minute, tokens_per_minute } }`).
 */
export async function provisionKey(gatewayUrl: string, keyOptions: Record<string, unknown> = {}): Promise<string> {
  const account = await adminCall(gatewayUrl, "POST", "/admin/v1/accounts", { name: "bench" });
  const accountId = account.data.id as string;
  await adminCall(gatewayUrl, "POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 1_000_000, kind: "card", reference: `bench-${crypto.randomUUID()}` });
  const key = await adminCall(gatewayUrl, "POST", `/admin/v1/accounts/${accountId}/keys`, { name: "bench", ...keyOptions });
  return key.data.key as string;
}

let clockTicksPerSecond: number | undefined;

/**
 * CPU seconds a process has used so far: its main (JS) thread and all its threads together, from
 * /proc (Linux). null where /proc is missing. Divided by the requests served, this is the CPU cost of a
 * request, a figure the machine's noise moves far less than throughput.
 */
export function cpuSeconds(pid: number): { main: number; all: number } | null {
  try {
    clockTicksPerSecond ??= Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;
    const ticks = (path: string) => {
      const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ");
      return Number(fields[11]) + Number(fields[12]); // utime + stime
    };
    return { main: ticks(`/proc/${pid}/task/${pid}/stat`) / clockTicksPerSecond, all: ticks(`/proc/${pid}/stat`) / clockTicksPerSecond };
  } catch {
    return null;
  }
}

/** CPU microseconds per request between two `cpuSeconds` readings. */
export interface CpuPerRequest {
  mainUs: number;
  allUs: number;
}

export function rssMb(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

// ------------------------------------------------------------------------------------------------
// Measurements
// ------------------------------------------------------------------------------------------------

export interface Target {
  /** upstream, bare, gateway, portkey, or a case's own label. */
  name: string;
  url: string;
  key: string;
  /** Request path (default /v1/chat/completions). */
  path?: string;
  /** Request headers (default `authorization: Bearer <key>` and a JSON content type). */
  headers?: Record<string, string>;
  /** What a complete stream ends with (default `data: [DONE]`). */
  endMarker?: string;
  /** The serving process, whose CPU time per request is measured (upstream, proxies). */
  pid?: number;
}

function requestHeaders(target: Target): Record<string, string> {
  return target.headers ?? { authorization: `Bearer ${target.key}`, "content-type": "application/json" };
}

export interface NonStreamFigures {
  /** CPU of the serving process per request (where measured). */
  cpu?: CpuPerRequest;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

/** One autocannon run's raw figures: every response time (float ms), so several runs can be pooled. */
export interface CannonRun {
  latencies: number[];
  ok: number;
  durationS: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

export async function cannonRun(target: Target, body: string, connections: number, durationMs: number): Promise<CannonRun> {
  const latencies: number[] = [];
  const instance = autocannon({
    url: `${target.url}${target.path ?? "/v1/chat/completions"}`,
    method: "POST",
    headers: requestHeaders(target),
    body,
    connections,
    duration: durationMs / 1000,
  });
  // autocannon's own histogram has 1 ms resolution: keep every response time (float ms) instead.
  instance.on("response", (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    latencies.push(responseTime);
  });
  const result = await instance;
  return { latencies, ok: result["2xx"], durationS: result.duration, non2xx: result.non2xx, errors: result.errors, timeouts: result.timeouts };
}

/** Pools runs: req/s = all 2xx ÷ all the time measured; percentiles over every response. */
export function poolRuns(runs: CannonRun[]): NonStreamFigures {
  const latencies = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const ok = runs.reduce((s, r) => s + r.ok, 0);
  const durationS = runs.reduce((s, r) => s + r.durationS, 0);
  return {
    rps: ok / durationS,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    mean: latencies.reduce((s, v) => s + v, 0) / Math.max(1, latencies.length),
    requests: ok,
    non2xx: runs.reduce((s, r) => s + r.non2xx, 0),
    errors: runs.reduce((s, r) => s + r.errors, 0),
    timeouts: runs.reduce((s, r) => s + r.timeouts, 0),
  };
}

export async function cannon(target: Target, body: string, connections: number, durationMs: number): Promise<NonStreamFigures> {
  return poolRuns([await cannonRun(target, body, connections, durationMs)]);
}

export interface StreamFigures {
  /** CPU of the serving process per stream (where measured). */
  cpu?: CpuPerRequest;
  streamsPerSec: number;
  completed: number;
  errors: number;
  firstError: string | null;
  ttfbP50: number;
  ttfbP99: number;
  ttlbP50: number;
  ttlbP99: number;
}

/** One streaming run's raw samples, so several runs can be pooled. */
export interface StreamRun {
  samples: StreamSample[];
  elapsedMs: number;
}

/** The complete 200 streams of a run (what a stream run served). */
export function completedStreams(run: StreamRun): number {
  return run.samples.filter((sample) => sample.ok).length;
}

/** `concurrency` fetch workers streaming back to back for `durationMs`. */
export function streamRun(target: Target, body: string, concurrency: number, durationMs: number): Promise<StreamRun> {
  return streamLoop({
    url: `${target.url}${target.path ?? "/v1/chat/completions"}`,
    key: target.key,
    headers: requestHeaders(target),
    endMarker: target.endMarker,
    body,
    concurrency,
    durationMs,
  });
}

/** Pools runs: streams/s = all complete 200 streams ÷ all the time measured; percentiles over every such stream. */
export function poolStreamRuns(runs: StreamRun[]): StreamFigures {
  const samples = runs.flatMap((r) => r.samples);
  const ok = samples.filter((s) => s.ok);
  const ttfb = ok.map((s) => s.ttfb).sort((a, b) => a - b);
  const ttlb = ok.map((s) => s.ttlb).sort((a, b) => a - b);
  return {
    streamsPerSec: ok.length / (runs.reduce((sum, r) => sum + r.elapsedMs, 0) / 1000),
    completed: ok.length,
    errors: samples.length - ok.length,
    firstError: samples.find((s) => !s.ok)?.error ?? null,
    ttfbP50: percentile(ttfb, 50),
    ttfbP99: percentile(ttfb, 99),
    ttlbP50: percentile(ttlb, 50),
    ttlbP99: percentile(ttlb, 99),
  };
}

/** `concurrency` fetch workers streaming back to back for `durationMs`; only complete 200 streams count. */
export async function streams(target: Target, body: string, concurrency: number, durationMs: number): Promise<StreamFigures> {
  return poolStreamRuns([await streamRun(target, body, concurrency, durationMs)]);
}

/** Each target's runs over the rounds, and its CPU per request served over them all. */
export interface RoundsOf<R> {
  runs: R[];
  cpu?: CpuPerRequest;
}

/**
 * Measures every target in turn, round after round, the order reversed every other round: a drift or a burst
 * of other load on a shared machine lands on all of them alike, and no target always runs right after the same
 * other one. `served` counts what a run served (for CPU per request, read from /proc around each run).
 */
export async function inRounds<R>(
  targets: readonly Target[],
  rounds: number,
  measure: (target: Target) => Promise<R>,
  served: (run: R) => number,
  onRun?: (target: Target, run: R, round: number) => void,
): Promise<Map<string, RoundsOf<R>>> {
  const tallies = new Map(targets.map((t) => [t.name, { runs: [] as R[], served: 0, main: 0, all: 0, cpuKnown: t.pid !== undefined }]));
  for (let round = 0; round < rounds; round++) {
    for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
      const tally = tallies.get(target.name)!;
      const before = target.pid === undefined ? null : cpuSeconds(target.pid);
      const run = await measure(target);
      const after = target.pid === undefined ? null : cpuSeconds(target.pid);
      tally.runs.push(run);
      tally.served += served(run);
      if (before && after) {
        tally.main += after.main - before.main;
        tally.all += after.all - before.all;
      } else tally.cpuKnown = false;
      onRun?.(target, run, round);
    }
  }
  const result = new Map<string, RoundsOf<R>>();
  for (const [name, t] of tallies) {
    const cpu = t.cpuKnown && t.served > 0 ? { mainUs: (t.main * 1e6) / t.served, allUs: (t.all * 1e6) / t.served } : undefined;
    result.set(name, { runs: t.runs, cpu });
  }
  return result;
}

// ------------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------------

export const f = (value: number | null | undefined, digits = 2) => (value === null || value === undefined || Number.isNaN(value) ? "-" : value.toFixed(digits));
export const fInt = (value: number) => (Number.isNaN(value) ? "-" : Math.round(value).toLocaleString("en-US"));
export const signed = (value: number, digits = 2) => (Number.isNaN(value) ? "-" : (value >= 0 ? "+" : "") + value.toFixed(digits));
/** A relative change as a signed percentage, e.g. -4.2%. */
export const pct = (ratio: number, digits = 1) => (Number.isNaN(ratio) ? "-" : signed((ratio - 1) * 100, digits) + "%");

/** Columns before `left` are left-aligned, the others right-aligned. */
export function table(title: string, header: string[], rows: string[][], left = 2): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < left ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd();
  console.log(`\n${title}`);
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows) console.log(line(row));
}

export function log(message: string): void {
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

export interface Goal {
  goal: string;
  value: string;
  /** null: reported, no pass/fail. */
  pass: boolean | null;
}

// ------------------------------------------------------------------------------------------------
// Process trees, listening sockets, scratch Postgres databases, ledger checks (bench/workers.ts, scale-out.ts)
// ------------------------------------------------------------------------------------------------

/** `pid` and every process below it (a primary and its workers), from /proc's parent ids. */
export function processTree(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ");
      parentOf.set(Number(entry), Number(fields[1]));
    } catch {} // exited meanwhile
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) for (const [child, parent] of parentOf) if (parent === tree[i]) tree.push(child);
  return tree;
}

/** CPU seconds (all threads) of a process tree so far, keyed by pid: a process that exits between readings drops out. */
export function treeCpuSeconds(pid: number): Map<number, number> {
  const seconds = new Map<number, number>();
  for (const p of processTree(pid)) {
    const cpu = cpuSeconds(p);
    if (cpu) seconds.set(p, cpu.all);
  }
  return seconds;
}

/** CPU seconds the processes present in both readings spent between them. */
export function treeCpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [p, s] of after) total += s - (before.get(p) ?? s);
  return total;
}

/**
 * Memory of a process tree in MB, as PSS (`/proc/<pid>/smaps_rollup`): each process's own pages plus its share of the
 * pages it shares, so the sum is what the tree holds (RSS would count Bun's binary once per process). 0 where the
 * kernel has no smaps_rollup.
 */
export function treePssMb(pid: number): number {
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      kb += Number(/^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, "utf8"))?.[1] ?? 0);
    } catch {} // exited meanwhile, or no smaps_rollup
  }
  return kb / 1024;
}

/** Sockets listening on `port` (IPv4 and IPv6, Linux /proc/net): with SO_REUSEPORT, one per process that binds it. */
export function listeningSockets(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  let count = 0;
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === "0A") count++; // 0A = LISTEN
    }
  }
  return count;
}

/** The Postgres server to make scratch databases on: POSTGRES_TEST_URL, DATABASE_URL when postgres://, or the local default. */
export function postgresServerUrl(explicit?: string): string {
  if (explicit) return explicit;
  if (process.env.POSTGRES_TEST_URL) return process.env.POSTGRES_TEST_URL;
  if (/^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "")) return process.env.DATABASE_URL!;
  return "postgres://postgres@127.0.0.1:5432/postgres";
}

/** `serverUrl` with its database replaced by `name`. */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = "/" + name;
  return url.toString();
}

/** A fresh database `<prefix>_<pid>_<time>` on `serverUrl` (whose user may create databases); `drop()` removes it. */
export async function createScratchDatabase(serverUrl: string, prefix: string): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}`;
  const server = new SQL({ url: serverUrl, max: 1 });
  try {
    await server.unsafe(`create database "${name}"`);
  } finally {
    await server.close();
  }
  return {
    name,
    url: databaseUrl(serverUrl, name),
    async drop() {
      const admin = new SQL({ url: serverUrl, max: 1 });
      await admin.unsafe(`drop database if exists "${name}" with (force)`).catch((error) => log(`WARNING: could not drop ${name}: ${error}`));
      await admin.close();
    },
  };
}

/** What a stopped gateway's store holds after a run: requests metered, holds left, money totals. */
export interface LedgerState {
  generations: Record<string, number>;
  /** Budget holds still in the `reservations` table (process-mode holds live in memory and die with the process). */
  holdsLeft: number;
  /** Σ generations.total_cost_nano, and the totals metering maintains beside it (they must be equal). */
  costNano: bigint;
  accountDebitsNano: bigint;
  keyUsageNano: bigint;
}

const LEDGER_QUERIES = {
  generations: "select status, count(*) as n from generations group by status",
  holds: "select count(*) as n from reservations",
  cost: "select coalesce(sum(total_cost_nano), 0) as n from generations",
  debits: "select coalesce(sum(total_debits_nano), 0) as n from accounts",
  keyUsage: "select coalesce(sum(usage_nano), 0) as n from api_keys",
};

/** Reads the ledger state of a store (`sqlite:<path>` or `postgres://…`); run it once the gateway has stopped. */
export async function readLedgerState(databaseUrl: string): Promise<LedgerState> {
  if (databaseUrl.startsWith("sqlite:")) {
    const db = new Database(databaseUrl.slice("sqlite:".length), { readonly: true, safeIntegers: true });
    try {
      const one = (query: string) => BigInt((db.query(query).get() as { n: bigint | number }).n);
      const rows = db.query(LEDGER_QUERIES.generations).all() as { status: string; n: bigint }[];
      return {
        generations: Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])),
        holdsLeft: Number(one(LEDGER_QUERIES.holds)),
        costNano: one(LEDGER_QUERIES.cost),
        accountDebitsNano: one(LEDGER_QUERIES.debits),
        keyUsageNano: one(LEDGER_QUERIES.keyUsage),
      };
    } finally {
      db.close();
    }
  }
  const sql = new SQL({ url: databaseUrl, max: 1 });
  try {
    const one = async (query: string) => BigInt(((await sql.unsafe(query)) as { n: string | number | bigint }[])[0]!.n);
    const rows = (await sql.unsafe(LEDGER_QUERIES.generations)) as { status: string; n: string | number }[];
    return {
      generations: Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])),
      holdsLeft: Number(await one(LEDGER_QUERIES.holds)),
      costNano: await one(LEDGER_QUERIES.cost),
      accountDebitsNano: await one(LEDGER_QUERIES.debits),
      keyUsageNano: await one(LEDGER_QUERIES.keyUsage),
    };
  } finally {
    await sql.close();
  }
}

/**
 * Checks a stopped gateway's store against what the load generators counted: no failed request, no hold left, the
 * maintained money totals equal to the generations' costs, and one success row per 2xx answer counted. A duration-bound
 * generator abandons the requests in flight when its time is up (one per connection at most, no pipelining): the
 * gateway meters each as `cancelled`, or as `success` when its answer was already on the way. So success rows beyond
 * the 2xx count, plus cancelled rows, may be at most `abandonedBound` (connections × runs); they are reported, and the
 * rows match exactly (`rowsMatch`) only when there are none.
 */
export function checkLedger(state: LedgerState, ok2xx: number, abandonedBound: number) {
  const success = state.generations.success ?? 0;
  const cancelled = state.generations.cancelled ?? 0;
  const extra = success - ok2xx;
  const problems: string[] = [];
  if ((state.generations.failed ?? 0) > 0) problems.push(`${state.generations.failed} failed generations`);
  if (state.holdsLeft > 0) problems.push(`${state.holdsLeft} holds left`);
  if (state.costNano !== state.accountDebitsNano) problems.push(`account debits ${state.accountDebitsNano} ≠ Σ generation cost ${state.costNano}`);
  if (state.costNano !== state.keyUsageNano) problems.push(`key usage ${state.keyUsageNano} ≠ Σ generation cost ${state.costNano}`);
  if (extra < 0) problems.push(`${-extra} 2xx answers counted with no success row`);
  if (extra + cancelled > abandonedBound) problems.push(`${extra} success rows beyond the 2xx answers counted and ${cancelled} cancelled: more than the ${abandonedBound} requests that can be abandoned in flight`);
  const unknown = Object.keys(state.generations).filter((status) => !["success", "cancelled", "failed"].includes(status));
  if (unknown.length > 0) problems.push(`generations with status ${unknown.join(", ")}`);
  return { ok: problems.length === 0, rowsMatch: extra === 0 && cancelled === 0, successRows: success, ok2xx, abandonedInFlight: extra, cancelledRows: cancelled, problems };
}
