/**
 * What sets the gateway's c=1 tail: one client, one request at a time, each request's latency kept, and the
 * event-loop stalls the gateway itself reports over the same run (GET /metrics: the group commit's write latency,
 * the longest event-loop delay). A request that arrives while a commit runs waits for it: the share of the run
 * spent committing is about the share of requests that wait, which is what decides whether p99 moves.
 *
 *   bun bench/tail.ts                          # non-streaming chat completions, 8 s
 *   bun bench/tail.ts --seconds 15 --stream
 *   bun bench/tail.ts --config /tmp/no-metering.yaml   # a copy of plugins-config.yaml (GATEWAY_CONFIG)
 *   bun bench/tail.ts --bare                   # the bare proxy in the same harness: the floor of this machine
 *
 * With SQLITE_METERING_THREAD=true the commit histogram is the thread's write latency, not time on the event loop.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chatBody } from "./stream-client.ts";
import { UPSTREAM_KEY, installCleanup, provisionKey, startBareProxy, startFakeUpstream, startGatewayProcess, stopAll } from "./lib.ts";

const args = process.argv.slice(2);
const arg = (name: string) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const seconds = Number(arg("--seconds") ?? 8);
const stream = args.includes("--stream");
const config = arg("--config");
const bare = args.includes("--bare");

installCleanup();
const dir = mkdtempSync(join(tmpdir(), "gateway-tail-"));
try {
  const upstream = await startFakeUpstream();
  const gateway = bare
    ? await startBareProxy(upstream.url)
    : await startGatewayProcess("gateway", join(dir, "gateway.db"), upstream.url, config ? { GATEWAY_CONFIG: resolve(config) } : {});
  const key = bare ? UPSTREAM_KEY : await provisionKey(gateway.url);
  const init = { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: chatBody({ stream }) };
  const url = `${gateway.url}/v1/chat/completions`;
  const send = async () => {
    const response = await fetch(url, init);
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`gateway answered ${response.status}`);
  };
  // Warm-up to the JIT's steady state (as run.ts): 64 clients for 6 s, then one for 2 s. After one second at c=1 alone the
  // optimizing JIT was still compiling the gateway's code through the measurement, and its p99 read ~1 ms higher.
  const warmUntil = performance.now() + 6000;
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (performance.now() < warmUntil) await send();
  }));
  for (let warm = performance.now() + 2000; performance.now() < warm; ) await send();
  const before = bare ? null : await storeCommits(gateway.url);
  const latencies: number[] = [];
  const started = performance.now();
  while (performance.now() - started < seconds * 1000) {
    const sent = performance.now();
    await send();
    latencies.push(performance.now() - sent);
  }
  const elapsedS = (performance.now() - started) / 1000;
  const after = before === null ? null : await storeCommits(gateway.url);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(3);
  const over = (ms: number) => ((100 * latencies.filter((l) => l > ms).length) / latencies.length).toFixed(2);
  console.log(`${bare ? "bare proxy, " : ""}${stream ? "streaming" : "non-streaming"} chat completions, c=1, ${elapsedS.toFixed(1)} s: ${latencies.length.toLocaleString("en-US")} requests`);
  console.log(`  latency p50 ${at(0.5)}  p90 ${at(0.9)}  p99 ${at(0.99)}  p99.9 ${at(0.999)} ms; slower than 0.5 ms: ${over(0.5)}%, than 1 ms: ${over(1)}%`);
  if (before !== null && after !== null) reportCommits(before, after, elapsedS);
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}

type StoreCommits = Awaited<ReturnType<typeof storeCommits>>;

/** How often the gateway committed over the run and what share of it the event loop spent in a commit. */
function reportCommits(before: StoreCommits, after: StoreCommits, elapsedS: number): void {
  const commits = after.count - before.count;
  if (commits === 0) {
    console.log("  group commits: none (metering off?)");
    return;
  }
  const committingS = after.sum - before.sum;
  console.log(
    `  group commits: ${commits} (${(commits / elapsedS).toFixed(1)}/s), ${((1000 * committingS) / commits).toFixed(2)} ms each on average, ` +
      `${((100 * committingS) / elapsedS).toFixed(1)}% of the run with the event loop in a commit; longest event-loop delay ${(after.lagMax * 1000).toFixed(2)} ms`,
  );
}

/** The group commit's histogram count and sum (seconds) and the longest event-loop delay since the last scrape. */
async function storeCommits(base: string): Promise<{ count: number; sum: number; lagMax: number }> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (name: string) => Number(text.match(new RegExp(`^${name} (\\S+)$`, "m"))?.[1] ?? 0);
  return { count: value("gateway_store_commit_seconds_count"), sum: value("gateway_store_commit_seconds_sum"), lagMax: value("gateway_event_loop_lag_max_seconds") };
}
