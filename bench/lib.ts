/** Shared by bench/run.ts and bench/profile.ts: child processes, the gateway's set-up, the autocannon driver. */
import autocannon from "autocannon";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Subprocess } from "bun";
import { percentile } from "./stream-client.ts";

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

export function spawnChild(name: string, cmd: string[], env: Record<string, string | undefined>, url: string): Child {
  const proc = Bun.spawn({ cmd, cwd: ROOT, env: env as Record<string, string>, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
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

/** An account with 1,000,000 USD of card credit and a key on it, through the admin API. */
export async function provisionKey(gatewayUrl: string): Promise<string> {
  const account = await adminCall(gatewayUrl, "POST", "/admin/v1/accounts", { name: "bench" });
  const accountId = account.data.id as string;
  await adminCall(gatewayUrl, "POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 1_000_000, kind: "card", reference: `bench-${crypto.randomUUID()}` });
  const key = await adminCall(gatewayUrl, "POST", `/admin/v1/accounts/${accountId}/keys`, { name: "bench" });
  return key.data.key as string;
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
  name: "upstream" | "bare" | "gateway";
  url: string;
  key: string;
}

export interface NonStreamFigures {
  rps: number;
  p50: number;
  p99: number;
  mean: number;
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

export async function cannon(target: Target, body: string, connections: number, durationMs: number): Promise<NonStreamFigures> {
  const latencies: number[] = [];
  const instance = autocannon({
    url: `${target.url}/v1/chat/completions`,
    method: "POST",
    headers: { authorization: `Bearer ${target.key}`, "content-type": "application/json" },
    body,
    connections,
    duration: durationMs / 1000,
  });
  // autocannon's own histogram has 1 ms resolution: keep every response time (float ms) instead.
  instance.on("response", (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    latencies.push(responseTime);
  });
  const result = await instance;
  latencies.sort((a, b) => a - b);
  return {
    rps: result["2xx"] / result.duration,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    mean: latencies.reduce((s, v) => s + v, 0) / Math.max(1, latencies.length),
    requests: result["2xx"],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}
