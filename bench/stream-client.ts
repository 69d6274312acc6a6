/**
 * Streaming client for the benchmark: POSTs a streaming chat completion with `fetch`, reads the body to the end
 * and times the first and the last byte.
 *
 * Library: `oneStream`, `streamLoop` (c workers for a duration), `openStreams` (n at once).
 *
 * Standalone (the runner spawns it for the 1,000-open-streams case: Bun's fetch holds at most 256 requests in
 * flight per process unless BUN_CONFIG_MAX_HTTP_REQUESTS is set before start-up, so that client is a child):
 *   BUN_CONFIG_MAX_HTTP_REQUESTS=4096 bun bench/stream-client.ts --url http://127.0.0.1:N --key K --n 1000 --chunk-delay-ms 500
 *   → prints one JSON line (OpenStreamsResult)
 */

export interface StreamSample {
  ok: boolean;
  status: number;
  /** ms since the request started (performance.now() origin of this process). */
  start: number;
  /** Time to first body byte, ms from start (NaN when none). */
  ttfb: number;
  /** Time to last byte (end of body), ms from start. */
  ttlb: number;
  bytes: number;
  /** The body ended with the stream's terminator (`data: [DONE]`, or `message_stop` for Messages). */
  sawDone: boolean;
  error?: string;
}

/** What a complete OpenAI chat stream ends with. Anthropic Messages streams end with MESSAGES_END. */
export const CHAT_END = "data: [DONE]";
export const MESSAGES_END = '"type":"message_stop"}';
const TAIL_BYTES = 64;

const markers = new Map<string, Uint8Array>();

/** The stream ends with `marker` (followed by at most a few bytes of SSE framing). */
function endsWithMarker(tail: Uint8Array, marker: string): boolean {
  let bytes = markers.get(marker);
  if (!bytes) markers.set(marker, (bytes = new TextEncoder().encode(marker)));
  outer: for (let i = Math.max(0, tail.length - bytes.length - 8); i <= tail.length - bytes.length; i++) {
    for (let j = 0; j < bytes.length; j++) if (tail[i + j] !== bytes[j]) continue outer;
    return true;
  }
  return false;
}

export function chatBody(options: { stream: boolean; content?: string; words?: number; chunkDelayMs?: number }): string {
  // The fake upstream's directive: an answer of `words` words (one stream chunk each), chunks `chunkDelayMs` apart.
  const directive = {
    ...(options.words ? { text: Array.from({ length: options.words }, () => "word").join(" ") } : {}),
    ...(options.chunkDelayMs ? { chunk_delay_ms: options.chunkDelayMs } : {}),
  };
  const content = (options.content ?? "Say hello in five words.") + (Object.keys(directive).length > 0 ? ` [[fake ${JSON.stringify(directive)}]]` : "");
  return JSON.stringify({
    model: "gpt-6-luna",
    ...(options.stream ? { stream: true } : {}),
    max_tokens: 32,
    messages: [{ role: "user", content }],
  });
}

export interface StreamOptions {
  /** Request headers; default `authorization: Bearer <key>` and a JSON content type. */
  headers?: Record<string, string>;
  /** What a complete stream ends with (default CHAT_END). */
  endMarker?: string;
  timeoutMs?: number;
}

export async function oneStream(url: string, key: string, body: string, options: StreamOptions = {}): Promise<StreamSample> {
  const start = performance.now();
  const sample: StreamSample = { ok: false, status: 0, start, ttfb: Number.NaN, ttlb: Number.NaN, bytes: 0, sawDone: false };
  const endMarker = options.endMarker ?? CHAT_END;
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: options.headers ?? { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
    });
    sample.status = response.status;
    const reader = response.body!.getReader();
    let tail: Uint8Array = new Uint8Array(0);
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      if (value.length === 0) continue;
      if (sample.bytes === 0) sample.ttfb = performance.now() - start;
      sample.bytes += value.length;
      tail = value.length >= TAIL_BYTES ? value.subarray(value.length - TAIL_BYTES) : concat(tail, value).subarray(-TAIL_BYTES);
    }
    sample.ttlb = performance.now() - start;
    sample.sawDone = endsWithMarker(tail, endMarker);
    sample.ok = response.status === 200 && sample.sawDone;
    if (!sample.ok && !sample.error) {
      const text = new TextDecoder().decode(tail);
      sample.error = `status ${response.status}${sample.sawDone ? "" : `, no ${endMarker} at the end (…${JSON.stringify(text.slice(-40))})`}`;
    }
  } catch (error) {
    sample.ttlb = performance.now() - start;
    sample.error = String((error as Error)?.message ?? error);
  }
  return sample;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** `concurrency` workers, each starting streams back to back until `durationMs` has passed. */
export async function streamLoop(options: { url: string; key: string; body: string; concurrency: number; durationMs: number } & StreamOptions) {
  const samples: StreamSample[] = [];
  const started = performance.now();
  const deadline = started + options.durationMs;
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (performance.now() < deadline) samples.push(await oneStream(options.url, options.key, options.body, options));
    }),
  );
  return { samples, elapsedMs: performance.now() - started };
}

export interface OpenStreamsResult {
  n: number;
  ok: number;
  errors: number;
  firstError: string | null;
  elapsedMs: number;
  /** Largest number of streams that had received their first byte and not yet ended, at one time. */
  maxOpen: number;
  ttfb: { p50: number; p99: number; max: number };
  ttlb: { p50: number; p99: number; max: number };
}

/** `n` streams started at once; resolves when all ended. */
export async function openStreams(options: { url: string; key: string; body: string; n: number }): Promise<OpenStreamsResult> {
  const started = performance.now();
  const samples = await Promise.all(Array.from({ length: options.n }, () => oneStream(options.url, options.key, options.body)));
  const elapsedMs = performance.now() - started;
  const ok = samples.filter((s) => s.ok);
  const events: [number, number][] = [];
  for (const s of ok) {
    events.push([s.start + s.ttfb, 1], [s.start + s.ttlb, -1]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let maxOpen = 0;
  for (const [, delta] of events) {
    open += delta;
    if (open > maxOpen) maxOpen = open;
  }
  const ttfb = ok.map((s) => s.ttfb).sort((a, b) => a - b);
  const ttlb = ok.map((s) => s.ttlb).sort((a, b) => a - b);
  return {
    n: options.n,
    ok: ok.length,
    errors: samples.length - ok.length,
    firstError: samples.find((s) => !s.ok)?.error ?? null,
    elapsedMs,
    maxOpen,
    ttfb: { p50: percentile(ttfb, 50), p99: percentile(ttfb, 99), max: ttfb.at(-1) ?? Number.NaN },
    ttlb: { p50: percentile(ttlb, 50), p99: percentile(ttlb, 99), max: ttlb.at(-1) ?? Number.NaN },
  };
}

/** Nearest-rank percentile of an ascending array (NaN when empty). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const base = arg("--url");
  const key = arg("--key") ?? "bench";
  if (!base) {
    console.error("usage: bun bench/stream-client.ts --url http://127.0.0.1:N --key K --n 1000 --chunk-delay-ms 500");
    process.exit(2);
  }
  const n = Number(arg("--n") ?? 1000);
  const chunkDelayMs = Number(arg("--chunk-delay-ms") ?? 500);
  const result = await openStreams({
    url: `${base.replace(/\/+$/, "")}/v1/chat/completions`,
    key,
    body: chatBody({ stream: true, chunkDelayMs }),
    n,
  });
  console.log(JSON.stringify(result));
}
