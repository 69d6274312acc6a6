/**
 * Compares gateway builds or configurations on this machine, interleaved: the same load (chat completions
 * at c=64) goes to each in turn, round after round, so drift and bursts of other load on a shared machine
 * land on all of them alike. Reports req/s (or streams/s) and the CPU each gateway spent per request
 * (its JS thread, and all its threads), the figure that shows a change of a few percent.
 *
 *   bun bench/compare.ts <checkout> [<checkout> ...] [--stream] [--words N] [--key-limits] [--rounds 4] [--seconds 3] [--concurrency 64]
 *
 * A target is a directory holding a checkout of the gateway (`git worktree add /tmp/before HEAD~1`, then
 * link its node_modules), run from that directory (its own plugins-config.yaml and catalog), optionally
 * followed by a config file and comma-separated environment settings, ':'-separated:
 *
 *   bun bench/compare.ts /tmp/before .                                  # the last commit against the tree
 *   bun bench/compare.ts . .:/tmp/no-metering.yaml                     # with a plugin off (GATEWAY_CONFIG)
 *   bun bench/compare.ts . .::SQLITE_HOLDS=shared --stream             # an environment setting, streaming
 *   bun bench/compare.ts . .::REDIS_URL=redis://127.0.0.1:6379 --key-limits   # rate limits counted in Redis
 *
 * `--key-limits`: the key of the plugins case (RPM and TPM 10,000,000, a key budget), so the rate-limit and
 * key-budget paths run on every request.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chatBody } from "./stream-client.ts";
import { PLUGINS_KEY_LIMIT } from "./plugins-case.ts";
import {
  BUN,
  cannon,
  cannonRun,
  poolRuns,
  type CannonRun,
  cpuSeconds,
  f,
  fInt,
  freePort,
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
  keyLimits: boolean;
}

function parseArgs(argv: string[]): Options {
  const options: Options = { targets: [], stream: false, rounds: 4, seconds: 3, concurrency: 64, keyLimits: false, words: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--stream") options.stream = true;
    else if (a === "--key-limits") options.keyLimits = true;
    else if (a === "--rounds") options.rounds = Number(argv[++i]);
    else if (a === "--seconds") options.seconds = Number(argv[++i]);
    else if (a === "--concurrency") options.concurrency = Number(argv[++i]);
    else if (a === "--words") options.words = Number(argv[++i]);
    else if (a === "--help" || a === "-h") options.targets = [];
    else options.targets.push(a);
  }
  const valid = [options.rounds, options.seconds, options.concurrency].every((n) => Number.isFinite(n) && n > 0);
  if (options.targets.length === 0 || !valid) {
    console.error("usage: bun bench/compare.ts <checkout>[:<config>[:<ENV=value>,...]] ... [--stream] [--words N] [--key-limits] [--rounds N] [--seconds S] [--concurrency C]");
    process.exit(2);
  }
  return options;
}

interface Tally {
  label: string;
  served: number;
  seconds: number;
  mainSeconds: number;
  allSeconds: number;
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  installCleanup();
  const tmp = mkdtempSync(join(tmpdir(), "gateway-compare-"));
  try {
    const upstreamPort = freePort();
    const upstream = spawnChild("fake upstream", [BUN, "test/fake-upstream/server.ts", "--port", String(upstreamPort)], process.env, `http://127.0.0.1:${upstreamPort}`);
    await waitReady(upstream, "/v1/models", false);
    const gateways = [];
    for (const [i, spec] of options.targets.entries()) {
      const [dir, config] = spec.split(":");
      const settings = spec.split(":").length > 2 ? spec.slice(dir!.length + (config ?? "").length + 2).split(",") : [];
      const env: Record<string, string> = Object.fromEntries(settings.map((s) => [s.slice(0, s.indexOf("=")), s.slice(s.indexOf("=") + 1)]));
      if (config) env.GATEWAY_CONFIG = resolve(config);
      const port = freePort();
      // Run from its own directory: each checkout reads its own plugins-config.yaml and catalog.
      const child = spawnChild(spec, [BUN, "src/index.ts"], gatewayEnv(port, join(tmp, `gateway-${i}.db`), upstream.url, env), `http://127.0.0.1:${port}`, resolve(dir!));
      await waitReady(child, "/ready", true);
      const keyOptions = options.keyLimits ? { limit: 1_000_000, rate_limit: { requests_per_minute: PLUGINS_KEY_LIMIT, tokens_per_minute: PLUGINS_KEY_LIMIT } } : {};
      gateways.push({ target: { name: spec, url: child.url, key: await provisionKey(child.url, keyOptions) }, pid: child.proc.pid });
    }
    const words = options.words > 0 ? ` [[fake ${JSON.stringify({ text: Array.from({ length: options.words }, () => "word").join(" ") })}]]` : "";
    const body = chatBody({ stream: options.stream, content: "Say hello in five words." + words });
    const runsOf = new Map<string, CannonRun[]>(gateways.map((g) => [g.target.name, []]));
    const tallies = new Map<string, Tally>(gateways.map((g) => [g.target.name, { label: g.target.name, served: 0, seconds: 0, mainSeconds: 0, allSeconds: 0 }]));
    const ms = options.seconds * 1000;
    for (const g of gateways) await (options.stream ? streams(g.target, body, options.concurrency, 1000) : cannon(g.target, body, options.concurrency, 1000)); // warm-up
    for (let round = 0; round < options.rounds; round++) {
      // Reversed every other round: no build always runs right after the same other one.
      for (const g of round % 2 === 0 ? gateways : [...gateways].reverse()) {
        const before = cpuSeconds(g.pid);
        const started = performance.now();
        let served: number;
        if (options.stream) served = (await streams(g.target, body, options.concurrency, ms)).completed;
        else {
          const run = await cannonRun(g.target, body, options.concurrency, ms);
          runsOf.get(g.target.name)!.push(run);
          served = run.ok;
        }
        const elapsed = (performance.now() - started) / 1000;
        const after = cpuSeconds(g.pid);
        const tally = tallies.get(g.target.name)!;
        tally.served += served;
        tally.seconds += elapsed;
        if (before && after) {
          tally.mainSeconds += after.main - before.main;
          tally.allSeconds += after.all - before.all;
        }
        console.error(`round ${round + 1}/${options.rounds}: ${g.target.name} ${fInt(served / elapsed)}/s`);
      }
    }
    const first = [...tallies.values()][0]!;
    const rate = (t: Tally) => t.served / t.seconds;
    const perRequest = (seconds: number, t: Tally) => (t.served === 0 ? Number.NaN : (seconds * 1e6) / t.served);
    table(
      `${options.stream ? "Streaming" : "Non-streaming"} chat completions at c=${options.concurrency}: ${options.rounds} interleaved rounds of ${options.seconds} s`,
      ["target", options.stream ? "streams/s" : "req/s", "× first", "CPU µs/req JS thread", "all threads", "JS thread × first", "p50 ms", "p99 ms"],
      [...tallies.values()].map((t) => {
        const pooled = options.stream ? undefined : poolRuns(runsOf.get(t.label)!);
        return [
          t.label,
          fInt(rate(t)),
          f(rate(t) / rate(first)),
          f(perRequest(t.mainSeconds, t), 1),
          f(perRequest(t.allSeconds, t), 1),
          f(perRequest(t.mainSeconds, t) / perRequest(first.mainSeconds, first)),
          pooled ? f(pooled.p50, 3) : "-",
          pooled ? f(pooled.p99, 3) : "-",
        ];
      }),
      1,
    );
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
