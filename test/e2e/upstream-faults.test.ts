/**
 * The fault suite (issue 24): every way a provider's answer can break, streaming and not, in every client
 * format, on every upstream transport. The gateway runs as its own process, so a crash is seen as a crash.
 *
 * For each (case, stream) the table below says what the gateway guarantees the client:
 *   answer           200, the whole text, a well-formed end in the client's format; recorded `success`
 *   error S          an error before any text: HTTP S in the client's error shape (code upstream_error for
 *                    502, upstream_timeout for 504) or, for a stream whose headers went out, 200 with only a
 *                    well-formed error event; recorded `failed` at cost 0
 *   text, error S    (streams) 200, the first words, then a well-formed error event; recorded `failed`,
 *                    billed from the counted text (cost > 0, usage_estimated: true)
 *   answer | error   either, consistently recorded (gzip: decoded, or refused as 502 when the gateway
 *                    asked for identity; a JSON answer to a stream: relayed as a stream, or 502)
 * and billing for answers:
 *   exact            the upstream's honest usage priced (20 prompt + 10 completion tokens)
 *   estimated        no usable usage: billed from the counted text, cost > 0, usage_estimated: true
 *   bounded          out-of-range usage clamped: 0 < cost <= what the request could honestly cost
 *                    (its prompt, generously 1000 tokens, and max_tokens of output)
 * Always: no 500, the provider key in no answer and no record, the request sent upstream exactly once, the
 * balance = credit - recorded cost and never below zero, and the process up (a normal request then succeeds).
 */
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { FAULTY_TEXT, HONEST_USAGE, faultDirective, startFaultyUpstream, type FaultScenario, type FaultyUpstream, type UpstreamWire } from "../fake-upstream/faulty.ts";
import { startGatewayProcess, type GatewayProcess } from "../helpers/gateway-process.ts";
import { httpErrorBody, sendInFormat, sseEvents, streamErrorEvent, type ClientFormat, type Exchange } from "../helpers/format-clients.ts";
import { usdToNano } from "../../src/core/money.ts";

setDefaultTimeout(25_000);

const IDLE_TIMEOUT_MS = 300;
/** The whole-call cap, well above the idle timeout, so a stall ended by the cap is told apart (STALL_ANSWER_MS). */
const UPSTREAM_TIMEOUT_MS = 6_000;
/** A stalled upstream must be given up within this time (the idle timeout plus a loaded machine's margin). */
const STALL_ANSWER_MS = 3_000;
const MAX_TOKENS = 50;
const CREDIT_USD = 5;
const PROVIDER_KEYS = { deepseek: "sk-faulty-deepseek-9f3c2a7e51b8", anthropic: "sk-ant-faulty-4d8e1b6c0a92", openai: "sk-faulty-openai-7a5e3c1d9b04" };

// ------------------------------------------------------------------------------------------------
// What the gateway guarantees, per case and mode
// ------------------------------------------------------------------------------------------------

type Billing = "exact" | "estimated" | "bounded";
type Expected =
  | { outcome: "answer"; billing: Billing }
  | { outcome: "error"; status: 502 | 504 }
  | { outcome: "text_then_error"; status: 502 | 504 }
  | { outcome: "answer_or_error"; status: 502; billing: Billing }
  | { outcome: "answer_or_text_then_error"; status: 502; billing: Billing };

const answer = (billing: Billing): Expected => ({ outcome: "answer", billing });
const error = (status: 502 | 504): Expected => ({ outcome: "error", status });
const textThenError = (status: 502 | 504): Expected => ({ outcome: "text_then_error", status });
const answerOrError = (billing: Billing): Expected => ({ outcome: "answer_or_error", status: 502, billing });
const answerOrTextThenError = (billing: Billing): Expected => ({ outcome: "answer_or_text_then_error", status: 502, billing });

const CASES: { scenario: FaultScenario; nonStream: Expected; stream: Expected }[] = [
  { scenario: "normal",                nonStream: answer("exact"),           stream: answer("exact") },
  { scenario: "reset_before_headers",  nonStream: error(502),                stream: error(502) },
  { scenario: "reset_mid_headers",     nonStream: error(502),                stream: error(502) },
  { scenario: "reset_mid_body",        nonStream: error(502),                stream: error(502) },
  { scenario: "reset_mid_stream",      nonStream: error(502),                stream: textThenError(502) },
  { scenario: "stall_mid_body",        nonStream: error(504),                stream: error(504) },
  { scenario: "stall_mid_stream",      nonStream: error(504),                stream: textThenError(504) },
  { scenario: "short_body",            nonStream: error(502),                stream: textThenError(502) },
  { scenario: "long_body",             nonStream: error(502),                stream: textThenError(502) },
  { scenario: "gzip",                  nonStream: answerOrError("exact"),    stream: answerOrError("exact") },
  { scenario: "html_200",              nonStream: error(502),                stream: error(502) },
  { scenario: "wrong_mode",            nonStream: answerOrError("exact"),    stream: answerOrError("exact") },
  { scenario: "no_usage",              nonStream: answer("estimated"),       stream: answer("estimated") },
  { scenario: "null_usage",            nonStream: answer("estimated"),       stream: answer("estimated") },
  { scenario: "usage_negative",        nonStream: answerOrError("bounded"),  stream: answerOrTextThenError("bounded") },
  { scenario: "usage_fractional",      nonStream: answerOrError("bounded"),  stream: answerOrTextThenError("bounded") },
  { scenario: "usage_1e15",            nonStream: answerOrError("bounded"),  stream: answerOrTextThenError("bounded") },
  { scenario: "usage_1e308",           nonStream: answerOrError("bounded"),  stream: answerOrTextThenError("bounded") },
  { scenario: "usage_negative_cached", nonStream: answerOrError("bounded"),  stream: answerOrTextThenError("bounded") },
  { scenario: "error_401_echo_key",    nonStream: error(502),                stream: error(502) },
  { scenario: "keepalive_lines",       nonStream: answer("exact"),           stream: answer("exact") },
];

/** Client format x upstream wire: same-format relays and translations both ways. */
const ROUTES: { client: ClientFormat; upstream: UpstreamWire; model: string }[] = [
  { client: "chat", upstream: "chat", model: "deepseek-flash" },
  { client: "messages", upstream: "chat", model: "deepseek-flash" },
  { client: "responses", upstream: "chat", model: "deepseek-flash" },
  { client: "chat", upstream: "anthropic", model: "claude-haiku-5-5" },
  { client: "messages", upstream: "anthropic", model: "claude-haiku-5-5" },
  { client: "responses", upstream: "anthropic", model: "claude-haiku-5-5" },
  { client: "responses", upstream: "responses", model: "gpt-6-luna" },
];

/**
 * Every upstream transport the gateway ships, each a gateway process of its own: one row per transport kept,
 * with the environment that selects it. Today one (src/transport: Bun's fetch).
 */
const TRANSPORTS: { name: string; env: Record<string, string> }[] = [{ name: "default", env: {} }];

// ------------------------------------------------------------------------------------------------

let faulty: FaultyUpstream;
const gateways = new Map<string, GatewayProcess>();
/** Per gateway: a well-funded key for the normal request after each fault (the faulted account may be drained). */
const probeKeys = new Map<string, string>();
const priceCache = new Map<string, Promise<{ prompt: number; completion: number; cacheRead: number; cacheWrite: number }>>();

beforeAll(async () => {
  faulty = await startFaultyUpstream();
  const started = await Promise.all(
    TRANSPORTS.map((transport) =>
      startGatewayProcess({
        UPSTREAM_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
        UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
        DEEPSEEK_BASE_URL: `${faulty.url}/v1`,
        DEEPSEEK_API_KEY: PROVIDER_KEYS.deepseek,
        ANTHROPIC_BASE_URL: faulty.url,
        ANTHROPIC_API_KEY: PROVIDER_KEYS.anthropic,
        OPENAI_BASE_URL: `${faulty.url}/v1`,
        OPENAI_API_KEY: PROVIDER_KEYS.openai,
        ...transport.env,
      }),
    ),
  );
  TRANSPORTS.forEach((transport, index) => gateways.set(transport.name, started[index]!));
  for (const transport of TRANSPORTS) probeKeys.set(transport.name, (await gateways.get(transport.name)!.newAccountWithKey(1000)).key);
});

afterAll(async () => {
  await Promise.all([...gateways.values()].map((gateway) => gateway.stop()));
  await faulty?.stop();
});

function pricesOf(gateway: GatewayProcess, model: string, key: string) {
  const cacheKey = `${gateway.url} ${model}`;
  if (!priceCache.has(cacheKey)) priceCache.set(cacheKey, gateway.prices(model, key));
  return priceCache.get(cacheKey)!;
}

const SECRET_VALUES = Object.values(PROVIDER_KEYS);
const leaks = (text: string) => SECRET_VALUES.filter((secret) => text.includes(secret));

/** What came back, in one line, for failure messages. */
function describeExchange(exchange: Exchange, record?: any): string {
  const sdk = exchange.sdkError === undefined ? "none" : `${(exchange.sdkError as Error)?.constructor?.name}: ${String((exchange.sdkError as Error)?.message ?? exchange.sdkError).slice(0, 160)}`;
  const recordText = record === undefined ? "" : ` | record ${JSON.stringify({ status: record?.status, total_cost: record?.total_cost, usage_estimated: record?.usage_estimated, usage: record?.usage })}`;
  return `HTTP ${exchange.status} in ${Math.round(exchange.elapsedMs)} ms | text ${JSON.stringify(exchange.text)} | completed ${exchange.completed} | sdk error ${sdk} | raw ${JSON.stringify(exchange.raw.length > 500 ? `${exchange.raw.slice(0, 200)} … ${exchange.raw.slice(-300)}` : exchange.raw)}${recordText}`;
}

type Seen = "answer" | "error_status" | "error_event" | "malformed";

/** What the client got, classified: a complete answer, an HTTP error, a stream ending in an error event, or neither. */
function classify(format: ClientFormat, stream: boolean, exchange: Exchange): Seen {
  const framesOk = !stream || exchange.status !== 200 || sseEvents(exchange.raw).malformed.length === 0;
  if (exchange.status === 200 && exchange.completed && exchange.sdkError === undefined && framesOk && exchange.text === FAULTY_TEXT) return "answer";
  if (exchange.status !== null && exchange.status >= 400 && httpErrorBody(format, exchange.raw)) return "error_status";
  if (stream && exchange.status === 200 && framesOk && !exchange.completed && streamErrorEvent(format, exchange.raw)) return "error_event";
  return "malformed";
}

const CODE_FOR = { 502: "upstream_error", 504: "upstream_timeout" } as const;

/** The problems with an error the client got (status, shape, code, the SDK's reading of it). */
function errorProblems(format: ClientFormat, seen: Seen, status: 502 | 504, exchange: Exchange): string[] {
  const problems: string[] = [];
  if (seen === "error_status") {
    const body = httpErrorBody(format, exchange.raw)!;
    if (exchange.status !== status) problems.push(`expected HTTP ${status}, got ${exchange.status}`);
    if (body.code !== CODE_FOR[status]) problems.push(`expected error code ${CODE_FOR[status]}, got ${body.code}`);
    if (format !== "messages" && body.type !== "upstream_error") problems.push(`expected error type upstream_error, got ${body.type}`);
    const sdkStatus = (exchange.sdkError as { status?: number })?.status;
    const sdkClass = format === "messages" ? Anthropic.APIError : OpenAI.APIError;
    if (!(exchange.sdkError instanceof sdkClass) || sdkStatus !== exchange.status) problems.push(`the SDK did not read it as an API error of status ${exchange.status}`);
  } else if (seen === "error_event") {
    const event = streamErrorEvent(format, exchange.raw)!;
    if (format !== "responses" && event.code !== null && event.code !== CODE_FOR[status]) problems.push(`expected error event code ${CODE_FOR[status]}, got ${event.code}`);
    if (format !== "responses" && !(exchange.sdkError instanceof (format === "messages" ? Anthropic.APIError : OpenAI.APIError))) {
      problems.push("the SDK did not raise the stream's error event as an API error");
    }
  }
  return problems;
}

async function recordOf(gateway: GatewayProcess, requestId: string, key: string): Promise<{ status: number; body: any }> {
  let answer = await gateway.generation(requestId, key);
  // The README promises the record at once; a short grace only so one slow write reads as a clear failure below.
  for (let tries = 0; answer.status === 404 && tries < 20; tries++) {
    await Bun.sleep(50);
    answer = await gateway.generation(requestId, key);
  }
  return answer;
}

async function runCase(transportName: string, route: (typeof ROUTES)[number], scenario: FaultScenario, stream: boolean, expected: Expected): Promise<void> {
  const gateway = gateways.get(transportName)!;
  const { accountId, key } = await gateway.newAccountWithKey(CREDIT_USD);
  const tag = `${transportName}-${route.client}-${route.upstream}-${scenario}-${stream ? "stream" : "json"}`.replaceAll("_", "-");
  const exchange = await sendInFormat(route.client, {
    url: gateway.url,
    key,
    model: route.model,
    text: `Say something short. ${faultDirective(scenario, tag)}`,
    stream,
    maxTokens: MAX_TOKENS,
  });
  const problems: string[] = [];
  const seen = classify(route.client, stream, exchange);

  // What the client got.
  if (exchange.status === null) problems.push("no HTTP answer at all");
  if (exchange.status === 500) problems.push("HTTP 500");
  if (exchange.requestId === null) problems.push("no x-gateway-request-id header");
  const leaked = leaks(exchange.raw + JSON.stringify(exchange.headers) + String((exchange.sdkError as Error)?.message ?? ""));
  if (leaked.length > 0) problems.push(`the provider key reached the client: ${leaked.join(", ")}`);
  if (exchange.status === 200 && exchange.raw.trim() === "") problems.push("an empty 200");
  let recordStatus: "success" | "failed" = "failed";
  let billing: Billing | "zero" | "from_text" = "zero";
  switch (expected.outcome) {
    case "answer":
      if (seen !== "answer") problems.push(`expected the whole answer, got ${seen}`);
      recordStatus = "success";
      billing = expected.billing;
      break;
    case "error":
    case "answer_or_error": {
      if (seen === "answer" && expected.outcome === "answer_or_error") {
        recordStatus = "success";
        billing = expected.billing;
        break;
      }
      const ok = seen === "error_status" || (seen === "error_event" && exchange.text === "");
      if (!ok) problems.push(`expected ${expected.outcome === "error" ? "" : "the answer or "}an error (HTTP ${expected.status}${stream ? ", or 200 with only an error event" : ""}), got ${seen}${seen === "error_event" ? ` after text ${JSON.stringify(exchange.text)}` : ""}`);
      else problems.push(...errorProblems(route.client, seen, expected.status, exchange));
      break;
    }
    case "text_then_error":
    case "answer_or_text_then_error": {
      if (seen === "answer" && expected.outcome === "answer_or_text_then_error") {
        recordStatus = "success";
        billing = expected.billing;
        break;
      }
      const ok = seen === "error_event" && exchange.text !== "" && FAULTY_TEXT.startsWith(exchange.text);
      if (!ok) problems.push(`expected ${expected.outcome === "text_then_error" ? "" : "the answer or "}the first words then an error event, got ${seen} with text ${JSON.stringify(exchange.text)}`);
      else problems.push(...errorProblems(route.client, seen, expected.status, exchange));
      billing = "from_text";
      break;
    }
  }
  if (expected.outcome !== "answer" && "status" in expected && expected.status === 504 && exchange.elapsedMs > STALL_ANSWER_MS) {
    problems.push(`a stalled upstream was given up after ${Math.round(exchange.elapsedMs)} ms (idle timeout ${IDLE_TIMEOUT_MS} ms)`);
  }

  // Sent upstream exactly once.
  const sent = faulty.count(tag);
  if (sent !== 1) problems.push(`the upstream received the request ${sent} times`);

  // The record and the money.
  let record: any;
  if (exchange.requestId !== null) {
    const found = await recordOf(gateway, exchange.requestId, key);
    if (found.status !== 200) problems.push(`GET /v1/generation answered ${found.status}: ${JSON.stringify(found.body).slice(0, 200)}`);
    else {
      record = found.body.data;
      const leakedInRecord = leaks(JSON.stringify(found.body));
      if (leakedInRecord.length > 0) problems.push("the provider key is in the generation record");
      if (record.status !== recordStatus) problems.push(`record status ${record.status}, expected ${recordStatus}`);
      const cost = usdToNano(String(record.total_cost));
      const prices = await pricesOf(gateway, route.model, key);
      const bound = 1000 * Math.max(prices.prompt, prices.cacheRead, prices.cacheWrite) + MAX_TOKENS * prices.completion;
      if (billing === "zero" && cost !== 0) problems.push(`a failure before any output cost ${cost} nano-USD, expected 0`);
      if (billing === "exact") {
        const exact = HONEST_USAGE.prompt * prices.prompt + HONEST_USAGE.completion * prices.completion;
        if (cost !== exact) problems.push(`cost ${cost} nano-USD, expected the honest usage priced: ${exact}`);
        if (record.usage_estimated === true) problems.push("usage_estimated true for an answer with honest usage");
      }
      if (billing === "estimated" || billing === "from_text" || billing === "bounded") {
        if (!(cost > 0)) problems.push(`an answer that delivered text cost ${cost}`);
        if (!(cost <= bound)) problems.push(`cost ${cost} nano-USD above what the request could cost (${bound})`);
      }
      if ((billing === "estimated" || billing === "from_text") && record.usage_estimated !== true) problems.push(`usage_estimated is ${record.usage_estimated}, expected true`);
      // Every count an integer ≥ 0, the nested ones too (cache_write_tokens_details: {ephemeral_5m, ephemeral_1h}).
      const counts = Object.entries(record.usage ?? {}).flatMap(([name, value]) =>
        value !== null && typeof value === "object" ? Object.entries(value).map(([inner, count]) => [`${name}.${inner}`, count] as const) : [[name, value] as const],
      );
      for (const [name, value] of counts) {
        if (!Number.isSafeInteger(value) || (value as number) < 0) problems.push(`record usage.${name} = ${value}`);
      }
      // The ledger agrees with the record and the balance never goes below zero.
      const expectedBalance = usdToNano(CREDIT_USD) - cost;
      let balance = await gateway.balanceNano(accountId);
      for (let tries = 0; balance !== expectedBalance && tries < 20; tries++) {
        await Bun.sleep(50);
        balance = await gateway.balanceNano(accountId);
      }
      if (balance < 0) problems.push(`balance ${balance} below zero`);
      if (balance !== expectedBalance) problems.push(`balance ${balance}, expected credit - recorded cost = ${expectedBalance}`);
    }
  }

  // The process is up and the route still serves.
  if (!gateway.alive()) problems.push(`the gateway process exited: ${gateway.stderr.text().slice(-500)}`);
  else {
    const after = await sendInFormat(route.client, { url: gateway.url, key: probeKeys.get(transportName)!, model: route.model, text: "A normal request after the fault.", stream: false, maxTokens: MAX_TOKENS });
    if (after.status !== 200 || after.text !== FAULTY_TEXT) problems.push(`the next normal request failed: ${describeExchange(after)}`);
  }

  if (problems.length > 0) problems.push(`[${tag}] came back: ${describeExchange(exchange, record)}`);
  expect(problems).toEqual([]);
}

for (const transport of TRANSPORTS) {
  for (const route of ROUTES) {
    describe.concurrent(`upstream faults (transport ${transport.name}): ${route.client} client, ${route.upstream} upstream (${route.model})`, () => {
      for (const row of CASES) {
        for (const stream of [false, true]) {
          const expected = stream ? row.stream : row.nonStream;
          const label = expected.outcome === "answer" ? `answer, ${expected.billing}` : expected.outcome.replaceAll("_", " ") + ("status" in expected ? ` ${expected.status}` : "");
          it(`${row.scenario}, ${stream ? "stream" : "non-stream"}: ${label}`, () => runCase(transport.name, route, row.scenario, stream, expected));
        }
      }
    });
  }
}

/** Same-format routes, one per upstream wire, for the sequential checks below. */
const RELAYS = ROUTES.filter((route) => route.client === (route.upstream === "anthropic" ? "messages" : route.upstream));

for (const transport of TRANSPORTS) {
  describe(`a request is sent upstream at most once (transport ${transport.name})`, () => {
    for (const route of RELAYS) {
      for (const scenario of ["reset_before_headers", "reset_mid_headers"] as const) {
        it(`${route.client} to ${route.upstream} (${route.model}), ${scenario} right after a complete answer on a kept-alive connection: one request upstream, a 502`, async () => {
          const gateway = gateways.get(transport.name)!;
          const { key } = await gateway.newAccountWithKey(CREDIT_USD);
          const problems: string[] = [];
          for (let round = 0; round < 5; round++) {
            const base = { url: gateway.url, key, model: route.model, stream: false, maxTokens: MAX_TOKENS };
            const warm = await sendInFormat(route.client, { ...base, text: `Warm the connection. ${faultDirective("normal", `reuse-warm-${transport.name}-${route.upstream}-${scenario}-${round}`)}` });
            if (warm.status !== 200) problems.push(`round ${round}: the normal request answered ${warm.status}`);
            const tag = `reuse-${transport.name}-${route.upstream}-${scenario}-${round}`.replaceAll("_", "-");
            const broken = await sendInFormat(route.client, { ...base, text: `Now fail. ${faultDirective(scenario, tag)}` });
            const sent = faulty.count(tag);
            if (sent !== 1) problems.push(`round ${round}: the upstream received the request ${sent} times`);
            if (broken.status !== 502) problems.push(`round ${round}: HTTP ${broken.status}, expected 502: ${describeExchange(broken)}`);
          }
          expect(problems).toEqual([]);
        });
      }
    }
  });
}

describe("after the fault matrix", () => {
  it("no provider key appears in any log line of either gateway process", () => {
    for (const gateway of gateways.values()) {
      const output = gateway.stdout.text() + gateway.stderr.text();
      expect(leaks(output)).toEqual([]);
    }
  });

  it("both gateway processes are still up", () => {
    for (const gateway of gateways.values()) expect(gateway.alive()).toBe(true);
  });
});
