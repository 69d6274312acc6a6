import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";
import tracing from "../../src/plugins/tracing/index.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

// Normally a few seconds; the margin is for a loaded machine.
setDefaultTimeout(30_000);

/**
 * Issue 30, item 2: OpenTelemetry traces. A local OTLP/HTTP receiver gets the request span (SERVER, named
 * `chat {model}`, the GenAI attributes, our request id and cost, the client's traceparent continued) and one CLIENT
 * span per upstream attempt, whose context the upstream receives as its traceparent. Spans are exported on
 * `flush()` (the plugin's provides), so nothing here waits on the batch processor's timer.
 */

const MODEL = "gpt-6-luna";
const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;

/** OTLP/JSON as the JS exporter writes it (ids in hex, enums as numbers). */
interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
}
interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  status?: { code?: number };
  attributes: Record<string, string | number | boolean | undefined>;
  resource: Record<string, string | number | boolean | undefined>;
}
const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;

function plain(value: OtlpValue): string | number | boolean | undefined {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return value.boolValue;
}

function attributes(list: { key: string; value: OtlpValue }[] | undefined): Record<string, string | number | boolean | undefined> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]));
}

/** Nanoseconds as a BigInt (the JSON carries them as strings or numbers). */
const nanos = (value: string | number) => BigInt(value);

/** An OTLP/HTTP receiver on /v1/traces: every POST's content type and size; the spans of JSON ones, flattened. */
function startReceiver() {
  const spans: Span[] = [];
  const posts: { contentType: string; bytes: number; path: string }[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const body = new Uint8Array(await request.arrayBuffer());
      const contentType = request.headers.get("content-type") ?? "";
      const path = new URL(request.url).pathname;
      posts.push({ contentType, bytes: body.byteLength, path });
      if (contentType.includes("json")) {
        const payload = JSON.parse(new TextDecoder().decode(body));
        for (const resourceSpans of payload.resourceSpans ?? []) {
          const resource = attributes(resourceSpans.resource?.attributes);
          for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
            for (const span of scopeSpans.spans ?? []) spans.push({ ...span, attributes: attributes(span.attributes), resource });
          }
        }
        return Response.json({});
      }
      return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, spans, posts, stop: () => server.stop(true) };
}

/** A deployment that answers every request 500. */
function failingDeployment() {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: () => Response.json({ error: { message: "primary is down", type: "server_error", code: null } }, { status: 500 }),
  });
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

/** The request span of `requestId` and its children, once exported (flushing until they are there). */
async function traceOf(gateway: RunningGateway, spans: Span[], requestId: string, children = 1): Promise<{ request: Span; attempts: Span[] }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await gateway.service("tracing")!.flush();
    const request = spans.find((span) => span.attributes["gateway.request_id"] === requestId);
    const attempts = request ? spans.filter((span) => span.parentSpanId === request.spanId) : [];
    if ((request && attempts.length >= children) || Date.now() > deadline) {
      if (!request) throw new Error(`no span for ${requestId}`);
      return { request, attempts };
    }
    await Bun.sleep(10);
  }
}

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID = "b7ad6b7169203331";

describe("tracing on (OTLP http/json)", () => {
  let receiver: ReturnType<typeof startReceiver>;
  let fake: FakeUpstream;
  let down: ReturnType<typeof failingDeployment>;
  let t: TestGateway;
  let tFailover: TestGateway;
  let key: string;

  beforeAll(async () => {
    receiver = startReceiver();
    fake = await startFakeUpstream();
    down = failingDeployment();
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "gateway-under-test",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test,team=a%20b",
    };
    t = await startTestGateway({ fake, env: otel });
    tFailover = await startTestGateway({
      fake,
      env: { ...otel, UPSTREAM_HEALTH_REDIS_PREFIX: `tracing-test-${crypto.randomUUID()}:`, OPENAI_BASE_URL: `${down.url}/v1,${fake.url}/v1`, OPENAI_API_KEY: "sk-primary-key,sk-secondary-key" },
    });
    key = (await t.newAccountWithKey({ credit: 10 })).key;
  });

  afterAll(async () => {
    await t?.stop();
    await tFailover?.stop();
    down?.stop();
    await fake?.stop();
    receiver?.stop();
  });

  it("exports the request span continuing the client's traceparent, with the GenAI attributes, and its attempt as its child", async () => {
    fake.reset();
    const usage = { prompt_tokens: 120, completion_tokens: 17, cached_tokens: 40, reasoning_tokens: 5 };
    const { data } = await t
      .client(key)
      .chat.completions.create(
        { model: MODEL, max_tokens: 64, messages: [{ role: "user", content: `hi ${directive({ usage })}` }] },
        { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, tracestate: "vendor=abc" } },
      )
      .withResponse();
    const requestId = data.id;
    const { request, attempts } = await traceOf(t.gateway, receiver.spans, requestId);

    expect(request.traceId).toBe(TRACE_ID);
    expect(request.parentSpanId).toBe(PARENT_ID);
    expect(request.name).toBe(`chat ${MODEL}`);
    expect(request.kind).toBe(SPAN_KIND_SERVER);
    expect(request.status?.code ?? 0).not.toBe(STATUS_ERROR);
    expect(request.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": MODEL,
      "gen_ai.response.model": MODEL,
      "gen_ai.request.max_tokens": 64,
      "gen_ai.request.stream": false,
      "gen_ai.usage.input_tokens": 120,
      "gen_ai.usage.output_tokens": 17,
      "gen_ai.usage.cache_read.input_tokens": 40,
      "gen_ai.usage.reasoning.output_tokens": 5,
      "gateway.request_id": requestId,
      "gateway.ingress": "openai-chat",
      "http.response.status_code": 200,
    });
    expect(request.attributes["error.type"]).toBeUndefined();
    // 80 uncached input at $0.10/M, 40 cached at $0.01/M, 17 output at $0.50/M.
    expect(request.attributes["gateway.cost_usd"]).toBeCloseTo((80 * 0.1 + 40 * 0.01 + 17 * 0.5) / 1e6, 12);
    // Never the key, the account or the prompt.
    const text = JSON.stringify(request);
    expect(text).not.toContain(key);
    expect(text).not.toContain("hi [[fake");
    expect(request.resource["service.name"]).toBe("gateway-under-test");
    expect(request.resource["deployment.environment"]).toBe("test");
    expect(request.resource["team"]).toBe("a b");

    expect(attempts).toHaveLength(1);
    const attempt = attempts[0]!;
    expect(attempt.traceId).toBe(TRACE_ID);
    expect(attempt.kind).toBe(SPAN_KIND_CLIENT);
    expect(attempt.name).toBe(`chat ${MODEL}`);
    expect(attempt.attributes).toMatchObject({ "gen_ai.provider.name": "openai", "gateway.deployment": "openai#1", "http.response.status_code": 200 });
    expect(attempt.attributes["error.type"]).toBeUndefined();

    // The upstream got the attempt's context: same trace, the attempt span as parent, the client's tracestate kept.
    const upstream = fake.requests.filter((r) => r.path.endsWith("/chat/completions"));
    expect(upstream).toHaveLength(1);
    expect(upstream[0]!.headers.traceparent).toBe(`00-${TRACE_ID}-${attempt.spanId}-01`);
    expect(upstream[0]!.headers.tracestate).toBe("vendor=abc");
  });

  it("starts a new trace when the incoming traceparent is malformed", async () => {
    const data = await t
      .client(key)
      .chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }, { headers: { traceparent: "00-not-a-trace-01" } });
    const { request } = await traceOf(t.gateway, receiver.spans, data.id);
    expect(request.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(request.traceId).not.toBe(TRACE_ID);
    expect(request.parentSpanId || undefined).toBeUndefined();
  });

  it("ends a stream's request span at its last byte, after its attempt's (which ends at the answer's headers)", async () => {
    // 20 ms between events: the stream's body takes at least that much per event after the headers came.
    const chunkDelayMs = 20;
    const stream = await t.client(key).chat.completions.create({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: `hi ${directive({ chunk_delay_ms: chunkDelayMs, text: "one two three four five", usage: { prompt_tokens: 9, completion_tokens: 5 } })}` }],
    });
    let requestId = "";
    let chunks = 0;
    for await (const chunk of stream) {
      requestId ||= chunk.id;
      chunks++;
    }
    expect(chunks).toBeGreaterThan(3);
    const { request, attempts } = await traceOf(t.gateway, receiver.spans, requestId);
    expect(attempts).toHaveLength(1);
    const attempt = attempts[0]!;
    expect(request.attributes).toMatchObject({ "gen_ai.request.stream": true, "gen_ai.usage.input_tokens": 9, "gen_ai.usage.output_tokens": 5 });
    expect(request.attributes["gen_ai.response.time_to_first_chunk"]).toBeGreaterThan(0);
    const attemptEnd = nanos(attempt.endTimeUnixNano);
    const requestEnd = nanos(request.endTimeUnixNano);
    expect(requestEnd >= attemptEnd).toBe(true);
    // The events after the headers were at least (chunks - 2) delays apart: the request span covers them.
    const streamedNs = BigInt((chunks - 2) * chunkDelayMs) * 1_000_000n;
    expect(requestEnd - attemptEnd >= streamedNs).toBe(true);
    expect(requestEnd - nanos(request.startTimeUnixNano) >= streamedNs).toBe(true);
  });

  it("a failed first deployment: two attempt spans, the first with its error class", async () => {
    const { key: failoverKey } = await tFailover.newAccountWithKey({ credit: 10 });
    fake.reset();
    const data = await tFailover.client(failoverKey).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
    const { request, attempts } = await traceOf(tFailover.gateway, receiver.spans, data.id, 2);
    expect(attempts).toHaveLength(2);
    const [first, second] = attempts.sort((a, b) => Number(nanos(a.startTimeUnixNano) - nanos(b.startTimeUnixNano)));
    expect(first!.attributes).toMatchObject({ "gateway.deployment": "openai#1", "http.response.status_code": 500, "error.type": "server_error" });
    expect(first!.status?.code).toBe(STATUS_ERROR);
    expect(second!.attributes).toMatchObject({ "gateway.deployment": "openai#2", "http.response.status_code": 200 });
    expect(second!.attributes["error.type"]).toBeUndefined();
    expect(request.attributes["error.type"]).toBeUndefined();
    // Only the deployment that answered is the upstream's parent here.
    const upstream = fake.requests.filter((r) => r.path.endsWith("/chat/completions"));
    expect(upstream.map((r) => r.headers.traceparent)).toEqual([`00-${request.traceId}-${second!.spanId}-01`]);
  });

  it("a refused request still gets its span: the error code as error.type, status ERROR", async () => {
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-not-a-key", "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(response.status).toBe(401);
    const requestId = response.headers.get("x-gateway-request-id")!;
    const { request } = await traceOf(t.gateway, receiver.spans, requestId, 0);
    expect(request.status?.code).toBe(STATUS_ERROR);
    expect(request.attributes["http.response.status_code"]).toBe(401);
    expect(typeof request.attributes["error.type"]).toBe("string");
    // Refused from the headers: the body was never read, so no model is named.
    expect(request.name).toBe("chat");
    expect(request.attributes["gen_ai.request.model"]).toBeUndefined();
  });

  it("names count_tokens by its own operation", async () => {
    const response = await fetch(`${t.url}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hello" }] }),
    });
    expect(response.status).toBe(200);
    const requestId = response.headers.get("x-gateway-request-id")!;
    const { request, attempts } = await traceOf(t.gateway, receiver.spans, requestId, 0);
    expect(request.name).toBe(`count_tokens ${MODEL}`);
    expect(request.attributes["gen_ai.operation.name"]).toBe("count_tokens");
    expect(attempts).toHaveLength(0);
  });
});

describe("tracing's trace id in the request line", () => {
  let receiver: ReturnType<typeof startReceiver>;
  let gateway: RunningGateway;
  let dataDir: string;
  const written: string[] = [];

  beforeAll(async () => {
    receiver = startReceiver();
    dataDir = mkdtempSync(join(tmpdir(), "tracing-logs-"));
    gateway = await startGateway({
      port: 0,
      env: {
        HOST: "127.0.0.1",
        DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
        GATEWAY_ADMIN_TOKEN: "tracing-logs-admin-token",
        EDGE_RATE_LIMIT_RPS: "0",
        OPENAI_API_KEY: "sk-upstream-tracing-logs",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      },
      log: createLogger("core", { silent: false, sink: (line) => void written.push(line) }),
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    receiver?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("carries the request span's trace id", async () => {
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-not-a-key", "content-type": "application/json", traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` },
      body: "{}",
    });
    await response.arrayBuffer();
    const requestId = response.headers.get("x-gateway-request-id")!;
    const deadline = Date.now() + 10_000;
    let line: Record<string, unknown> | undefined;
    while (!line && Date.now() < deadline) {
      line = written.map((text) => JSON.parse(text)).find((entry) => entry.message === "request" && entry.request_id === requestId);
      if (!line) await Bun.sleep(10);
    }
    expect(line?.trace_id).toBe(TRACE_ID);
    const { request } = await traceOf(gateway, receiver.spans, requestId, 0);
    expect(request.traceId).toBe(TRACE_ID);
  });
});

describe("tracing over http/protobuf (the default protocol)", () => {
  it("POSTs a non-empty protobuf body to /v1/traces, and flushes on stop", async () => {
    const receiver = startReceiver();
    const t = await startTestGateway({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/` } });
    try {
      const { key } = await t.newAccountWithKey({ credit: 10 });
      await t.client(key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
    } finally {
      // No flush asked: stopping the gateway flushes the queued spans.
      await t.stop();
      receiver.stop();
    }
    expect(receiver.posts.length).toBeGreaterThan(0);
    for (const post of receiver.posts) {
      expect(post.path).toBe("/v1/traces");
      expect(post.contentType).toBe("application/x-protobuf");
      expect(post.bytes).toBeGreaterThan(0);
    }
  });
});

describe("tracing off (no OTLP endpoint)", () => {
  it("registers no hook at all", async () => {
    const instance = await tracing.setup({ shutdown_timeout_ms: 0 }, {
      env: { OTEL_SERVICE_NAME: "x" },
      secret() {},
      log: createLogger("test", { silent: true }),
    } as never);
    expect(instance.onRequestStart).toBeUndefined();
    expect(instance.onRequestEnd).toBeUndefined();
    expect(instance.onUpstreamAttempt).toBeUndefined();
    expect(instance.onLocalRequest).toBeUndefined();
    expect((instance.provides as { enabled: boolean }).enabled).toBe(false);
  });

  it("sends no traceparent upstream", async () => {
    const t = await startTestGateway({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "" } });
    try {
      const { key } = await t.newAccountWithKey({ credit: 10 });
      t.fake.reset();
      await t.client(key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      const upstream = t.fake.requests.filter((r) => r.path.endsWith("/chat/completions"));
      expect(upstream).toHaveLength(1);
      expect(upstream[0]!.headers.traceparent).toBeUndefined();
      expect(t.gateway.service("tracing")!.enabled).toBe(false);
    } finally {
      await t.stop();
    }
  });

  it("refuses to start on a protocol it cannot speak", async () => {
    const failed = await startTestGateway({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" } }).then(
      (t) => t.stop().then(() => undefined),
      (error: Error) => error,
    );
    expect(failed?.message).toContain("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported");
  });
});
