/**
 * Worker scaling: the same gateway with GATEWAY_WORKERS = N (a primary and N worker processes on one port,
 * SO_REUSEPORT), N = 1, 2, 4, 8 …, each a fresh process on its own store, measured non-streaming and streaming at
 * max(64, 64 × N) connections. Prints one table (req/s and streams/s against 1 worker, efficiency = × ÷ N, the CPU of
 * every gateway process, their memory as PSS idle and after the load), checks the ledger after each N, writes
 * bench/results-workers.json.
 *
 *   npm run bench -- --workers 1,2,4,8 [--postgres] [--stream-chunks 20] [--duration 5] [--generator autocannon]
 *
 * Load: `wrk` when it is on PATH (a Lua script sends the POST body and prints the figures), pinned with `taskset`
 * to the last cores when the machine has 8 or more (the gateway and the fake upstream on the others); else
 * autocannon with worker threads. The fake upstream runs as several processes on one port (--reuse-port).
 * See bench/README.md, "Workers".
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { chatBody } from "./stream-client.ts";
import { workerHoldsMode } from "../src/core/primary.ts";
import {
  BUN,
  ROOT,
  checkLedger,
  createScratchDatabase,
  f,
  fInt,
  freePort,
  gatewayEnv,
  listeningSockets,
  log,
  postgresServerUrl,
  provisionKey,
  readLedgerState,
  spawnChild,
  stopChild,
  table,
  treeCpuDelta,
  treeCpuSeconds,
  treePssMb,
  waitReady,
  type Child,
} from "./lib.ts";

export interface WorkersOptions {
  workers: number[];
  postgres: boolean;
  /** Measured seconds per request kind and N. */
  measureMs: number;
  warmupMs: number;
  /** Words (= stream chunks) of the fake's answer; default: its own short answer. */
  streamChunks?: number;
  /** Force autocannon even where wrk is installed. */
  generator?: "wrk" | "autocannon";
}

/** The goal of issue 32: N workers serve at least 0.7 × N times what one serves. */
const GOAL_EFFICIENCY = 0.7;

// ------------------------------------------------------------------------------------------------
// Where things run
// ------------------------------------------------------------------------------------------------

interface Placement {
  cores: number;
  /** taskset prefix for the gateway and the fake upstream ([] = not pinned). */
  serverPin: string[];
  /** taskset prefix for the load generator ([] = not pinned). */
  loadPin: string[];
  loadCores: number;
  fakeProcesses: number;
  describe: string;
}

function placement(): Placement {
  const cores = cpus().length;
  if (cores < 8) {
    return { cores, serverPin: [], loadPin: [], loadCores: Math.max(1, cores - 1), fakeProcesses: 1, describe: `${cores} cores, nothing pinned (fewer than 8)` };
  }
  const loadCores = Math.max(2, Math.floor(cores / 4));
  const serverLast = cores - loadCores - 1;
  return {
    cores,
    serverPin: ["taskset", "-c", `0-${serverLast}`],
    loadPin: ["taskset", "-c", `${serverLast + 1}-${cores - 1}`],
    loadCores,
    fakeProcesses: Math.max(2, Math.floor(cores / 4)),
    describe: `${cores} cores: gateway and fake upstream on cores 0-${serverLast}, load generator on ${serverLast + 1}-${cores - 1}`,
  };
}

/** K fake upstream processes sharing one port (SO_REUSEPORT), so the upstream is not one core. */
async function startFakeUpstreams(k: number, pin: string[]): Promise<Child[]> {
  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  const fakes: Child[] = [];
  for (let i = 0; i < k; i++) {
    const cmd = [...pin, BUN, "test/fake-upstream/server.ts", "--port", String(port), ...(k > 1 ? ["--reuse-port"] : [])];
    fakes.push(spawnChild(`fake upstream ${i}`, cmd, process.env, url));
  }
  await waitReady(fakes[0]!, "/v1/models", false);
  await waitListening(port, k, fakes[0]!);
  return fakes;
}

async function waitListening(port: number, count: number, child: Child, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (listeningSockets(port) < count) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) throw new Error(`${child.name} exited (${child.proc.exitCode ?? child.proc.signalCode}):\n${child.output()}`);
    if (Date.now() > deadline) throw new Error(`${child.name}: ${listeningSockets(port)} of ${count} processes listen on ${port} after ${timeoutMs} ms:\n${child.output()}`);
    await Bun.sleep(100);
  }
}

/**
 * The gateway as bench/run.ts starts it, plus GATEWAY_WORKERS=N; ready once /ready answers and N sockets listen on its
 * port (GATEWAY_LOG=silent hides the primary's "gateway listening" line, so the sockets are counted instead).
 */
async function startWorkersGateway(n: number, databaseUrl: string, upstreamUrl: string, pin: string[]): Promise<Child> {
  const port = freePort();
  const env = gatewayEnv(port, "unused", upstreamUrl, { DATABASE_URL: databaseUrl, GATEWAY_WORKERS: String(n) });
  const child = spawnChild(`gateway (${n} worker${n === 1 ? "" : "s"})`, [...pin, BUN, "src/index.ts"], env, `http://127.0.0.1:${port}`);
  await waitReady(child, "/ready", true, 60_000);
  await waitListening(port, n, child);
  return child;
}

// ------------------------------------------------------------------------------------------------
// Load generators
// ------------------------------------------------------------------------------------------------

interface LoadRun {
  /** 2xx (wrk: every complete response but those with status ≥ 400; the fake answers no 1xx/3xx). */
  ok: number;
  non2xx: number;
  errors: number;
  durationS: number;
  p50Ms: number;
  p99Ms: number;
}

interface Generator {
  name: string;
  describe: string;
  run(url: string, key: string, body: string, connections: number, durationMs: number): Promise<LoadRun>;
}

/** Lua for wrk: the POST, and one JSON line of figures at the end. */
function wrkScript(key: string, body: string): string {
  return `wrk.method = "POST"
wrk.body = [==[${body}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${key}"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\nWRK_JSON {"requests":%d,"duration_us":%d,"status":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(50), latency:percentile(99)))
end
`;
}

function wrkGenerator(place: Placement, tmp: string): Generator {
  const threads = place.loadCores;
  return {
    name: "wrk",
    describe: `wrk (${Bun.which("wrk")}), ${threads} threads${place.loadPin.length > 0 ? `, ${place.loadPin.join(" ")}` : ""}`,
    async run(url, key, body, connections, durationMs) {
      const script = join(tmp, `wrk-${Bun.hash(key + body).toString(16)}.lua`);
      await Bun.write(script, wrkScript(key, body));
      const seconds = Math.max(1, Math.round(durationMs / 1000));
      const cmd = [...place.loadPin, "wrk", "-t", String(Math.min(threads, connections)), "-c", String(connections), "-d", `${seconds}s`, "--timeout", "10s", "-s", script, `${url}/v1/chat/completions`];
      const proc = Bun.spawn({ cmd, cwd: ROOT, stdout: "pipe", stderr: "pipe" });
      const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
      await proc.exited;
      const line = out.split("\n").find((l) => l.startsWith("WRK_JSON "));
      if (proc.exitCode !== 0 || !line) throw new Error(`wrk failed (${proc.exitCode}): ${out}\n${err}`);
      const w = JSON.parse(line.slice("WRK_JSON ".length));
      return {
        ok: w.requests - w.status,
        non2xx: w.status,
        errors: w.connect + w.read + w.write + w.timeout,
        durationS: w.duration_us / 1e6,
        p50Ms: w.p50_us / 1000,
        p99Ms: w.p99_us / 1000,
      };
    },
  };
}

function autocannonGenerator(place: Placement): Generator {
  // Worker threads only where there are cores to spare for them; on a small machine they would take the gateway's.
  const workers = place.cores >= 4 ? place.loadCores : 0;
  return {
    name: "autocannon",
    describe: `autocannon in the bench process${workers > 0 ? `, ${workers} worker threads` : ""} (wrk is not on PATH)`,
    async run(url, key, body, connections, durationMs) {
      const result = await autocannon({
        url: `${url}/v1/chat/completions`,
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body,
        connections,
        duration: durationMs / 1000,
        ...(workers > 0 ? { workers } : {}),
      } as Parameters<typeof autocannon>[0]);
      return {
        ok: result["2xx"],
        non2xx: result.non2xx,
        errors: result.errors + result.timeouts,
        durationS: result.duration,
        p50Ms: result.latency.p50,
        p99Ms: result.latency.p99,
      };
    },
  };
}

// ------------------------------------------------------------------------------------------------
// The case
// ------------------------------------------------------------------------------------------------

interface KindFigures {
  perSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  /** CPU of every gateway process (primary and workers), % of one core. */
  cpuPercent: number;
}

export interface WorkersRow {
  workers: number;
  connections: number;
  holds: string;
  nonstream: KindFigures;
  stream: KindFigures;
  /** PSS of every gateway process together, MB: idle after start, and after the load (lib.ts treePssMb). */
  memoryMb: { idle: number; loaded: number };
  ledger: ReturnType<typeof checkLedger>;
}

/** One measured run with the gateway tree's CPU around it. */
async function measure(generator: Generator, gateway: Child, key: string, body: string, connections: number, durationMs: number): Promise<{ run: LoadRun; figures: KindFigures }> {
  const before = treeCpuSeconds(gateway.proc.pid);
  const run = await generator.run(gateway.url, key, body, connections, durationMs);
  const after = treeCpuSeconds(gateway.proc.pid);
  const figures = {
    perSec: run.ok / run.durationS,
    p50Ms: run.p50Ms,
    p99Ms: run.p99Ms,
    non2xx: run.non2xx,
    errors: run.errors,
    cpuPercent: (treeCpuDelta(before, after) / run.durationS) * 100,
  };
  return { run, figures };
}

async function measureN(n: number, options: WorkersOptions, generator: Generator, place: Placement, upstreamUrl: string, tmp: string): Promise<WorkersRow> {
  const connections = Math.max(64, 64 * n);
  let databaseUrl = `sqlite:${join(tmp, `workers-${n}.db`)}`;
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>> | undefined;
  if (options.postgres) {
    scratch = await createScratchDatabase(postgresServerUrl(), "gw_bench_workers");
    databaseUrl = scratch.url;
  }
  try {
    const gateway = await startWorkersGateway(n, databaseUrl, upstreamUrl, place.serverPin);
    let ok2xx = 0;
    let runs = 0;
    let row: Omit<WorkersRow, "ledger">;
    try {
      const idleMb = treePssMb(gateway.proc.pid);
      const key = await provisionKey(gateway.url);
      const nonstreamBody = chatBody({ stream: false });
      const streamBody = chatBody({ stream: true, ...(options.streamChunks ? { words: options.streamChunks } : {}) });
      const count = (run: LoadRun) => {
        ok2xx += run.ok;
        runs++;
        return run;
      };
      log(`workers=${n}: ${gateway.url} (pid ${gateway.proc.pid}), c=${connections}, warm-up ${options.warmupMs} ms per kind`);
      count(await generator.run(gateway.url, key, nonstreamBody, connections, options.warmupMs));
      count(await generator.run(gateway.url, key, streamBody, connections, options.warmupMs));
      const nonstream = await measure(generator, gateway, key, nonstreamBody, connections, options.measureMs);
      count(nonstream.run);
      log(`workers=${n}: non-streaming ${fInt(nonstream.figures.perSec)} req/s, gateway CPU ${fInt(nonstream.figures.cpuPercent)}%`);
      const stream = await measure(generator, gateway, key, streamBody, connections, options.measureMs);
      count(stream.run);
      log(`workers=${n}: streaming ${fInt(stream.figures.perSec)} streams/s, gateway CPU ${fInt(stream.figures.cpuPercent)}%`);
      for (const [kind, x] of [["non-streaming", nonstream.figures], ["streaming", stream.figures]] as const) {
        if (x.non2xx + x.errors > 0) log(`WARNING: workers=${n} ${kind}: ${x.non2xx} non-2xx, ${x.errors} errors`);
      }
      if (gateway.proc.exitCode !== null || gateway.proc.signalCode !== null) log(`WARNING: workers=${n}: the gateway exited during the run:\n${gateway.output()}`);
      // Workers keep their holds in the primary unless SQLITE_HOLDS=shared says rows; one process keeps its default.
      const sqliteHolds = n > 1 ? workerHoldsMode(process.env) : process.env.SQLITE_HOLDS || "process";
      // "+thread": the group commits on the metering thread (SQLITE_METERING_THREAD=true; not with shared holds).
      const meteringThread = process.env.SQLITE_METERING_THREAD === "true" && sqliteHolds !== "shared";
      const holds = options.postgres ? "postgres" : meteringThread ? `${sqliteHolds}+thread` : sqliteHolds;
      row = { workers: n, connections, holds, nonstream: nonstream.figures, stream: stream.figures, memoryMb: { idle: idleMb, loaded: treePssMb(gateway.proc.pid) } };
    } finally {
      // A graceful stop: each worker drains its requests and flushes its metering before it exits.
      await stopChild(gateway, 30_000);
    }
    const output = gateway.output();
    if (/worker exited|unhandled rejection/.test(output)) log(`WARNING: workers=${n}: gateway output:\n${output}`);
    const ledger = checkLedger(await readLedgerState(databaseUrl), ok2xx, runs * connections);
    log(
      `workers=${n}: ledger ${ledger.ok ? "ok" : "NOT OK"}: ${ledger.successRows} success rows, ${ledger.ok2xx} 2xx counted` +
        ` (+${ledger.abandonedInFlight} completed after the generator stopped waiting), ${ledger.cancelledRows} cancelled (abandoned in flight; at most ${runs * connections})` +
        (ledger.problems.length > 0 ? `; ${ledger.problems.join("; ")}` : ""),
    );
    return { ...row, ledger };
  } finally {
    await scratch?.drop();
  }
}

export async function runWorkersCase(options: WorkersOptions): Promise<{ rows: WorkersRow[]; json: Record<string, unknown> }> {
  const place = placement();
  const tmp = mkdtempSync(join(tmpdir(), "gateway-workers-"));
  const useWrk = options.generator !== "autocannon" && Bun.which("wrk") !== null;
  const generator = useWrk ? wrkGenerator(place, tmp) : autocannonGenerator(place);
  const store = options.postgres ? `Postgres (scratch database on ${new URL(postgresServerUrl()).host})` : "SQLite (a file per N)";
  log(`workers case: N = ${options.workers.join(", ")}; ${store}; ${place.describe}`);
  log(`load generator: ${generator.describe}; fake upstream: ${place.fakeProcesses} process(es) on one port`);
  const fakes = await startFakeUpstreams(place.fakeProcesses, place.serverPin);
  const rows: WorkersRow[] = [];
  try {
    for (const n of options.workers) rows.push(await measureN(n, options, generator, place, fakes[0]!.url, tmp));
  } finally {
    for (const fake of fakes) await stopChild(fake);
    rmSync(tmp, { recursive: true, force: true });
  }
  printWorkers(rows, options, store, generator);
  const json = {
    date: new Date().toISOString(),
    bun: Bun.version,
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? null,
    platform: `${process.platform}-${process.arch}`,
    settings: {
      store: options.postgres ? "postgres" : "sqlite",
      workers: options.workers,
      measure_ms: options.measureMs,
      warmup_ms: options.warmupMs,
      stream_chunks: options.streamChunks ?? null,
      connections: "max(64, 64 × N)",
      generator: generator.describe,
      placement: place.describe,
      fake_upstream_processes: place.fakeProcesses,
      goal: `N workers ≥ ${GOAL_EFFICIENCY} × N × (1 worker)`,
    },
    rows: rows.map((row) => ({ ...row, ledger: { ...row.ledger } })),
  };
  return { rows, json };
}

function printWorkers(rows: WorkersRow[], options: WorkersOptions, store: string, generator: Generator): void {
  const one = rows.find((row) => row.workers === 1);
  const times = (value: number, base: number | undefined) => (base ? value / base : Number.NaN);
  table(
    `Worker scaling: ${store}; non-streaming and streaming chat (gpt-6-luna${options.streamChunks ? `, ${options.streamChunks} chunks` : ""}), ` +
      `c = max(64, 64×N), ${options.measureMs / 1000} s each; ${generator.name}; ${cpus().length} CPUs`,
    ["workers", "holds", "c", "nonstream req/s", "×", "eff.", "stream streams/s", "×", "eff.", "CPU% nonstream|stream", "PSS MB idle|loaded", "non2xx/err", "ledger", "goal ≥0.7×N"],
    rows.map((row) => {
      const xn = times(row.nonstream.perSec, one?.nonstream.perSec);
      const xs = times(row.stream.perSec, one?.stream.perSec);
      const meets = row.workers === 1 ? "-" : xn >= GOAL_EFFICIENCY * row.workers && xs >= GOAL_EFFICIENCY * row.workers ? "✓" : "✗";
      return [
        String(row.workers),
        row.holds,
        String(row.connections),
        fInt(row.nonstream.perSec),
        f(xn),
        f(xn / row.workers),
        fInt(row.stream.perSec),
        f(xs),
        f(xs / row.workers),
        `${fInt(row.nonstream.cpuPercent)}|${fInt(row.stream.cpuPercent)}`,
        `${fInt(row.memoryMb.idle)}|${fInt(row.memoryMb.loaded)}`,
        `${row.nonstream.non2xx + row.stream.non2xx}/${row.nonstream.errors + row.stream.errors}`,
        row.ledger.ok ? (row.ledger.rowsMatch ? "exact" : `ok (+${row.ledger.abandonedInFlight}/${row.ledger.cancelledRows})`) : "✗ " + row.ledger.problems.join("; "),
        meets,
      ];
    }),
    2,
  );
  if (!one) console.log("(no 1-worker row: × and efficiency need N = 1 in the list)");
}

/** `bun bench/run.ts --workers 1,2,4,8 …`: the case alone, its JSON in bench/results-workers.json. */
export async function runWorkersCommand(options: WorkersOptions): Promise<void> {
  const { json } = await runWorkersCase(options);
  const out = join(ROOT, "bench", "results-workers.json");
  writeFileSync(out, JSON.stringify(json, (_, value) => (typeof value === "bigint" ? value.toString() : value), 2) + "\n");
  console.log(`\nwrote ${out} (bun ${Bun.version}, ${cpus().length} CPUs)`);
}
