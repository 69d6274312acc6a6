/**
 * Issue 32, goal 5: realistic upstreams. A fake OpenAI-format upstream that answers a streamed chat completion
 * after `--first-byte-ms` (200), then sends `--tokens` (300) content chunks of one token each, `--interval-ms` (50)
 * apart (≈15 s a stream), then a finish chunk, a usage chunk and `data: [DONE]`; reached over plain http or, with
 * `--https`, through the TLS front with its own CA (bench/tls-front.ts, trusted through NODE_EXTRA_CA_CERTS).
 * `--streams` (2,000) clients open their stream at once and read it to the end, first through the bare proxy
 * (bench/bare-proxy.ts, the reference), then through the gateway (SQLite default, a funded key), one after the
 * other on the same upstream. For each serving process: RSS idle, peak and steady (the median while every stream
 * is open), RSS per open stream, CPU seconds (JS thread and all threads, /proc) per stream and per content chunk,
 * streams completed / failed, TTFB and TTLB at the client. Prints markdown tables.
 *
 *   bun bench/realistic.ts [--streams 2000] [--https] [--first-byte-ms 200] [--tokens 300] [--interval-ms 50]
 *   bun bench/realistic.ts --check          # self-check: 20 streams of 20 tokens (a few seconds), exits 1 on a failure
 *
 * Every process (upstream, TLS front, proxies, the client) is a child of this one. The client and both proxies
 * start with BUN_CONFIG_MAX_HTTP_REQUESTS=4096 (Bun's fetch keeps 256 requests in flight per process otherwise) and
 * the gateway with UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN=4096 (its default, 1024 upstream calls per origin, would
 * queue the rest): what a gateway meant to hold 2,000 streams is configured with. Each open stream costs the
 * gateway two sockets (client and upstream): the open-files limit (`ulimit -n`, inherited by the children) is
 * checked and printed.
 *
 * Internal modes (children): `--serve-upstream --port N ...` (the fake upstream), `--client --url U --key K --n N`.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chatBody, openStreams, percentile, type OpenStreamsResult } from "./stream-client.ts";
import {
  BUN,
  LIFTED_FETCH_CAP,
  spawnStreamClient,
  ROOT,
  UPSTREAM_KEY,
  type Child,
  cannon,
  children,
  cpuSeconds,
  f,
  freePort,
  installCleanup,
  log,
  provisionKey,
  rssMb,
  spawnChild,
  startBareProxy,
  startGatewayProcess,
  startHttpsUpstream,
  stopAll,
  waitReady,
} from "./lib.ts";

interface Options {
  streams: number;
  https: boolean;
  firstByteMs: number;
  tokens: number;
  intervalMs: number;
  check: boolean;
}

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

function parseArgs(args: string[]): Options {
  const check = args.includes("--check");
  const number = (name: string, fallback: number) => {
    const raw = argValue(args, name);
    const value = raw === undefined ? fallback : Number(raw);
    if (!Number.isFinite(value) || value < 0) {
      console.error(
        "usage: bun bench/realistic.ts [--streams 2000] [--https] [--first-byte-ms 200] [--tokens 300] [--interval-ms 50] [--check]",
      );
      process.exit(2);
    }
    return value;
  };
  return {
    streams: number("--streams", check ? 20 : 2000),
    https: args.includes("--https"),
    firstByteMs: number("--first-byte-ms", 200),
    tokens: Math.max(1, number("--tokens", check ? 20 : 300)),
    intervalMs: number("--interval-ms", 50),
    check,
  };
}

// ------------------------------------------------------------------------------------------------
// The fake upstream (child): paced like a model
// ------------------------------------------------------------------------------------------------

function serveUpstream(args: string[]): void {
  const port = Number(argValue(args, "--port"));
  const firstByteMs = Number(argValue(args, "--first-byte-ms") ?? 200);
  const tokens = Number(argValue(args, "--tokens") ?? 300);
  const intervalMs = Number(argValue(args, "--interval-ms") ?? 50);
  const encoder = new TextEncoder();
  const sse = (payload: unknown) => `data: ${JSON.stringify(payload)}\n\n`;
  const sseHeaders = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };

  function streamed(model: string, created: number): ReadableStream<Uint8Array> {
    const base = { id: `chatcmpl-${crypto.randomUUID()}`, object: "chat.completion.chunk", created, model, system_fingerprint: null };
    const chunk = (delta: Record<string, unknown>, finish: string | null) => sse({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    // One token a chunk: " tok" is one token in the OpenAI tokenizers; the first carries the role as OpenAI's does.
    const first = encoder.encode(chunk({ role: "assistant", content: "tok", refusal: null }, null));
    const next = encoder.encode(chunk({ content: " tok" }, null));
    const usage = { prompt_tokens: 14, completion_tokens: tokens, total_tokens: 14 + tokens };
    const last = encoder.encode(chunk({}, "stop") + sse({ ...base, choices: [], usage }) + "data: [DONE]\n\n");
    let timer: ReturnType<typeof setInterval> | undefined;
    return new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(first);
        let sent = 1;
        timer = setInterval(() => {
          try {
            if (sent < tokens) {
              controller.enqueue(next);
              sent++;
            } else {
              clearInterval(timer);
              controller.enqueue(last);
              controller.close();
            }
          } catch {
            clearInterval(timer); // the reader went away
          }
        }, intervalMs);
      },
      cancel() {
        clearInterval(timer);
      },
    });
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port,
    development: false,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method === "GET" && path.startsWith("/v1/models")) return Response.json({ object: "list", data: [] });
      if (req.method !== "POST" || path !== "/v1/chat/completions") return Response.json({ error: { message: "not found" } }, { status: 404 });
      const body = (await req.json()) as { model?: string; stream?: boolean };
      const model = body.model ?? "gpt-6-luna";
      const created = Math.floor(Date.now() / 1000);
      if (body.stream !== true) {
        // Non-streamed (the warm-up only): at once.
        const text = Array.from({ length: tokens }, (_, i) => (i === 0 ? "tok" : " tok")).join("");
        return Response.json({
          id: `chatcmpl-${crypto.randomUUID()}`,
          object: "chat.completion",
          created,
          model,
          choices: [{ index: 0, message: { role: "assistant", content: text, refusal: null }, logprobs: null, finish_reason: "stop" }],
          usage: { prompt_tokens: 14, completion_tokens: tokens, total_tokens: 14 + tokens },
        });
      }
      if (firstByteMs > 0) await Bun.sleep(firstByteMs);
      return new Response(streamed(model, created), { status: 200, headers: sseHeaders });
    },
  });
  console.log(`realistic upstream listening on http://127.0.0.1:${server.port}`);
}

// ------------------------------------------------------------------------------------------------
// The client (child, its fetch cap lifted): n streams at once, CPU of its own
// ------------------------------------------------------------------------------------------------

interface ClientResult extends OpenStreamsResult {
  /** The client's own CPU (user + system) over the run, seconds. */
  clientCpuS: number;
  /** performance.timeOrigin + the first request's start, ms since the epoch. */
  startedAtMs: number;
}

async function runClient(args: string[]): Promise<void> {
  const url = argValue(args, "--url")!;
  const key = argValue(args, "--key")!;
  const n = Number(argValue(args, "--n"));
  const before = process.cpuUsage();
  const startedAtMs = Date.now();
  const result = await openStreams({ url: `${url}/v1/chat/completions`, key, body: chatBody({ stream: true }), n });
  const used = process.cpuUsage(before);
  const out: ClientResult = { ...result, clientCpuS: (used.user + used.system) / 1e6, startedAtMs };
  console.log(JSON.stringify(out));
}

// ------------------------------------------------------------------------------------------------
// The measurement
// ------------------------------------------------------------------------------------------------

interface Measured {
  target: string;
  client: ClientResult;
  idleRssMb: number;
  peakRssMb: number;
  steadyRssMb: number;
  /** RSS samples inside the steady window. */
  steadySamples: number;
  cpuMainS: number;
  cpuAllS: number;
  /** The upstream's and the TLS front's CPU over the same run (all threads), seconds. */
  upstreamCpuS: number;
  frontCpuS: number | null;
  maxOpenFiles: string;
}

function limitOpenFiles(pid: number): string {
  try {
    const line = readFileSync(`/proc/${pid}/limits`, "utf8").split("\n").find((l) => l.startsWith("Max open files"));
    const [soft, hard] = line!.replace("Max open files", "").trim().split(/\s+/);
    return `${soft}/${hard}`;
  } catch {
    return "?";
  }
}

async function measure(label: string, server: Child, key: string, options: Options, upstream: Child, front: Child | null): Promise<Measured> {
  await Bun.sleep(1000);
  const pid = server.proc.pid;
  const idleRssMb = rssMb(pid);
  const cpuBefore = cpuSeconds(pid);
  const upstreamBefore = cpuSeconds(upstream.proc.pid);
  const frontBefore = front ? cpuSeconds(front.proc.pid) : null;
  const { proc: client, child: clientChild, stdout, stderr } = spawnStreamClient([BUN, "bench/realistic.ts", "--client", "--url", server.url, "--key", key, "--n", String(options.streams)]);
  const spawnedAt = Date.now();
  const samples: { at: number; rss: number }[] = [];
  let running = true;
  void client.exited.then(() => (running = false));
  while (running) {
    samples.push({ at: Date.now(), rss: rssMb(pid) });
    await Bun.sleep(100);
  }
  children.delete(clientChild);
  const cpuAfter = cpuSeconds(pid);
  const upstreamAfter = cpuSeconds(upstream.proc.pid);
  const frontAfter = front ? cpuSeconds(front.proc.pid) : null;
  const out = await stdout;
  if (client.exitCode !== 0) throw new Error(`stream client failed (${client.exitCode}): ${await stderr}`);
  const result = JSON.parse(out.trim().split("\n").at(-1)!) as ClientResult;
  // Steady: every stream has had its first byte (the slowest TTFB + 1 s) and none has ended yet (the first
  // could end at first byte + tokens × interval), with a margin of 1 s (less on a short run) at each end.
  const startedAt = result.startedAtMs ?? spawnedAt;
  const margin = Math.min(1000, (options.tokens * options.intervalMs) / 5);
  const from = startedAt + result.ttfb.max + margin;
  const to = startedAt + options.firstByteMs + options.tokens * options.intervalMs - margin;
  const steady = samples.filter((s) => s.at >= from && s.at <= to).map((s) => s.rss).sort((a, b) => a - b);
  return {
    target: label,
    client: result,
    idleRssMb,
    peakRssMb: Math.max(idleRssMb, ...samples.map((s) => s.rss)),
    steadyRssMb: steady.length > 0 ? percentile(steady, 50) : Number.NaN,
    steadySamples: steady.length,
    cpuMainS: cpuBefore && cpuAfter ? cpuAfter.main - cpuBefore.main : Number.NaN,
    cpuAllS: cpuBefore && cpuAfter ? cpuAfter.all - cpuBefore.all : Number.NaN,
    upstreamCpuS: upstreamBefore && upstreamAfter ? upstreamAfter.all - upstreamBefore.all : Number.NaN,
    frontCpuS: frontBefore && frontAfter ? frontAfter.all - frontBefore.all : null,
    maxOpenFiles: limitOpenFiles(pid),
  };
}

function shellLimit(): string {
  const soft = Bun.spawnSync(["sh", "-c", "ulimit -Sn; ulimit -Hn"]).stdout.toString().trim().split("\n");
  return `${soft[0]}/${soft[1]}`;
}

function markdown(title: string, header: string[], rows: string[][]): void {
  console.log(`\n${title}\n`);
  console.log(`| ${header.join(" | ")} |`);
  console.log(`| ${header.map((_, i) => (i === 0 ? "---" : "---:")).join(" | ")} |`);
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  installCleanup();
  const limit = shellLimit();
  const softLimit = Number(limit.split("/")[0]);
  // The gateway holds two sockets a stream (client, upstream); the TLS front two as well; plus files and slack.
  const needed = 2 * options.streams + 256;
  if (Number.isFinite(softLimit) && softLimit < needed) {
    console.error(`open-files limit ${limit} (soft/hard) is below the ${needed} this run needs: raise it (ulimit -n ${needed}) and run again`);
    process.exit(2);
  }
  const tmp = mkdtempSync(join(tmpdir(), "gateway-realistic-"));
  const scheme = options.https ? "https" : "http";
  try {
    const port = freePort();
    const upstreamCmd = [BUN, "bench/realistic.ts", "--serve-upstream", "--port", String(port), "--first-byte-ms", String(options.firstByteMs), "--tokens", String(options.tokens), "--interval-ms", String(options.intervalMs)];
    const fake = spawnChild("realistic upstream", upstreamCmd, process.env, `http://127.0.0.1:${port}`);
    await waitReady(fake, "/v1/models", false);
    const https = options.https ? await startHttpsUpstream(fake, join(tmp, "tls")) : null;
    const upstream = https ? { url: https.url, env: https.env } : { url: fake.url, env: {} };
    const lifted = { BUN_CONFIG_MAX_HTTP_REQUESTS: LIFTED_FETCH_CAP };
    const bare = await startBareProxy(upstream.url, { ...upstream.env, ...lifted });
    const gateway = await startGatewayProcess("gateway", join(tmp, "gateway.db"), upstream.url, {
      ...upstream.env,
      ...lifted,
      UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN: LIFTED_FETCH_CAP,
    });
    const gatewayKey = await provisionKey(gateway.url);
    // Warm-up: 1 s of non-streamed load each (the upstream answers those at once), so neither is a cold process.
    const warm = chatBody({ stream: false });
    await cannon({ name: "bare", url: bare.url, key: UPSTREAM_KEY }, warm, 16, 1000);
    await cannon({ name: "gateway", url: gateway.url, key: gatewayKey }, warm, 16, 1000);
    const seconds = (options.firstByteMs + options.tokens * options.intervalMs) / 1000;
    const results: Measured[] = [];
    for (const [label, server, key] of [
      ["bare proxy", bare, UPSTREAM_KEY],
      ["gateway", gateway, gatewayKey],
    ] as const) {
      log(`${options.streams} streams (${options.tokens} tokens, ${options.intervalMs} ms apart, first after ${options.firstByteMs} ms, ≈${seconds.toFixed(1)} s) → ${label} over ${scheme}`);
      const m = await measure(label, server, key, options, fake, https?.front ?? null);
      results.push(m);
      log(`${label}: ${m.client.ok} ok, ${m.client.errors} failed${m.client.firstError ? ` (first: ${m.client.firstError})` : ""}`);
    }

    const cores = navigator.hardwareConcurrency;
    const n = options.streams;
    console.log(
      `\n${n} concurrent streams, upstream over ${scheme}${options.https ? " (TLS front, own CA)" : ""}: first byte after ${options.firstByteMs} ms, ` +
        `${options.tokens} one-token chunks ${options.intervalMs} ms apart, then finish + usage + [DONE]. ${cores} cores, Bun ${Bun.version}, open files ${limit} (soft/hard).`,
    );
    markdown(
      "Memory of the serving process (VmRSS)",
      ["target", "ok / failed", "max open", "idle MB", "peak MB", "steady MB", "RSS per open stream KB"],
      results.map((m) => [
        m.target,
        `${m.client.ok} / ${m.client.errors}`,
        String(m.client.maxOpen),
        f(m.idleRssMb, 1),
        f(m.peakRssMb, 1),
        f(m.steadyRssMb, 1),
        f(((m.steadyRssMb - m.idleRssMb) * 1024) / n, 1),
      ]),
    );
    markdown(
      "CPU of the serving process over the run (JS thread | all threads)",
      ["target", "CPU s", "ms per stream", "µs per chunk", "TTFB p50 / p99 ms", "TTLB p50 / p99 s"],
      results.map((m) => {
        const ok = Math.max(1, m.client.ok);
        return [
          m.target,
          `${f(m.cpuMainS, 2)} \\| ${f(m.cpuAllS, 2)}`,
          `${f((m.cpuMainS * 1000) / ok, 2)} \\| ${f((m.cpuAllS * 1000) / ok, 2)}`,
          `${f((m.cpuMainS * 1e6) / (ok * options.tokens), 1)} \\| ${f((m.cpuAllS * 1e6) / (ok * options.tokens), 1)}`,
          `${f(m.client.ttfb.p50, 0)} / ${f(m.client.ttfb.p99, 0)}`,
          `${f(m.client.ttlb.p50 / 1000, 2)} / ${f(m.client.ttlb.p99 / 1000, 2)}`,
        ];
      }),
    );
    for (const m of results) {
      console.log(
        `\n${m.target}: steady = median of ${m.steadySamples} RSS samples (every 100 ms) while all streams were open; open files ${m.maxOpenFiles}; ` +
          `same run: upstream ${f(m.upstreamCpuS, 2)} CPU s${m.frontCpuS === null ? "" : `, TLS front ${f(m.frontCpuS, 2)} CPU s`}, client ${f(m.client.clientCpuS, 2)} CPU s.`,
      );
    }
    const failed = results.reduce((s, m) => s + m.client.errors, 0);
    if (failed > 0) {
      console.error(`\n${failed} streams failed`);
      process.exitCode = 1;
    }
  } finally {
    await stopAll();
    rmSync(tmp, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
if (args.includes("--serve-upstream")) serveUpstream(args);
else if (args.includes("--client")) await runClient(args);
else await main();
