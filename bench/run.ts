/**
 * The gateway's overhead against the upstream itself and against a bare Bun proxy, measured in one run.
 *
 *   npm run bench                      # full run (several minutes)
 *   npm run bench -- --quick           # smoke run: short measurements, 100k usage rows
 *   npm run bench -- --only nonstream  # one case (or a comma list): nonstream, stream, plugins, cross-format,
 *                                      # open-streams, usage
 *   npm run bench -- --vs portkey      # also Portkey's gateway in nonstream and stream (installed on demand)
 *   npm run bench -- --workers 1,2,4,8 # only the worker-scaling case (bench/workers.ts); --postgres, --stream-chunks N
 *
 * Prints tables and the issue's goals, writes bench/results.json. See bench/README.md.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { chatBody, percentile, type OpenStreamsResult } from "./stream-client.ts";
import { seedUsage, type SeededUsage } from "./seed-usage.ts";
import { runPluginsCase } from "./plugins-case.ts";
import { runCrossFormatCase } from "./cross-format.ts";
import { runScaleOut } from "./scale-out.ts";
import { runWorkersCommand } from "./workers.ts";
import { ensurePortkey, portkeyTarget, startPortkey, type PortkeyInstall } from "./portkey.ts";
import {
  BUN,
  LIFTED_FETCH_CAP,
  spawnStreamClient,
  ROOT,
  UPSTREAM_KEY,
  cannon,
  children,
  f,
  fInt,
  installCleanup,
  log,
  provisionKey,
  rssMb,
  signed,
  startGatewayProcess,
  stopAll,
  stopChild,
  streams,
  table,
  startBareProxy,
  startFakeUpstream,
  startHttpsUpstream,
  type Child,
  type Goal,
  type NonStreamFigures,
  type StreamFigures,
  type Target,
  type CpuPerRequest,
  cannonRun,
  completedStreams,
  inRounds,
  poolRuns,
  poolStreamRuns,
  streamRun,
} from "./lib.ts";

const CASES = ["nonstream", "stream", "plugins", "cross-format", "open-streams", "usage", "scale-out"] as const;
type CaseName = (typeof CASES)[number];

// ------------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------------

function parseArgs(argv: string[]) {
  const quick = argv.includes("--quick");
  const keep = argv.includes("--keep");
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(
      "usage: bun bench/run.ts [--quick] [--only nonstream,stream,plugins,cross-format,open-streams,usage] [--vs portkey] [--duration SECONDS] [--rows N] [--keep]\n" +
        "  --quick     short measurements and 100k usage rows (smoke run)\n" +
        "  --only      run only these cases (comma list, or repeat the flag)\n" +
        "  --vs        portkey: also measure Portkey's gateway in nonstream and stream (npm-installed into bench/.portkey/)\n" +
        "  --duration  seconds per throughput/latency measurement (default 5, quick 1.5)\n" +
        "  --rows      generation rows for the usage case (default 1,000,000, quick 100,000)\n" +
        "  --keep      keep the temporary directory (databases) at the end\n" +
        "  --workers   1,2,4,8: only the worker-scaling case (GATEWAY_WORKERS=N), writes bench/results-workers.json\n" +
        "              with --postgres (a scratch database on POSTGRES_TEST_URL / DATABASE_URL), --stream-chunks N (words of\n" +
        "              the streamed answer), --generator autocannon (even where wrk is installed)",
    );
    process.exit(0);
  }
  const only = new Set<CaseName>();
  const vs = new Set<string>();
  let duration: number | undefined;
  let rows: number | undefined;
  let workers: number[] | undefined;
  let streamChunks: number | undefined;
  let generator: "wrk" | "autocannon" | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = a.includes("=") ? a.slice(a.indexOf("=") + 1) : argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--only" || a.startsWith("--only=")) {
      for (const name of value().split(",").map((s) => s.trim()).filter(Boolean)) {
        if (!(CASES as readonly string[]).includes(name)) throw new Error(`unknown case "${name}"; cases: ${CASES.join(", ")}`);
        only.add(name as CaseName);
      }
    } else if (a === "--vs" || a.startsWith("--vs=")) {
      for (const name of value().split(",").map((s) => s.trim()).filter(Boolean)) {
        if (name !== "portkey") throw new Error(`unknown --vs "${name}"; known: portkey`);
        vs.add(name);
      }
    } else if (a === "--duration" || a.startsWith("--duration=")) duration = Number(value());
    else if (a === "--rows" || a.startsWith("--rows=")) rows = Number(value());
    else if (a === "--workers" || a.startsWith("--workers=")) {
      workers = value().split(",").map((v) => Number(v.trim()));
      if (workers.length === 0 || workers.some((n) => !Number.isInteger(n) || n < 1)) throw new Error("--workers takes a comma list of worker counts ≥ 1, e.g. 1,2,4,8");
    } else if (a === "--stream-chunks" || a.startsWith("--stream-chunks=")) streamChunks = Number(value());
    else if (a === "--generator" || a.startsWith("--generator=")) {
      const name = value();
      if (name !== "wrk" && name !== "autocannon") throw new Error(`unknown --generator "${name}"; known: wrk, autocannon`);
      generator = name;
    }
  }
  return {
    quick,
    keep,
    /** --workers: the worker-scaling case alone (bench/workers.ts). */
    workers: workers && {
      workers,
      postgres: argv.includes("--postgres"),
      measureMs: Math.round((duration ?? (quick ? 2 : 5)) * 1000),
      warmupMs: quick ? 1000 : 2000,
      streamChunks,
      generator,
    },
    cases: only.size > 0 ? CASES.filter((c) => only.has(c)) : [...CASES],
    portkey: vs.has("portkey"),
    /** Interleaved rounds of every target in the nonstream and stream cases, each half a measurement. */
    rounds: quick ? 2 : 4,
    roundMs: Math.round((duration ?? (quick ? 1.5 : 5)) * 500),
    /** Interleaved rounds per gateway in the plugins case, each half a measurement (same total time as 2 measurements). */
    pluginRounds: quick ? 2 : 10,
    measureMs: Math.round((duration ?? (quick ? 1.5 : 5)) * 1000),
    warmupMs: quick ? 500 : 1500,
    /** Per target and request kind at c=64 (and 0.6 of it at c=1), before the first measured case (see "steady state"). */
    steadyStateMs: quick ? 1000 : 5000,
    openStreams: { n: 1000, chunkDelayMs: quick ? 150 : 500 },
    usageRows: rows ?? (quick ? 100_000 : 1_000_000),
    usageRequests: quick ? 20 : 50,
  };
}


const roundsNote = (options: { rounds: number; roundMs: number }) =>
  `${options.rounds} interleaved rounds of ${options.roundMs / 1000} s per target, pooled`;

/** "main|all" CPU microseconds of the serving process per request: its JS thread, and all its threads. */
const cpuCell = (cpu: CpuPerRequest | undefined) => (cpu ? `${f(cpu.mainUs, 1)}|${f(cpu.allUs, 1)}` : "-");
/** Targets whose upstream is the fake behind the TLS front: compared with the bare proxy over https. */
const HTTPS = " https";
const bareFor = (name: string) => (name.endsWith(HTTPS) ? "bare" + HTTPS : "bare");
const isProxy = (target: Target) => target.name !== "upstream" && target.name !== bareFor(target.name);

interface OpenStreamsFigures extends OpenStreamsResult {
  target: string;
  baselineRssMb: number;
  peakRssMb: number;
}

/** n streams at once from a child client (whose fetch cap is lifted), sampling the server's RSS meanwhile. */
async function openStreamsAgainst(label: string, server: Child, key: string, n: number, chunkDelayMs: number): Promise<OpenStreamsFigures> {
  await Bun.sleep(500);
  const pid = server.proc.pid;
  const baselineRssMb = rssMb(pid);
  let peakRssMb = baselineRssMb;
  const { proc: client, child: clientChild, stdout, stderr } = spawnStreamClient([BUN, "bench/stream-client.ts", "--url", server.url, "--key", key, "--n", String(n), "--chunk-delay-ms", String(chunkDelayMs)]);
  let running = true;
  void client.exited.then(() => (running = false));
  while (running) {
    const rss = rssMb(pid);
    if (rss > peakRssMb) peakRssMb = rss;
    await Bun.sleep(20);
  }
  children.delete(clientChild);
  const out = await stdout;
  if (client.exitCode !== 0) throw new Error(`stream client failed (${client.exitCode}): ${await stderr}`);
  const result = JSON.parse(out.trim().split("\n").at(-1)!) as OpenStreamsResult;
  return { target: label, baselineRssMb, peakRssMb, ...result };
}

interface UsageFigures {
  scope: "account" | "key";
  requests: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
  firstError: string | null;
  reportedRequests: number | null;
  days: number | null;
  responseBytes: number | null;
}

async function usageLatency(gatewayUrl: string, key: string, scope: "account" | "key", startDay: string, endDay: string, count: number): Promise<UsageFigures> {
  const url = `${gatewayUrl}/v1/usage?start_date=${startDay}&end_date=${endDay}&scope=${scope}`;
  const headers = { authorization: `Bearer ${key}` };
  const GAP_MS = 40; // the cost API allows 30 requests per second per key: stay under it
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | null = null;
  let reportedRequests: number | null = null;
  let days: number | null = null;
  let responseBytes: number | null = null;
  for (let i = -3; i < count; i++) {
    const started = performance.now();
    const response = await fetch(url, { headers });
    const text = await response.text();
    const elapsed = performance.now() - started;
    if (i >= 0) {
      if (response.ok) latencies.push(elapsed);
      else {
        errors++;
        firstError ??= `${response.status} ${text.slice(0, 200)}`;
      }
    }
    if (response.ok && reportedRequests === null) {
      const report = JSON.parse(text).data;
      reportedRequests = report.total?.requests ?? null;
      days = Array.isArray(report.days) ? report.days.length : null;
      responseBytes = Buffer.byteLength(text);
    }
    const wait = GAP_MS - (performance.now() - started);
    if (wait > 0) await Bun.sleep(wait);
  }
  latencies.sort((a, b) => a - b);
  return { scope, requests: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1) ?? Number.NaN, errors, firstError, reportedRequests, days, responseBytes };
}

// ------------------------------------------------------------------------------------------------
// Main
// ------------------------------------------------------------------------------------------------

async function main() {
  installCleanup();
  const options = parseArgs(process.argv.slice(2));
  if (options.workers) return runWorkersCommand(options.workers);
  const runs = (name: CaseName) => options.cases.includes(name);
  const tmp = mkdtempSync(join(tmpdir(), "gateway-bench-"));
  log(`cases: ${options.cases.join(", ")}${options.quick ? " (quick)" : ""}; temp dir ${tmp}`);
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    bun: Bun.version,
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? null,
    platform: `${process.platform}-${process.arch}`,
    quick: options.quick,
    settings: {
      measure_ms: options.measureMs,
      warmup_ms: options.warmupMs,
      plugin_rounds: options.pluginRounds,
      plugin_round_ms: Math.round(options.measureMs / 2),
      open_streams: options.openStreams,
      usage_rows: options.usageRows,
      usage_requests: options.usageRequests,
      vs: options.portkey ? ["portkey"] : [],
    },
    cases: {} as Record<string, unknown>,
  };
  const cases = results.cases as Record<string, unknown>;
  const goals: Goal[] = [];

  try {
    const needsProxies = runs("nonstream") || runs("stream") || runs("plugins") || runs("cross-format") || runs("open-streams");
    let upstream: Child | undefined;
    let bare: Child | undefined;
    let gateway: Child | undefined;
    let gatewayKey = "";
    const targets: Target[] = [];
    if (needsProxies) {
      upstream = await startFakeUpstream();
      bare = await startBareProxy(upstream.url);
      gateway = await startGatewayProcess("gateway", join(tmp, "bench.db"), upstream.url);
      gatewayKey = await provisionKey(gateway.url);
      log(`upstream ${upstream.url} (pid ${upstream.proc.pid}), bare proxy ${bare.url} (pid ${bare.proc.pid}), gateway ${gateway.url} (pid ${gateway.proc.pid})`);
      targets.push(
        { name: "upstream", url: upstream.url, key: UPSTREAM_KEY, pid: upstream.proc.pid },
        { name: "bare", url: bare.url, key: UPSTREAM_KEY, pid: bare.proc.pid },
        { name: "gateway", url: gateway.url, key: gatewayKey, pid: gateway.proc.pid },
      );
    }
    // Every real provider is reached over https: the same fake behind a TLS front with its own CA, which the
    // bare proxy and a second gateway (its own SQLite file) trust through NODE_EXTRA_CA_CERTS.
    if (runs("nonstream") || runs("stream")) {
      const https = await startHttpsUpstream(upstream!, join(tmp, "tls"));
      const bareHttps = await startBareProxy(https.url, https.env);
      const gatewayHttps = await startGatewayProcess("gateway" + HTTPS, join(tmp, "bench-https.db"), https.url, https.env);
      const key = await provisionKey(gatewayHttps.url);
      log(`https upstream ${https.url} (TLS front pid ${https.front.proc.pid}), bare proxy${HTTPS} ${bareHttps.url}, gateway${HTTPS} ${gatewayHttps.url}`);
      targets.push(
        { name: "bare" + HTTPS, url: bareHttps.url, key: UPSTREAM_KEY, pid: bareHttps.proc.pid },
        { name: "gateway" + HTTPS, url: gatewayHttps.url, key, pid: gatewayHttps.proc.pid },
      );
    }

    // -- --vs portkey: one more target of nonstream and stream ------------------------------------
    let portkey: PortkeyInstall | undefined;
    if (options.portkey) {
      if (!runs("nonstream") && !runs("stream")) log("--vs portkey applies to the nonstream and stream cases, and neither runs: ignored");
      else {
        const install = await ensurePortkey();
        if ("skipped" in install) {
          log(`SKIPPING Portkey: ${install.skipped}`);
          results.portkey = { skipped: install.skipped };
        } else {
          portkey = install;
          const child = await startPortkey(install);
          targets.push(portkeyTarget(child, upstream!.url));
          results.portkey = { version: install.version, hono_node_server: install.nodeServerVersion, node: install.nodeVersion, installed_now: install.installedNow };
          log(`Portkey gateway ${install.version} on node ${install.nodeVersion} (@hono/node-server ${install.nodeServerVersion}): ${child.url} (pid ${child.proc.pid})`);
        }
      }
    }
    /** Gateway ÷ Portkey rows, filled by nonstream and stream. */
    const vsPortkey: string[][] = [];

    // -- steady state: every target serves both request kinds under load before anything is measured --------
    // A server measured minutes after its start is what users meet: its JIT has compiled the hot paths (c=1
    // and c=64 take different ones) and its store holds rows. Measured at c=1 right after start-up instead,
    // the gateway's first rounds still pay for compiling: its p99 over the bare proxy was +1.9 ms in round 1
    // and +0.5 ms from round 4 on (8 rounds of 2.5 s); +0.4 to +0.5 ms in every round after this warm-up.
    if (runs("nonstream") || runs("stream")) {
      for (const stream of [false, true]) {
        const body = chatBody({ stream });
        for (const [c, ms] of [[64, options.steadyStateMs], [1, options.steadyStateMs * 0.6]] as const) {
          for (const target of targets) await (stream ? streams(target, body, c, ms) : cannon(target, body, c, ms));
        }
      }
    }

    // -- non-streaming -------------------------------------------------------------------------
    if (runs("nonstream")) {
      const body = chatBody({ stream: false });
      const byConcurrency: Record<string, Record<string, NonStreamFigures>> = {};
      for (const c of [1, 64]) {
        for (const target of targets) await cannon(target, body, c, options.warmupMs);
        const measured = await inRounds(
          targets,
          options.rounds,
          (target) => cannonRun(target, body, c, options.roundMs),
          (run) => run.ok,
          (target, run, round) => log(`non-streaming c=${c} round ${round + 1}/${options.rounds} → ${target.name}: ${fInt(run.ok / run.durationS)} req/s`),
        );
        const figures: Record<string, NonStreamFigures> = {};
        for (const [name, { runs, cpu }] of measured) figures[name] = { ...poolRuns(runs), cpu };
        byConcurrency[c] = figures;
      }
      const rows: string[][] = [];
      const json: unknown[] = [];
      for (const [c, figures] of Object.entries(byConcurrency)) {
        const up = figures.upstream!;
        const bareF = figures.bare!;
        const gw = figures.gateway!;
        for (const target of targets) {
          const x = figures[target.name]!;
          const ref = figures[bareFor(target.name)]!;
          rows.push([
            `c=${c}`,
            target.name,
            fInt(x.rps),
            f(x.p50, 3),
            f(x.p99, 3),
            f(x.rps / up.rps),
            f(x.rps / ref.rps),
            target.name === "upstream" ? "-" : signed(x.p50 - up.p50, 3),
            isProxy(target) ? signed(x.p50 - ref.p50, 3) : "-",
            isProxy(target) ? signed(x.p99 - ref.p99, 3) : "-",
            cpuCell(x.cpu),
            `${x.non2xx}/${x.errors}`,
          ]);
        }
        const gwHttps = figures["gateway" + HTTPS];
        const bareHttps = figures["bare" + HTTPS];
        json.push({
          concurrency: Number(c),
          targets: figures,
          ratios: {
            ...(gwHttps && bareHttps
              ? {
                  https_rps_gateway_over_bare: gwHttps.rps / bareHttps.rps,
                  https_added_p50_ms_over_bare: gwHttps.p50 - bareHttps.p50,
                  https_added_p99_ms_over_bare: gwHttps.p99 - bareHttps.p99,
                  https_cpu_all_us_gateway: gwHttps.cpu?.allUs ?? null,
                }
              : {}),
            rps_gateway_over_upstream: gw.rps / up.rps,
            rps_gateway_over_bare: gw.rps / bareF.rps,
            rps_bare_over_upstream: bareF.rps / up.rps,
            added_p50_ms_over_bare: gw.p50 - bareF.p50,
            added_p99_ms_over_bare: gw.p99 - bareF.p99,
            added_p50_ms_over_upstream: gw.p50 - up.p50,
            ...(figures.portkey
              ? {
                  rps_gateway_over_portkey: gw.rps / figures.portkey.rps,
                  rps_portkey_over_bare: figures.portkey.rps / bareF.rps,
                  p50_ms_portkey_minus_gateway: figures.portkey.p50 - gw.p50,
                }
              : {}),
          },
        });
        if (figures.portkey) {
          const pk = figures.portkey;
          vsPortkey.push([`non-streaming c=${c}`, "req/s", fInt(gw.rps), fInt(pk.rps), f(gw.rps / pk.rps, 1), "p50 ms", f(gw.p50, 3), f(pk.p50, 3), "p99 ms", f(gw.p99, 3), f(pk.p99, 3)]);
        }
      }
      cases.nonstream = json;
      table(
        `Non-streaming chat completion (gpt-6-luna), autocannon, ${roundsNote(options)}; "${HTTPS.trim()}": upstream over https, ×bare against the bare proxy over https`,
        ["conc", "target", "req/s", "p50 ms", "p99 ms", "×upstream", "×bare", "+p50 vs up", "+p50 vs bare", "+p99 vs bare", "CPU µs/req main|all", "non2xx/err"],
        rows,
      );
      const c1 = byConcurrency[1]!;
      const c64 = byConcurrency[64]!;
      const r64 = c64.gateway!.rps / c64.bare!.rps;
      const a50 = c1.gateway!.p50 - c1.bare!.p50;
      const a99 = c1.gateway!.p99 - c1.bare!.p99;
      goals.push({ goal: "non-streaming c=64: gateway ≥ 0.8× bare proxy req/s", value: `${f(r64)}×`, pass: r64 >= 0.8 });
      goals.push({ goal: "non-streaming c=1: added p50 over bare ≤ 0.2 ms", value: `${signed(a50, 3)} ms`, pass: a50 <= 0.2 });
      goals.push({ goal: "non-streaming c=1: added p99 over bare ≤ 1 ms", value: `${signed(a99, 3)} ms`, pass: a99 <= 1 });
      if (c64["gateway" + HTTPS]) {
        const g = c64["gateway" + HTTPS]!;
        const b = c64["bare" + HTTPS]!;
        goals.push({ goal: "https upstream, non-streaming c=64: gateway ÷ bare proxy req/s, both over https", value: `${f(g.rps / b.rps)}× (CPU µs/req all threads: ${f(g.cpu?.allUs, 1)} vs ${f(b.cpu?.allUs, 1)})`, pass: null });
      }
      if (c64.portkey) {
        const r = c64.gateway!.rps / c64.portkey.rps;
        goals.push({ goal: "non-streaming c=64: gateway ≥ 10× Portkey req/s", value: `${f(r, 1)}× (${fInt(c64.gateway!.rps)} vs ${fInt(c64.portkey.rps)}); c=1: ${f(c1.gateway!.rps / c1.portkey!.rps, 1)}×`, pass: r >= 10 });
      }
      const bad = Object.values(byConcurrency).flatMap((fs) => Object.entries(fs)).filter(([, x]) => x.non2xx > 0 || x.errors > 0);
      if (bad.length > 0) log(`WARNING: non-2xx or errors: ${bad.map(([n, x]) => `${n} non2xx=${x.non2xx} errors=${x.errors}`).join("; ")}`);
    }

    // -- streaming -----------------------------------------------------------------------------
    if (runs("stream")) {
      const body = chatBody({ stream: true });
      const byConcurrency: Record<string, Record<string, StreamFigures>> = {};
      for (const c of [1, 64]) {
        for (const target of targets) await streams(target, body, c, options.warmupMs);
        const measured = await inRounds(
          targets,
          options.rounds,
          (target) => streamRun(target, body, c, options.roundMs),
          completedStreams,
          (target, run, round) => log(`streaming c=${c} round ${round + 1}/${options.rounds} → ${target.name}: ${fInt(run.samples.length / (run.elapsedMs / 1000))} streams/s`),
        );
        const figures: Record<string, StreamFigures> = {};
        for (const [name, { runs, cpu }] of measured) {
          figures[name] = { ...poolStreamRuns(runs), cpu };
          if (figures[name]!.errors > 0) log(`WARNING: ${name}: ${figures[name]!.errors} failed streams, first: ${figures[name]!.firstError}`);
        }
        byConcurrency[c] = figures;
      }
      const rows: string[][] = [];
      const json: unknown[] = [];
      for (const [c, figures] of Object.entries(byConcurrency)) {
        const up = figures.upstream!;
        const bareF = figures.bare!;
        const gw = figures.gateway!;
        for (const target of targets) {
          const x = figures[target.name]!;
          const ref = figures[bareFor(target.name)]!;
          rows.push([
            `c=${c}`,
            target.name,
            fInt(x.streamsPerSec),
            f(x.ttfbP50, 3),
            f(x.ttfbP99, 3),
            f(x.ttlbP50, 3),
            f(x.ttlbP99, 3),
            f(x.streamsPerSec / up.streamsPerSec),
            f(x.streamsPerSec / ref.streamsPerSec),
            isProxy(target) ? signed(x.ttfbP50 - ref.ttfbP50, 3) : "-",
            isProxy(target) ? signed(x.ttlbP99 - ref.ttlbP99, 3) : "-",
            cpuCell(x.cpu),
            String(x.errors),
          ]);
        }
        const gwHttps = figures["gateway" + HTTPS];
        const bareHttps = figures["bare" + HTTPS];
        json.push({
          concurrency: Number(c),
          targets: figures,
          ratios: {
            ...(gwHttps && bareHttps
              ? {
                  https_streams_gateway_over_bare: gwHttps.streamsPerSec / bareHttps.streamsPerSec,
                  https_added_ttfb_p50_ms_over_bare: gwHttps.ttfbP50 - bareHttps.ttfbP50,
                  https_cpu_all_us_gateway: gwHttps.cpu?.allUs ?? null,
                }
              : {}),
            streams_gateway_over_upstream: gw.streamsPerSec / up.streamsPerSec,
            streams_gateway_over_bare: gw.streamsPerSec / bareF.streamsPerSec,
            added_ttfb_p50_ms_over_bare: gw.ttfbP50 - bareF.ttfbP50,
            added_ttfb_p99_ms_over_bare: gw.ttfbP99 - bareF.ttfbP99,
            added_ttlb_p50_ms_over_bare: gw.ttlbP50 - bareF.ttlbP50,
            added_ttlb_p99_ms_over_bare: gw.ttlbP99 - bareF.ttlbP99,
            ...(figures.portkey
              ? {
                  streams_gateway_over_portkey: gw.streamsPerSec / figures.portkey.streamsPerSec,
                  streams_portkey_over_bare: figures.portkey.streamsPerSec / bareF.streamsPerSec,
                  ttfb_p50_ms_portkey_minus_gateway: figures.portkey.ttfbP50 - gw.ttfbP50,
                }
              : {}),
          },
        });
        if (figures.portkey) {
          const pk = figures.portkey;
          vsPortkey.push([`streaming c=${c}`, "streams/s", fInt(gw.streamsPerSec), fInt(pk.streamsPerSec), f(gw.streamsPerSec / pk.streamsPerSec, 1), "TTFB p50 ms", f(gw.ttfbP50, 3), f(pk.ttfbP50, 3), "TTLB p99 ms", f(gw.ttlbP99, 3), f(pk.ttlbP99, 3)]);
        }
      }
      cases.stream = json;
      table(
        `Streaming chat completion (gpt-6-luna), fetch client, ${roundsNote(options)}; "${HTTPS.trim()}": upstream over https, ×bare against the bare proxy over https`,
        ["conc", "target", "streams/s", "TTFB p50", "TTFB p99", "TTLB p50", "TTLB p99", "×upstream", "×bare", "+TTFB p50 vs bare", "+TTLB p99 vs bare", "CPU µs/stream main|all", "errors"],
        rows,
      );
      const c1 = byConcurrency[1]!;
      const c64 = byConcurrency[64]!;
      const r64 = c64.gateway!.streamsPerSec / c64.bare!.streamsPerSec;
      const ttfb = c1.gateway!.ttfbP50 - c1.bare!.ttfbP50;
      goals.push({ goal: "streaming c=64: gateway ≥ 0.8× bare proxy streams/s", value: `${f(r64)}×`, pass: r64 >= 0.8 });
      goals.push({ goal: "streaming c=1: added TTFB p50 over bare ≤ 0.5 ms", value: `${signed(ttfb, 3)} ms`, pass: ttfb <= 0.5 });
      if (c64["gateway" + HTTPS]) {
        const g = c64["gateway" + HTTPS]!;
        const b = c64["bare" + HTTPS]!;
        goals.push({ goal: "https upstream, streaming c=64: gateway ÷ bare proxy streams/s, both over https", value: `${f(g.streamsPerSec / b.streamsPerSec)}× (CPU µs/stream all threads: ${f(g.cpu?.allUs, 1)} vs ${f(b.cpu?.allUs, 1)})`, pass: null });
      }
      if (c64.portkey) {
        const r = c64.gateway!.streamsPerSec / c64.portkey.streamsPerSec;
        goals.push({ goal: "streaming c=64: gateway ≥ 10× Portkey streams/s", value: `${f(r, 1)}× (${fInt(c64.gateway!.streamsPerSec)} vs ${fInt(c64.portkey.streamsPerSec)}); c=1: ${f(c1.gateway!.streamsPerSec / c1.portkey!.streamsPerSec, 1)}×`, pass: r >= 10 });
      }
    }

    if (vsPortkey.length > 0) {
      table(
        `Gateway vs Portkey ${portkey!.version} (node ${portkey!.nodeVersion}), same fake upstream, same run`,
        ["case", "throughput", "gateway", "portkey", "gateway ÷ portkey", "latency", "gateway", "portkey", "latency", "gateway", "portkey"],
        vsPortkey,
      );
    }

    // -- budget + rate-limit on vs off ----------------------------------------------------------
    if (runs("plugins")) {
      const redisUrl = process.env.REDIS_URL || undefined;
      const { json, goals: g } = await runPluginsCase({ tmp, upstream: upstream!, bare: bare!, measureMs: options.measureMs, warmupMs: options.warmupMs, rounds: options.pluginRounds, roundMs: Math.round(options.measureMs / 2), redisUrl });
      cases.plugins = json;
      goals.push(...g);
    }

    // -- streaming across wire formats --------------------------------------------------------------
    if (runs("cross-format")) {
      const { json, goals: g } = await runCrossFormatCase({ upstream: upstream!, bare: bare!, gateway: gateway!, gatewayKey, measureMs: options.measureMs, warmupMs: options.warmupMs, rounds: options.rounds });
      cases.cross_format = json;
      goals.push(...g);
    }

    // -- 1,000 open streams ----------------------------------------------------------------------
    if (runs("open-streams")) {
      const { n, chunkDelayMs } = options.openStreams;
      const figures: OpenStreamsFigures[] = [];
      log(`${n} open streams (chunk_delay_ms ${chunkDelayMs}) → bare proxy`);
      figures.push(await openStreamsAgainst("bare", bare!, UPSTREAM_KEY, n, chunkDelayMs));
      log(`${n} open streams → gateway`);
      figures.push(await openStreamsAgainst("gateway", gateway!, gatewayKey, n, chunkDelayMs));
      // The same gateway with Bun's per-process fetch cap (256 in flight) lifted: all n upstream streams open at once.
      // Its own SQLite file: a gateway (process-mode holds, the default) locks the file it serves from.
      const lifted = await startGatewayProcess("gateway (fetch cap lifted)", join(tmp, "lifted.db"), upstream!.url, { BUN_CONFIG_MAX_HTTP_REQUESTS: LIFTED_FETCH_CAP });
      try {
        const liftedKey = await provisionKey(lifted.url);
        // Warm it like the main one was (a few hundred requests), so the baseline is not a cold process.
        await cannon({ name: "gateway", url: lifted.url, key: liftedKey }, chatBody({ stream: false }), 16, 1000);
        log(`${n} open streams → gateway with BUN_CONFIG_MAX_HTTP_REQUESTS=${LIFTED_FETCH_CAP}`);
        figures.push(await openStreamsAgainst(`gateway, BUN_CONFIG_MAX_HTTP_REQUESTS=${LIFTED_FETCH_CAP}`, lifted, liftedKey, n, chunkDelayMs));
      } finally {
        await stopChild(lifted);
      }
      cases.open_streams = { streams: n, chunk_delay_ms: chunkDelayMs, targets: figures };
      table(
        `${n} streams opened at once (chunk_delay_ms ${chunkDelayMs}); RSS of the server process`,
        ["streams", "target", "RSS before MB", "RSS peak MB", "max open", "ok", "TTFB p50", "TTFB max", "TTLB p50", "TTLB max", "wall s"],
        figures.map((x) => [
          String(x.n),
          x.target,
          f(x.baselineRssMb, 1),
          f(x.peakRssMb, 1),
          String(x.maxOpen),
          String(x.ok),
          fInt(x.ttfb.p50),
          fInt(x.ttfb.max),
          fInt(x.ttlb.p50),
          fInt(x.ttlb.max),
          f(x.elapsedMs / 1000, 1),
        ]),
      );
      for (const x of figures) if (x.errors > 0) log(`WARNING: ${x.target}: ${x.errors} failed streams, first: ${x.firstError}`);
      const gw = figures[1]!;
      const gwLifted = figures[2]!;
      goals.push({
        goal: `gateway RSS ≤ 150 MB with ${n} open streams`,
        value: `${f(gw.peakRssMb, 1)} MB (max ${gw.maxOpen} open at once); cap lifted: ${f(gwLifted.peakRssMb, 1)} MB (${gwLifted.maxOpen} open)`,
        pass: gw.peakRssMb <= 150 && gwLifted.peakRssMb <= 150 && gwLifted.maxOpen >= n * 0.95,
      });
      if (gw.maxOpen < n * 0.95) {
        log(`NOTE: only ${gw.maxOpen} of ${n} streams were open at once through the gateway: Bun's fetch holds 256 requests in flight per process (BUN_CONFIG_MAX_HTTP_REQUESTS)`);
      }
    }

    // The proxies are not needed for the usage case: free the cores.
    for (const child of [...children]) await stopChild(child);

    // -- /v1/usage over 92 days ------------------------------------------------------------------
    if (runs("usage")) {
      const dbPath = join(tmp, "usage.db");
      log(`seeding ${options.usageRows.toLocaleString("en-US")} generations over 92 days into ${dbPath}`);
      const step = Math.max(10_000, Math.round(options.usageRows / 4 / 10_000) * 10_000);
      const seeded: SeededUsage = await seedUsage({
        dbPath,
        rows: options.usageRows,
        onProgress: (done) => done % step === 0 && done < options.usageRows && log(`  ${done.toLocaleString("en-US")} rows`),
      });
      log(`seeded in ${f(seeded.seedMs / 1000, 1)} s (${fInt(options.usageRows / (seeded.seedMs / 1000))} rows/s), ${f(seeded.dbBytes / 1e6, 0)} MB`);
      // The fake upstream is not used here; the gateway only needs a syntactically valid base URL.
      // Start-up may run migrations over the seeded rows: allow it time, and report it.
      const startAt = performance.now();
      const usageGateway = await startGatewayProcess("usage gateway", dbPath, "http://127.0.0.1:9", {}, [], 300_000);
      const startupMs = performance.now() - startAt;
      log(`gateway on the seeded store ready in ${f(startupMs / 1000, 1)} s`);
      let account: UsageFigures;
      let key: UsageFigures;
      try {
        log(`GET /v1/usage ${seeded.startDay}..${seeded.endDay}, ${options.usageRequests} sequential requests per scope`);
        account = await usageLatency(usageGateway.url, seeded.keys[0]!.key, "account", seeded.startDay, seeded.endDay, options.usageRequests);
        key = await usageLatency(usageGateway.url, seeded.keys[0]!.key, "key", seeded.startDay, seeded.endDay, options.usageRequests);
      } finally {
        await stopChild(usageGateway);
      }
      const storeAccount = [...seeded.storeOnly.account].sort((a, b) => a - b);
      const storeKey = [...seeded.storeOnly.key].sort((a, b) => a - b);
      cases.usage = {
        rows: seeded.rows,
        days: seeded.days,
        models: 40,
        keys: seeded.keys.length,
        seed_seconds: seeded.seedMs / 1000,
        gateway_startup_seconds: startupMs / 1000,
        db_mb: seeded.dbBytes / 1e6,
        window: { start_date: seeded.startDay, end_date: seeded.endDay },
        http: { account, key },
        store_only: {
          account: { p50: percentile(storeAccount, 50), p99: percentile(storeAccount, 99) },
          key: { p50: percentile(storeKey, 50), p99: percentile(storeKey, 99) },
        },
      };
      table(
        `GET /v1/usage, 92-day window over ${options.usageRows.toLocaleString("en-US")} generations (3 keys, 40 models); seeding took ${f(seeded.seedMs / 1000, 1)} s`,
        ["scope", "measured", "requests", "p50 ms", "p99 ms", "max ms", "days", "requests in report", "response KB", "errors"],
        [
          ["account", "HTTP", String(account.requests), f(account.p50, 2), f(account.p99, 2), f(account.max, 2), String(account.days ?? "-"), String(account.reportedRequests ?? "-"), f((account.responseBytes ?? Number.NaN) / 1024, 0), String(account.errors)],
          ["key", "HTTP", String(key.requests), f(key.p50, 2), f(key.p99, 2), f(key.max, 2), String(key.days ?? "-"), String(key.reportedRequests ?? "-"), f((key.responseBytes ?? Number.NaN) / 1024, 0), String(key.errors)],
          ["account", "store only", String(storeAccount.length), f(percentile(storeAccount, 50), 2), f(percentile(storeAccount, 99), 2), f(storeAccount.at(-1), 2), "-", "-", "-", "-"],
          ["key", "store only", String(storeKey.length), f(percentile(storeKey, 50), 2), f(percentile(storeKey, 99), 2), f(storeKey.at(-1), 2), "-", "-", "-", "-"],
        ],
      );
      if (account.errors + key.errors > 0) log(`WARNING: usage errors, first: ${account.firstError ?? key.firstError}`);
      if (account.reportedRequests !== options.usageRows) log(`WARNING: the account report counts ${account.reportedRequests} requests, expected ${options.usageRows}`);
      const worst = Math.max(account.p99, key.p99);
      goals.push({
        goal: `/v1/usage 92 days over ${options.usageRows.toLocaleString("en-US")} rows < 50 ms (p99, worse scope)`,
        value: `p50 ${f(Math.max(account.p50, key.p50))} ms, p99 ${f(worst)} ms`,
        pass: worst < 50,
      });
      if (options.usageRows < 1_000_000) goals.at(-1)!.goal += " [goal is for 1M rows]";
    }

    // -- SQLite vs Postgres + Redis, one instance vs two (bench/scale-out.ts) ---------------------
    if (runs("scale-out")) {
      const postgresUrl =
        process.env.POSTGRES_TEST_URL ?? (/^postgres(ql)?:\/\//.test(process.env.DATABASE_URL ?? "") ? process.env.DATABASE_URL : undefined);
      const redisUrl = process.env.REDIS_URL;
      if (!postgresUrl || !redisUrl) {
        log("scale-out skipped: set DATABASE_URL (postgres://…) and REDIS_URL to compare SQLite with Postgres + Redis");
      } else {
        log("scale-out: SQLite vs Postgres + Redis, one instance vs two");
        cases.scale_out = await runScaleOut({ postgresUrl, redisUrl, durationMs: options.measureMs, warmupMs: options.warmupMs, print: true });
      }
    }

    if (goals.length > 0) {
      table(
        "Goals",
        ["", "goal", "measured"],
        goals.map((g) => [g.pass === null ? " " : g.pass ? "✓" : "✗", g.goal, g.value]),
        3,
      );
    }
    results.goals = goals;
    const out = join(ROOT, "bench", "results.json");
    writeFileSync(out, JSON.stringify(results, null, 2) + "\n");
    console.log(`\nwrote ${out} (bun ${Bun.version}, ${cpus().length} CPUs)`);
  } finally {
    await stopAll();
    if (options.keep) log(`kept ${tmp}`);
    else rmSync(tmp, { recursive: true, force: true });
  }
}

try {
  await main();
  process.exit(0);
} catch (error) {
  console.error(`bench failed: ${(error as Error)?.stack ?? error}`);
  await stopAll();
  process.exit(1);
}
