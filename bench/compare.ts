/**
 * Compares gateway builds or configurations on this machine, interleaved: the same load (chat completions
 * at c=64) goes to each in turn, round after round, so drift and bursts of other load on a shared machine
 * land on all of them alike. Reports req/s (or streams/s) and the CPU each gateway spent per request
 * (its JS thread, and all its threads), the figure that shows a change of a few percent.
 *
 *   bun bench/compare.ts <checkout> [<checkout> ...] [--https] [--stream] [--words N] [--chunk-delay MS] [--key-limits] [--rounds 4] [--seconds 3] [--concurrency 64]
 *
 * A target is a directory holding a checkout of the gateway (`git worktree add /tmp/before HEAD~1`, then
 * link its node_modules), run from that directory (its own plugins-config.yaml and catalog), optionally
 * followed by a config file and comma-separated environment settings, ':'-separated:
 *
 *   bun bench/compare.ts /tmp/before .                                  # the last commit against the tree
 *   bun bench/compare.ts . .:/tmp/no-metering.yaml                     # with a plugin off (GATEWAY_CONFIG)
 *   bun bench/compare.ts . .::SQLITE_HOLDS=shared --stream             # an environment setting, streaming
 *   bun bench/compare.ts . .::REDIS_URL=redis://127.0.0.1:6379 --key-limits   # rate limits counted in Redis
 *   bun bench/compare.ts . --bare --stream --words 20 --chunk-delay 5    # against the bare proxy, streams paced like a model's
 *   bun bench/compare.ts . --floors --stream --words 20                  # and the floors between the two (floor-proxy.ts)
 *
 * `--key-limits`: the key of the plugins case (RPM and TPM 10,000,000, a key budget), so the rate-limit and
 * key-budget paths run on every request. `--bare`: the bare proxy as the first target (the one the others are
 * compared with). `--floors`: the bare proxy and, after it, the floor proxies (bench/floor-proxy.ts: the body parsed and
 * sent on; the answer read whole too; every answer JSON parsed and serialized again), what each step costs alone.
 * `--https`: the fake upstream behind a TLS front with its own CA (bench/tls-front.ts), trusted by every target
 * through NODE_EXTRA_CA_CERTS, as every real provider is reached. `--pin N` (a machine with cores to spare):
 * each proxy (the bare one and every target) on N cores of its own, the fake upstream on two others, the load
 * generator (this process) on the rest, all with taskset; the table then says how much of a core the load generator
 * used, so a run it capped can be told from one the proxies capped.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chatBody } from "./stream-client.ts";
import { FLOOR_MODES } from "./floor-proxy.ts";
import { PLUGINS_KEY_LIMIT } from "./plugins-case.ts";
import {
  BUN,
  UPSTREAM_KEY,
  cannon,
  cannonRun,
  completedStreams,
  inRounds,
  poolRuns,
  poolStreamRuns,
  streamRun,
  type CpuPerRequest,
  type NonStreamFigures,
  type Target,
  f,
  fInt,
  freePort,
  startBareProxy,
  startFloorProxy,
  startFakeUpstream,
  startHttpsUpstream,
  gatewayEnv,
  installCleanup,
  provisionKey,
  spawnChild,
  stopAll,
  streams,
  table,
  waitReady,
} from "./lib.ts";

interface Options {
  targets: string[];
  stream: boolean;
  rounds: number;
  seconds: number;
  concurrency: number;
  /** An answer of this many words (one stream chunk each) instead of the fake's default one. */
  words: number;
  /** The fake upstream's pause between stream chunks (each then comes in a read of its own, as from a real model). */
  chunkDelayMs: number;
  keyLimits: boolean;
  /** The bare proxy as the first target, the reference the others are compared with. */
  bare: boolean;
  /** The floor proxies after the bare proxy (implies bare). */
  floors: boolean;
  /** The fake upstream over https (a TLS front with its own CA, trusted through NODE_EXTRA_CA_CERTS). */
  https: boolean;
  /** Cores per proxy, each proxy on its own (taskset); 0: nothing pinned. */
  pin: number;
}

function parseArgs(argv: string[]): Options {
  const options: Options = { targets: [], stream: false, rounds: 4, seconds: 3, concurrency: 64, keyLimits: false, words: 0, chunkDelayMs: 0, bare: false, floors: false, https: false, pin: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--stream") options.stream = true;
    else if (a === "--key-limits") options.keyLimits = true;
    else if (a === "--bare") options.bare = true;
    else if (a === "--floors") options.bare = options.floors = true;
    else if (a === "--https") options.https = true;
    else if (a === "--rounds") options.rounds = Number(argv[++i]);
    else if (a === "--seconds") options.seconds = Number(argv[++i]);
    else if (a === "--concurrency") options.concurrency = Number(argv[++i]);
    else if (a === "--pin") options.pin = Number(argv[++i]);
    else if (a === "--words") options.words = Number(argv[++i]);
    else if (a === "--chunk-delay") options.chunkDelayMs = Number(argv[++i]);
    else if (a === "--help" || a === "-h") options.targets = [];
    else options.targets.push(a);
  }
  const valid = [options.rounds, options.seconds, options.concurrency].every((n) => Number.isFinite(n) && n > 0) && Number.isInteger(options.pin) && options.pin >= 0;
  if ((options.targets.length === 0 && !options.floors) || !valid) {
    console.error("usage: bun bench/compare.ts <checkout>[:<config>[:<ENV=value>,...]] ... [--bare] [--floors] [--https] [--stream] [--words N] [--chunk-delay MS] [--key-limits] [--rounds N] [--seconds S] [--concurrency C] [--pin CORES]");
    process.exit(2);
  }
  return options;
}

/** Where each process runs under --pin: taskset prefixes, and the cores left to this process (the load generator). */
interface Placement {
  fake: string[];
  proxies: string[][];
  load: string;
}

function placement(options: Options): Placement | null {
  if (options.pin === 0) return null;
  const proxies = options.targets.length + (options.bare ? 1 : 0) + (options.floors ? FLOOR_MODES.length : 0);
  const cores = cpus().length;
  const loadCores = cores - proxies * options.pin - 2;
  if (loadCores < 2) throw new Error(`--pin ${options.pin}: ${proxies} proxies × ${options.pin} + 2 for the fake upstream leaves ${loadCores} of ${cores} cores for the load generator (2 at least)`);
  const range = (from: number, count: number) => ["taskset", "-c", count === 1 ? `${from}` : `${from}-${from + count - 1}`];
  return {
    proxies: Array.from({ length: proxies }, (_, i) => range(i * options.pin, options.pin)),
    fake: range(proxies * options.pin, 2),
    load: `${proxies * options.pin + 2}-${cores - 1}`,
  };
}

/** A target's pooled rate and CPU per request; its latencies when non-streaming. */
interface Row {
  label: string;
  rate: number;
  cpu?: CpuPerRequest;
  pooled?: NonStreamFigures;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  installCleanup();
  const tmp = mkdtempSync(join(tmpdir(), "gateway-compare-"));
  try {
    const place = placement(options);
    if (place) {
      // Every thread of this process (autocannon and the stream loop run here), and the threads it starts later.
      const pinned = Bun.spawnSync(["taskset", "-a", "-p", "-c", place.load, String(process.pid)]);
      if (pinned.exitCode !== 0) throw new Error(`taskset: ${pinned.stderr.toString()}`);
    }
    const proxyPins = place ? [...place.proxies] : [];
    const fake = await startFakeUpstream(place?.fake);
    const upstream = options.https ? await startHttpsUpstream(fake, join(tmp, "tls")) : { url: fake.url, env: {} };
    const gateways = [];
    if (options.bare) {
      const bare = await startBareProxy(upstream.url, upstream.env, proxyPins.shift());
      gateways.push({ target: { name: "bare proxy", url: bare.url, key: UPSTREAM_KEY }, pid: bare.proc.pid });
    }
    if (options.floors) {
      for (const mode of FLOOR_MODES) {
        const floor = await startFloorProxy(mode, upstream.url, upstream.env, proxyPins.shift());
        gateways.push({ target: { name: `floor: ${mode}`, url: floor.url, key: UPSTREAM_KEY }, pid: floor.proc.pid });
      }
    }
    for (const [i, spec] of options.targets.entries()) {
      const [dir, config] = spec.split(":");
      const settings = spec.split(":").length > 2 ? spec.slice(dir!.length + (config ?? "").length + 2).split(",") : [];
      const env: Record<string, string> = { ...upstream.env, ...Object.fromEntries(settings.map((s) => [s.slice(0, s.indexOf("=")), s.slice(s.indexOf("=") + 1)])) };
      if (config) env.GATEWAY_CONFIG = resolve(config);
      const port = freePort();
      // Run from its own directory: each checkout reads its own plugins-config.yaml and catalog.
      const child = spawnChild(spec, [...(proxyPins.shift() ?? []), BUN, "src/index.ts"], gatewayEnv(port, join(tmp, `gateway-${i}.db`), upstream.url, env), `http://127.0.0.1:${port}`, resolve(dir!));
      await waitReady(child, "/ready", true);
      const keyOptions = options.keyLimits ? { limit: 1_000_000, rate_limit: { requests_per_minute: PLUGINS_KEY_LIMIT, tokens_per_minute: PLUGINS_KEY_LIMIT } } : {};
      gateways.push({ target: { name: spec, url: child.url, key: await provisionKey(child.url, keyOptions) }, pid: child.proc.pid });
    }
    const body = chatBody({ stream: options.stream, words: options.words, chunkDelayMs: options.chunkDelayMs });
    const ms = options.seconds * 1000;
    const targets = gateways.map((g) => ({ ...g.target, pid: g.pid }));
    // Warm-up to the JIT's steady state, as run.ts does: c=64 for 4 s, then the measured concurrency for 2 s. At c=1 alone a
    // second is ~2,000 requests, and the optimizing JIT was still compiling the gateway's code through the measurement:
    // its p99 read ~1 ms higher (docs/performance.md, "The c=1 tail").
    for (const target of targets) {
      const warm = (concurrency: number, ms: number) => (options.stream ? streams(target, body, concurrency, ms) : cannon(target, body, concurrency, ms));
      if (options.concurrency < 64) await warm(64, 4000);
      await warm(options.concurrency, 2000);
    }
    const progress = (target: Target, served: number, seconds: number, round: number) =>
      console.error(`round ${round + 1}/${options.rounds}: ${target.name} ${fInt(served / seconds)}/s`);
    const rows: Row[] = [];
    const loadStart = { cpu: process.cpuUsage(), at: performance.now() };
    if (options.stream) {
      const measured = await inRounds(targets, options.rounds, (t) => streamRun(t, body, options.concurrency, ms), completedStreams, (t, run, round) =>
        progress(t, completedStreams(run), run.elapsedMs / 1000, round),
      );
      for (const [label, { runs, cpu }] of measured) rows.push({ label, rate: poolStreamRuns(runs).streamsPerSec, cpu });
    } else {
      const measured = await inRounds(targets, options.rounds, (t) => cannonRun(t, body, options.concurrency, ms), (run) => run.ok, (t, run, round) =>
        progress(t, run.ok, run.durationS, round),
      );
      for (const [label, { runs, cpu }] of measured) {
        const pooled = poolRuns(runs);
        rows.push({ label, rate: pooled.rps, cpu, pooled });
      }
    }
    const loadCpu = process.cpuUsage(loadStart.cpu);
    const loadCores = (loadCpu.user + loadCpu.system) / 1000 / (performance.now() - loadStart.at);
    const first = rows[0]!;
    table(
      `${options.stream ? "Streaming" : "Non-streaming"} chat completions at c=${options.concurrency}, upstream over ${options.https ? "https" : "http"}: ${options.rounds} interleaved rounds of ${options.seconds} s` +
        (place ? `; each proxy on ${options.pin} core${options.pin === 1 ? "" : "s"} of its own, the load generator on cores ${place.load} used ${f(loadCores)} cores` : ""),
      ["target", options.stream ? "streams/s" : "req/s", "× first", "CPU µs/req JS thread", "all threads", "JS thread × first", "p50 ms", "p90 ms", "p99 ms"],
      rows.map((row) => [
        row.label,
        fInt(row.rate),
        f(row.rate / first.rate),
        f(row.cpu?.mainUs, 1),
        f(row.cpu?.allUs, 1),
        row.cpu && first.cpu ? f(row.cpu.mainUs / first.cpu.mainUs) : "-",
        row.pooled ? f(row.pooled.p50, 3) : "-",
        row.pooled ? f(row.pooled.p90, 3) : "-",
        row.pooled ? f(row.pooled.p99, 3) : "-",
      ]),
      1,
    );
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
