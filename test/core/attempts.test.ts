import { describe, expect, it } from "bun:test";
import { sendWithAttempts, type AttemptHost } from "../../src/core/attempts.ts";
import { classifyStatus, isRetried, parseRetryAfter } from "../../src/core/retry-policy.ts";
import type { AttemptOutcome, Deployment, DeploymentHealth } from "../../src/core/deployments.ts";
import type { GatewayContext } from "../../src/core/context.ts";
import type { Provider } from "../../src/core/plugin.ts";
import type { UpstreamRoute } from "../../src/core/route.ts";
import { GatewayError } from "../../src/core/errors.ts";
import { RequestSignal } from "../../src/core/request-signals.ts";
import { createLogger } from "../../src/core/log.ts";
import { jsonHeaders } from "../../src/transport/index.ts";

describe("retry-policy", () => {
  it("classifies statuses by whose fault they are", () => {
    expect(classifyStatus(429)).toBe("rate_limited");
    expect(classifyStatus(503)).toBe("overloaded");
    expect(classifyStatus(529)).toBe("overloaded");
    for (const status of [500, 502, 504, 408]) expect(classifyStatus(status)).toBe("server_error");
    for (const status of [401, 403]) expect(classifyStatus(status)).toBe("auth");
    for (const status of [400, 404, 413, 422]) expect(classifyStatus(status)).toBe("client_error");
  });

  it("retries 408, 429, 5xx, 529 and 401/403, never the request's own 4xx; a provider's retry_on replaces the set", () => {
    for (const status of [401, 403, 408, 429, 500, 502, 503, 504, 529]) expect(isRetried(status)).toBe(true);
    for (const status of [400, 404, 413, 422, 501]) expect(isRetried(status)).toBe(false);
    expect(isRetried(500, [503])).toBe(false);
    expect(isRetried(503, [503])).toBe(true);
  });

  it("reads Retry-After as seconds or an HTTP-date, capped, and ignores what it cannot read", () => {
    const now = Date.parse("2026-11-26T10:00:00Z");
    expect(parseRetryAfter("7", now)).toBe(7_000);
    expect(parseRetryAfter(" 1.5 ", now)).toBe(1_500);
    expect(parseRetryAfter("0", now)).toBe(0);
    expect(parseRetryAfter("Thu, 26 Nov 2026 10:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter("Thu, 26 Nov 2026 09:59:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("3600", now)).toBe(60_000);
    expect(parseRetryAfter("3600", now, 10_000)).toBe(10_000);
    for (const bad of [null, undefined, "", "soon", "-5", "1e3x"]) expect(parseRetryAfter(bad, now)).toBeUndefined();
  });
});

/** What a fake deployment answers: a status (and headers), a thrown error, or a wait longer than the first-byte timeout. */
type Script = { status: number; headers?: Record<string, string> } | { throws: Error } | { hangMs: number };

function fakeProvider(scripts: Record<string, Script[]>, retryOn?: number[]): { provider: Provider; sent: string[]; seenHeaders: Record<string, string>[] } {
  const sent: string[] = [];
  const seenHeaders: Record<string, string>[] = [];
  const deployments: Deployment[] = Object.keys(scripts).map((name) => ({
    name,
    weight: 1,
    endpoint: () => ({ url: `fake:${name}`, headers: jsonHeaders({}) }),
  }));
  const provider: Provider = {
    codecs: [],
    deployments,
    ...(retryOn ? { retryOn } : {}),
    async send(_ctx, call) {
      const name = call.url.slice(5);
      sent.push(name);
      seenHeaders.push(Object.fromEntries(call.headers));
      const script = scripts[name]!.shift() ?? { status: 200 };
      if ("throws" in script) throw script.throws;
      if ("hangMs" in script) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, script.hangMs);
          call.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(Object.assign(new Error("aborted"), { name: "TimeoutError" }));
          });
        });
        return new Response("{}", { status: 200 });
      }
      return new Response(JSON.stringify({ error: { message: `${name} says ${script.status}` } }), { status: script.status, headers: script.headers });
    },
  };
  return { provider, sent, seenHeaders };
}

const route = {
  relayed: true,
  codec: { name: "fake", readUpstreamError: (_status: number, text: string) => ({ message: JSON.parse(text).error.message }) },
} as unknown as UpstreamRoute;

function context(): GatewayContext {
  return {
    requestId: "gen-test",
    signal: new RequestSignal(),
    headers: new Headers(),
    request: { model: "m", stream: false },
    target: { provider: "p", upstreamModel: "m" },
    log: { key_id: "key-1" },
    attempts: [],
  } as unknown as GatewayContext;
}

function host(
  options: { maxAttempts?: number; budgetMs?: number; firstByteTimeoutMs?: number; firstByteTimeoutNonStreamMs?: number; health?: DeploymentHealth; observers?: AttemptHost["observers"] } = {},
): AttemptHost {
  const firstByteTimeoutMs = options.firstByteTimeoutMs ?? 0;
  return {
    settings: {
      maxAttempts: options.maxAttempts ?? 3,
      budgetMs: options.budgetMs ?? 30_000,
      firstByteTimeoutMs,
      firstByteTimeoutNonStreamMs: options.firstByteTimeoutNonStreamMs ?? firstByteTimeoutMs,
    },
    health: options.health,
    observers: options.observers ?? [],
    log: createLogger("test", { silent: true }),
    now: Date.now,
  };
}

async function attempt(h: AttemptHost, provider: Provider, ctx = context()) {
  return sendWithAttempts(h, ctx, "p", provider, route, {}).then(
    (result) => ({ ctx, status: result.response.status, error: undefined as GatewayError | undefined }),
    (error: GatewayError) => ({ ctx, status: error.status, error }),
  );
}

describe("attempts", () => {
  it("tells attempt observers of each attempt: their headers go upstream with it (the shared endpoint headers untouched), its record ends it", async () => {
    const { provider, seenHeaders } = fakeProvider({ "p#1": [{ status: 500 }], "p#2": [{ status: 200 }] });
    const ended: unknown[] = [];
    let made = 0;
    const observers: AttemptHost["observers"] = [
      (_ctx, attempt) => ({ headers: { traceparent: `00-${"a".repeat(32)}-${String(++made).padStart(16, "0")}-01` }, end: (record) => ended.push([attempt.deployment, record?.status]) }),
      () => undefined,
    ];
    const { ctx, status } = await attempt(host({ observers }), provider);
    expect(status).toBe(200);
    expect(seenHeaders.map((headers) => headers.traceparent)).toEqual([`00-${"a".repeat(32)}-0000000000000001-01`, `00-${"a".repeat(32)}-0000000000000002-01`]);
    expect(seenHeaders.every((headers) => headers["content-type"] === "application/json")).toBe(true);
    expect(ended).toEqual([["p#1", 500], ["p#2", 200]]);
    expect(ctx.attempts).toHaveLength(2);
    // Without observers nothing is added.
    const plain = fakeProvider({ "p#1": [{ status: 200 }] });
    await attempt(host(), plain.provider);
    expect(plain.seenHeaders[0]!.traceparent).toBeUndefined();
  });

  it("tries the next deployment after a 500 and records both attempts", async () => {
    const { provider, sent } = fakeProvider({ "p#1": [{ status: 500 }], "p#2": [{ status: 200 }] });
    const { ctx, status } = await attempt(host(), provider);
    expect(status).toBe(200);
    expect(sent).toEqual(["p#1", "p#2"]);
    expect(ctx.attempts.map(({ deployment, status, error_class }) => ({ deployment, status, error_class }))).toEqual([
      { deployment: "p#1", status: 500, error_class: "server_error" },
      { deployment: "p#2", status: 200, error_class: null },
    ]);
    for (const record of ctx.attempts) expect(record.latency_ms).toBeGreaterThanOrEqual(0);
  });

  it("never retries the request's own 4xx: the answer is handed back as it came", async () => {
    const { provider, sent } = fakeProvider({ "p#1": [{ status: 400 }], "p#2": [{ status: 200 }] });
    const { ctx, status } = await attempt(host(), provider);
    expect(status).toBe(400);
    expect(sent).toEqual(["p#1"]);
    expect(ctx.attempts[0]!.error_class).toBe("client_error");
  });

  it("moves on after a connection error, a 401 and a first-byte timeout", async () => {
    const { provider, sent } = fakeProvider({ a: [{ throws: new Error("ECONNREFUSED") }], b: [{ status: 401 }], c: [{ hangMs: 1_000 }], d: [{ status: 200 }] });
    const { ctx, status } = await attempt(host({ maxAttempts: 4, firstByteTimeoutMs: 30 }), provider);
    expect(status).toBe(200);
    expect(sent).toEqual(["a", "b", "c", "d"]);
    expect(ctx.attempts.map((record) => record.error_class)).toEqual(["connection", "auth", "timeout", null]);
  });

  it("times a streamed attempt's first byte with the stream setting and a non-streamed one with its own, longer one", async () => {
    const settings = { maxAttempts: 2, firstByteTimeoutMs: 30, firstByteTimeoutNonStreamMs: 2_000 };
    const nonStream = fakeProvider({ a: [{ hangMs: 200 }], b: [{ status: 200 }] });
    const patient = await attempt(host(settings), nonStream.provider);
    expect(nonStream.sent).toEqual(["a"]); // 200 ms of thinking is no timeout for a whole answer
    expect(patient.ctx.attempts.map((record) => record.error_class)).toEqual([null]);
    const streamed = fakeProvider({ a: [{ hangMs: 200 }], b: [{ status: 200 }] });
    const ctx = context();
    (ctx.request as { stream: boolean }).stream = true;
    const quick = await attempt(host(settings), streamed.provider, ctx);
    expect(streamed.sent).toEqual(["a", "b"]);
    expect(quick.ctx.attempts.map((record) => record.error_class)).toEqual(["timeout", null]);
  });

  it("stops at upstream_max_attempts and at the attempts budget", async () => {
    const many = () => fakeProvider({ a: [{ status: 502 }], b: [{ status: 502 }], c: [{ status: 200 }] });
    const capped = many();
    expect((await attempt(host({ maxAttempts: 2 }), capped.provider)).status).toBe(503);
    expect(capped.sent).toEqual(["a", "b"]);
    const budget = many();
    const { status, error } = await attempt(host({ budgetMs: 0 }), budget.provider);
    expect(budget.sent).toEqual(["a"]);
    expect(status).toBe(502); // one attempt: the upstream's error mapped as before
    expect(error?.code).toBe("upstream_error");
  });

  it("answers 429 with the shortest retry-after when every deployment is rate limited", async () => {
    const { provider } = fakeProvider({ a: [{ status: 429, headers: { "retry-after": "20" } }], b: [{ status: 429, headers: { "retry-after": "4" } }] });
    const { status, error } = await attempt(host(), provider);
    expect(status).toBe(429);
    expect(error?.headers?.["retry-after"]).toBe("4");
  });

  it("answers 503 provider_unavailable with retry-after when every deployment failed", async () => {
    const { provider } = fakeProvider({ a: [{ status: 503, headers: { "retry-after": "9" } }], b: [{ status: 500 }] });
    const { status, error } = await attempt(host(), provider);
    expect(status).toBe(503);
    expect(error?.code).toBe("provider_unavailable");
    expect(error?.headers?.["retry-after"]).toBe("9");
    expect(error?.message).toContain("a: overloaded");
  });

  it("follows the health keeper's order, tells it of every attempt, and refuses with its retry-after when it orders none", async () => {
    const told: [string, AttemptOutcome][] = [];
    let open = false;
    const health: DeploymentHealth = {
      order: (_provider, deployments, stickyKey) => {
        expect(stickyKey).toBe("key-1 m");
        return open ? [] : [...deployments].reverse();
      },
      started: () => {},
      finished: (_provider, deployment, outcome) => void told.push([deployment.name, outcome]),
      nextAvailableAt: () => Date.now() + 12_000,
    };
    const { provider, sent } = fakeProvider({ a: [], b: [{ status: 529, headers: { "retry-after": "2" } }] });
    const first = await attempt(host({ health }), provider);
    expect(first.status).toBe(200);
    expect(sent).toEqual(["b", "a"]);
    expect(told).toEqual([["b", { ok: false, errorClass: "overloaded", latencyMs: expect.any(Number), retryAfterMs: 2_000 }]]);
    open = true;
    const refused = await attempt(host({ health }), provider);
    expect(refused.status).toBe(503);
    expect(refused.error?.code).toBe("provider_unavailable");
    expect(refused.error?.headers?.["retry-after"]).toBe("12");
    expect(refused.ctx.attempts).toEqual([]);
  });

  it("keeps a conversation's prompt_cache_key in the sticky key the health keeper orders by (one conversation, one deployment)", async () => {
    const keys: string[] = [];
    const health: DeploymentHealth = {
      order: (_provider, deployments, stickyKey) => {
        keys.push(stickyKey);
        return deployments;
      },
      started: () => {},
      finished: () => {},
      nextAvailableAt: () => undefined,
    };
    const { provider } = fakeProvider({ a: [], b: [] });
    await attempt(host({ health }), provider);
    const withKey = context();
    withKey.request.cacheKey = "thread-42";
    await attempt(host({ health }), provider, withKey);
    expect(keys[0]).toBe("key-1 m");
    expect(keys[1]).toContain("thread-42");
    expect(keys[1]).not.toBe(keys[0]);
  });

  it("always tries a provider's only deployment, whatever the health keeper would say", async () => {
    const health: DeploymentHealth = { order: () => [], started: () => {}, finished: () => {}, nextAvailableAt: () => undefined };
    const { provider, sent } = fakeProvider({ only: [{ status: 429, headers: { "retry-after": "5" } }] });
    const { status, error } = await attempt(host({ health }), provider);
    expect(sent).toEqual(["only"]);
    expect(status).toBe(429);
    expect(error?.headers?.["retry-after"]).toBe("5");
  });
});
