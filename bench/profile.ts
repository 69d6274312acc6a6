/**
 * CPU profile of the gateway under load: where its time goes.
 *
 *   bun bench/profile.ts                 # non-streaming chat completions at c=64 for 5 s
 *   bun bench/profile.ts --stream        # streaming instead
 *   bun bench/profile.ts --duration 10 --concurrency 64
 *   bun bench/profile.ts --stream --words 120   # a 120-word answer (one chunk per word) instead of the default one
 *   bun bench/profile.ts --stream --words 20 --chunk-delay 5   # chunks 5 ms apart, each in a read of its own
 *   bun bench/profile.ts --stream --model claude-sonnet-5-5   # a chat client on an Anthropic model (translated)
 *   bun bench/profile.ts --key-limits    # the key of the plugins case (RPM/TPM 10,000,000, key budget)
 *   REDIS_URL=redis://127.0.0.1:6379 bun bench/profile.ts --key-limits   # rate limits counted in Redis
 *   bun bench/profile.ts --workers 2    # GATEWAY_WORKERS=2: the profile is the primary's (its CPU per request is printed)
 *   bun bench/profile.ts --bare --stream  # the bare proxy (bare-proxy.ts) under the same load, to set beside the gateway's
 *
 * Starts the fake upstream and `bun --cpu-prof src/index.ts`, drives the load, stops the gateway (the profile is
 * written on exit) and prints the heaviest functions (self time), files and the gateway's own functions
 * (inclusive time), as shares of the time sampled (idle included: JSC samples a waiting event loop as native code),
 * and the process's CPU per request (its JS thread and all threads, from /proc) over the load. The raw profile stays
 * in bench/profiles/ (open it in Chrome DevTools or speedscope).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { chatBody, streamLoop } from "./stream-client.ts";
import { PLUGINS_KEY_LIMIT } from "./plugins-case.ts";
import {
  ROOT,
  cannon,
  completedStreams,
  cpuSeconds,
  startBareProxy,
  startFakeUpstream,
  installCleanup,
  provisionKey,
  startGatewayProcess,
  stopAll,
  stopChild,
} from "./lib.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function where(url: string): string {
  if (!url) return "(native)";
  const path = url.startsWith("file://") ? url.slice(7) : url;
  const rel = path.startsWith(ROOT) ? relative(ROOT, path) : path;
  const nm = rel.lastIndexOf("node_modules/");
  return nm >= 0 ? rel.slice(nm) : rel;
}

function summarize(profile: CpuProfile, top: number): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Start-up (module evaluation, plugin set-up) and shutdown are in the profile too: leave them out of the figures.
  const lifecycle = new Set(["(module)", "startGateway", "startPrimary", "setupPlugins", "loadConfig", "drainAndClose", "closePlugins", "shutdown"]);
  const startup = new Map<number, boolean>();
  const isStartup = (id: number): boolean => {
    let known = startup.get(id);
    if (known === undefined) {
      const n = byId.get(id)!;
      const p = parent.get(id);
      known = lifecycle.has(n.callFrame.functionName) || (p !== undefined && isStartup(p));
      startup.set(id, known);
    }
    return known;
  };
  const self = new Map<number, number>();
  let total = 0;
  let startupTime = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    if (isStartup(profile.samples[i]!)) {
      startupTime += dt;
      continue;
    }
    self.set(profile.samples[i]!, (self.get(profile.samples[i]!) ?? 0) + dt);
    total += dt;
  }
  const label = (n: ProfileNode) => `${n.callFrame.functionName || "(anonymous)"}  ${where(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ""}`;
  const selfByFn = new Map<string, number>();
  const selfByFile = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id)!;
    selfByFn.set(label(n), (selfByFn.get(label(n)) ?? 0) + t);
    const file = where(n.callFrame.url).replace(/^(node_modules\/(?:@[^/]+\/)?[^/]+)\/.*$/, "$1");
    selfByFile.set(file, (selfByFile.get(file) ?? 0) + t);
    // Inclusive time of the gateway's own functions (src/): each function once per stack.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const node = byId.get(cur)!;
      if (!where(node.callFrame.url).startsWith("src/")) continue;
      const key = label(node);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + t);
    }
  }
  const pct = (t: number) => `${((100 * t) / total).toFixed(1).padStart(5)}%`;
  const print = (title: string, map: Map<string, number>) => {
    console.log(`\n${title}`);
    for (const [name, t] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pct(t)}  ${name}`);
  };
  console.log(`\nprofile: ${(total / 1e6).toFixed(2)} s sampled under load (start-up and shutdown, ${(startupTime / 1e6).toFixed(2)} s, left out)`);
  print("self time by file / package", selfByFile);
  print("self time by function", selfByFn);
  print("inclusive time, gateway functions (src/)", inclusive);
}

async function main() {
  installCleanup();
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const stream = args.includes("--stream");
  const durationMs = Number(arg("--duration") ?? 5) * 1000;
  const concurrency = Number(arg("--concurrency") ?? 64);
  const top = Number(arg("--top") ?? 25);
  const keyLimits = args.includes("--key-limits");
  const words = Number(arg("--words") ?? 0);
  const chunkDelayMs = Number(arg("--chunk-delay") ?? 0);
  const model = arg("--model");
  const workers = Number(arg("--workers") ?? 0);
  const bare = args.includes("--bare");
  const body = (stream: boolean) => {
    const json = JSON.parse(chatBody({ stream, words, chunkDelayMs }));
    if (model) json.model = model;
    return JSON.stringify(json);
  };
  const tmp = mkdtempSync(join(tmpdir(), "gateway-profile-"));
  const profileDir = join(ROOT, "bench", "profiles");
  mkdirSync(profileDir, { recursive: true });
  const name = `${bare ? "bare" : "gateway"}-${stream ? "stream" : "nonstream"}-c${concurrency}${workers ? `-primary-of-${workers}` : ""}.cpuprofile`;
  try {
    const upstream = await startFakeUpstream();
    const profileArgs = ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}`];
    // lib.ts gives every gateway REDIS_URL="" (memory): here a REDIS_URL of the environment is meant for the profile.
    const gateway = bare
      ? await startBareProxy(upstream.url, {}, [], profileArgs)
      : await startGatewayProcess("gateway (profiled)", join(tmp, "bench.db"), upstream.url, { REDIS_URL: process.env.REDIS_URL ?? "", ...(workers ? { GATEWAY_WORKERS: String(workers) } : {}) }, profileArgs);
    const key = bare
      ? "unused"
      : await provisionKey(
          gateway.url,
          keyLimits ? { limit: 1_000_000, rate_limit: { requests_per_minute: PLUGINS_KEY_LIMIT, tokens_per_minute: PLUGINS_KEY_LIMIT } } : {},
        );
    const target = { name: "gateway" as const, url: gateway.url, key };
    const cpuBefore = cpuSeconds(gateway.proc.pid);
    let answered = 0;
    console.error(`profiling the ${bare ? "bare proxy" : "gateway"}${workers ? `'s primary (${workers} workers)` : ""}: ${stream ? "streaming" : "non-streaming"} chat completions, c=${concurrency}, ${durationMs / 1000} s`);
    if (stream) {
      const run = await streamLoop({ url: `${gateway.url}/v1/chat/completions`, key, body: body(true), concurrency, durationMs });
      const ok = completedStreams(run);
      answered = ok;
      console.error(`  ${Math.round(ok / (run.elapsedMs / 1000))} streams/s, failed ${run.samples.length - ok}`);
    } else {
      const figures = await cannon(target, body(false), concurrency, durationMs);
      answered = figures.rps * (durationMs / 1000);
      console.error(`  ${Math.round(figures.rps)} req/s, p50 ${figures.p50.toFixed(2)} ms, p99 ${figures.p99.toFixed(2)} ms, non-2xx ${figures.non2xx}`);
    }
    const cpuAfter = cpuSeconds(gateway.proc.pid);
    if (cpuBefore && cpuAfter) {
      const perRequest = (seconds: number) => ((1e6 * seconds) / answered).toFixed(1);
      console.error(`  ${workers ? "the primary's" : "its"} CPU (profiler included): ${perRequest(cpuAfter.main - cpuBefore.main)} µs per request on the JS thread, ${perRequest(cpuAfter.all - cpuBefore.all)} over all threads`);
    }
    await stopChild(gateway, 15_000); // SIGTERM: the gateway (and the bare proxy) exit normally and the profile is written
    await stopChild(upstream);
    const path = join(profileDir, name);
    summarize(JSON.parse(readFileSync(path, "utf8")) as CpuProfile, top);
    console.log(`\nwrote ${path}`);
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

try {
  await main();
  process.exit(0);
} catch (error) {
  console.error(`profile failed: ${(error as Error)?.stack ?? error}`);
  await stopAll();
  process.exit(1);
}
