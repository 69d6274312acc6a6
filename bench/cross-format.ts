/**
 * The `cross-format` case: what translating a stream costs. Streaming requests through the gateway where the client's
 * wire format is the upstream's (relayed) and where it is not (translated chunk by chunk), against the fake upstream
 * and the bare proxy called in the client's own format:
 *
 *   chat     → gpt-6-luna         same format: the fast path (chat relay), the reference of the "vs fast path" columns
 *   chat     → claude-sonnet-5-5  translated: OpenAI chat in, Anthropic Messages upstream, chat chunks out
 *   messages → gpt-6-luna         translated: Anthropic Messages in, OpenAI chat upstream, Messages events out
 *   messages → claude-sonnet-5-5  same format: Messages relay
 *
 * Two answer sizes: the fake's default answer (3 text chunks: the per-request cost) and a long one (LONG_WORDS words,
 * one chunk per word, asked for with a `[[fake {"text":…}]]` directive: the per-chunk cost of translating).
 * The gateway's Anthropic provider points at the same fake upstream (ANTHROPIC_BASE_URL, set for every gateway
 * process by lib.ts). Chat streams count when they end with `data: [DONE]`, Messages streams with `message_stop`.
 */
import { CHAT_END, MESSAGES_END } from "./stream-client.ts";
import { UPSTREAM_KEY, completedStreams, f, fInt, inRounds, log, poolStreamRuns, signed, streamRun, streams, table, type Child, type Goal, type StreamFigures, type Target } from "./lib.ts";

export const OPENAI_MODEL = "gpt-6-luna";
export const ANTHROPIC_MODEL = "claude-sonnet-5-5";
const ANTHROPIC_VERSION = "2023-06-01";

type Format = "chat" | "messages";

/** Words (= text chunks) of the long answer. */
export const LONG_WORDS = 120;
const LONG_TEXT = Array.from({ length: LONG_WORDS }, (_, i) => ["The", "gateway", "relays", "every", "token", "of", "this", "answer", "to", "you."][i % 10]).join(" ");
type Answer = "short" | "long";
const ANSWERS: Answer[] = ["short", "long"];
const answerLabel = (answer: Answer) => (answer === "short" ? "3 chunks" : `${LONG_WORDS} chunks`);

interface Row {
  label: string;
  answer: Answer;
  /** upstream, bare or gateway. */
  via: "upstream" | "bare" | "gateway";
  format: Format;
  model: string;
  /** relay (same format) or translated. */
  route: string;
  target: Target;
  body: string;
}

const PATHS: Record<Format, string> = { chat: "/v1/chat/completions", messages: "/v1/messages" };

/** The same small prompt in either format (a Messages request needs max_tokens; chat takes it too). */
export function streamBody(model: string, answer: Answer = "short"): string {
  const content = "Say hello in five words." + (answer === "long" ? ` [[fake ${JSON.stringify({ text: LONG_TEXT })}]]` : "");
  return JSON.stringify({ model, stream: true, max_tokens: answer === "long" ? 512 : 32, messages: [{ role: "user", content }] });
}

export interface CrossFormatOptions {
  upstream: Child;
  bare: Child;
  gateway: Child;
  gatewayKey: string;
  measureMs: number;
  warmupMs: number;
  /** Interleaved rounds: each route is measured `measureMs` in all. */
  rounds: number;
}

export async function runCrossFormatCase(options: CrossFormatOptions): Promise<{ json: unknown; goals: Goal[] }> {
  // Called directly (or through the bare proxy), Anthropic's format needs its own auth headers.
  const direct = (format: Format): Record<string, string> =>
    format === "chat"
      ? { authorization: `Bearer ${UPSTREAM_KEY}`, "content-type": "application/json" }
      : { "x-api-key": UPSTREAM_KEY, "anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json" };
  const gatewayHeaders = (format: Format): Record<string, string> => ({
    authorization: `Bearer ${options.gatewayKey}`,
    "content-type": "application/json",
    ...(format === "messages" ? { "anthropic-version": ANTHROPIC_VERSION } : {}),
  });
  const end = (format: Format) => (format === "chat" ? CHAT_END : MESSAGES_END);
  const reference = (answer: Answer, via: "upstream" | "bare", child: Child, format: Format): Row => {
    const model = format === "chat" ? OPENAI_MODEL : ANTHROPIC_MODEL;
    return {
      label: `${via} (${format}), ${answerLabel(answer)}`,
      answer,
      via,
      format,
      model,
      route: "-",
      target: { name: `${via} ${format}`, url: child.url, key: UPSTREAM_KEY, path: PATHS[format], headers: direct(format), endMarker: end(format) },
      body: streamBody(model, answer),
    };
  };
  const throughGateway = (answer: Answer, format: Format, model: string): Row => {
    const family: Format = model === OPENAI_MODEL ? "chat" : "messages";
    return {
      label: `gateway ${format} → ${model}, ${answerLabel(answer)}`,
      answer,
      via: "gateway",
      format,
      model,
      route: format === family ? (format === "chat" ? "fast path (relay)" : "relay") : `translated (${family} upstream)`,
      target: { name: `gateway ${format} ${model}`, url: options.gateway.url, key: options.gatewayKey, path: PATHS[format], headers: gatewayHeaders(format), endMarker: end(format) },
      body: streamBody(model, answer),
    };
  };
  const rows: Row[] = ANSWERS.flatMap((answer) => [
    reference(answer, "upstream", options.upstream, "chat"),
    reference(answer, "upstream", options.upstream, "messages"),
    reference(answer, "bare", options.bare, "chat"),
    reference(answer, "bare", options.bare, "messages"),
    throughGateway(answer, "chat", OPENAI_MODEL),
    throughGateway(answer, "chat", ANTHROPIC_MODEL),
    throughGateway(answer, "messages", OPENAI_MODEL),
    throughGateway(answer, "messages", ANTHROPIC_MODEL),
  ]);

  // Every row in interleaved rounds (as nonstream and stream), so the machine's drift lands on all alike.
  const rowOf = new Map(rows.map((row) => [row.label, row]));
  const targets = rows.map((row) => ({ ...row.target, name: row.label }));
  const roundMs = Math.round(options.measureMs / options.rounds);
  const byConcurrency: Record<number, Map<Row, StreamFigures>> = {};
  for (const c of [1, 64]) {
    log(`cross-format: streaming c=${c}: warm-up, then ${options.rounds} rounds of ${roundMs / 1000} s per route`);
    for (const row of rows) await streams(row.target, row.body, c, options.warmupMs);
    const measured = await inRounds(targets, options.rounds, (target) => streamRun(target, rowOf.get(target.name)!.body, c, roundMs), completedStreams);
    const figures = new Map<Row, StreamFigures>();
    for (const [label, { runs }] of measured) {
      const x = poolStreamRuns(runs);
      figures.set(rowOf.get(label)!, x);
      if (x.errors > 0) log(`WARNING: ${label}: ${x.errors} failed streams, first: ${x.firstError}`);
    }
    byConcurrency[c] = figures;
  }

  const out: string[][] = [];
  const json: unknown[] = [];
  const fastRowOf = (answer: Answer) => rows.find((r) => r.answer === answer && r.via === "gateway" && r.format === "chat" && r.model === OPENAI_MODEL)!;
  for (const [c, figures] of Object.entries(byConcurrency)) {
    const refOf = (answer: Answer, via: "upstream" | "bare", format: Format) => figures.get(rows.find((r) => r.answer === answer && r.via === via && r.format === format)!)!;
    const targets: unknown[] = [];
    for (const row of rows) {
      const x = figures.get(row)!;
      const fastRow = fastRowOf(row.answer);
      const fast = figures.get(fastRow)!;
      const up = refOf(row.answer, "upstream", row.format);
      const bare = refOf(row.answer, "bare", row.format);
      const gw = row.via === "gateway";
      const vsFast = gw && row !== fastRow;
      out.push([
        `c=${c}`,
        answerLabel(row.answer),
        row.via,
        row.format,
        row.model,
        row.route,
        fInt(x.streamsPerSec),
        f(x.ttfbP50, 3),
        f(x.ttfbP99, 3),
        f(x.ttlbP50, 3),
        f(x.ttlbP99, 3),
        f(x.streamsPerSec / up.streamsPerSec),
        f(x.streamsPerSec / bare.streamsPerSec),
        gw ? f(x.streamsPerSec / fast.streamsPerSec) : "-",
        vsFast ? signed(x.ttfbP50 - fast.ttfbP50, 3) : "-",
        vsFast ? signed(x.ttlbP50 - fast.ttlbP50, 3) : "-",
        gw ? signed(x.ttfbP50 - bare.ttfbP50, 3) : "-",
        String(x.errors),
      ]);
      targets.push({
        answer_chunks: row.answer === "short" ? 3 : LONG_WORDS,
        via: row.via,
        client_format: row.format,
        model: row.model,
        route: row.route,
        ...x,
        ratios: {
          streams_over_upstream_same_format: x.streamsPerSec / up.streamsPerSec,
          streams_over_bare_same_format: x.streamsPerSec / bare.streamsPerSec,
          ...(gw
            ? {
                streams_over_fast_path: x.streamsPerSec / fast.streamsPerSec,
                added_ttfb_p50_ms_over_fast_path: x.ttfbP50 - fast.ttfbP50,
                added_ttfb_p99_ms_over_fast_path: x.ttfbP99 - fast.ttfbP99,
                added_ttlb_p50_ms_over_fast_path: x.ttlbP50 - fast.ttlbP50,
                added_ttlb_p99_ms_over_fast_path: x.ttlbP99 - fast.ttlbP99,
                added_ttfb_p50_ms_over_bare_same_format: x.ttfbP50 - bare.ttfbP50,
              }
            : {}),
        },
      });
    }
    json.push({ concurrency: Number(c), targets });
  }
  table(
    `Streaming across formats (client format → model), fetch client, ${options.rounds} interleaved rounds of ${roundMs / 1000} s per route, pooled; ×upstream/×bare against the same client format and answer, "fast" = gateway chat → ${OPENAI_MODEL} with the same answer`,
    ["conc", "answer", "via", "client", "model", "route", "streams/s", "TTFB p50", "TTFB p99", "TTLB p50", "TTLB p99", "×upstream", "×bare", "×fast", "+TTFB p50 vs fast", "+TTLB p50 vs fast", "+TTFB p50 vs bare", "errors"],
    out,
    6,
  );

  const goals: Goal[] = [];
  const c64 = byConcurrency[64]!;
  const c1 = byConcurrency[1]!;
  for (const row of rows.filter((r) => r.via === "gateway" && r.route.startsWith("translated"))) {
    const fastRow = fastRowOf(row.answer);
    const ratio = c64.get(row)!.streamsPerSec / c64.get(fastRow)!.streamsPerSec;
    goals.push({
      goal: `cross-format ${row.format} → ${row.model}, ${answerLabel(row.answer)}: streams/s at c=64 ÷ fast path; +TTFB/+TTLB p50 at c=1 (reported)`,
      value: `${f(ratio)}×; ${signed(c1.get(row)!.ttfbP50 - c1.get(fastRow)!.ttfbP50, 3)} / ${signed(c1.get(row)!.ttlbP50 - c1.get(fastRow)!.ttlbP50, 3)} ms`,
      pass: null,
    });
  }
  return { json: { fast_path: { client_format: "chat", model: OPENAI_MODEL }, answers: { short_chunks: 3, long_chunks: LONG_WORDS }, results: json }, goals };
}
