import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import Redis from "ioredis";
import { createMemoryStore } from "../../../src/plugins/rate-limit/memory-store.ts";
import { createRedisStore } from "../../../src/plugins/rate-limit/redis-store.ts";
import { PERIOD_MS, type WindowStore } from "../../../src/plugins/rate-limit/gcra.ts";
import { UnavailableError } from "../../../src/core/errors.ts";
import { createLogger } from "../../../src/core/log.ts";
import { createLeasedStore, type LeasableStore } from "../../../src/plugins/rate-limit/leases.ts";
import { createPrimaryStore, serveSharedWindows } from "../../../src/plugins/rate-limit/primary-store.ts";
import type { PrimaryHost } from "../../../src/core/workers.ts";
import { startTcpProxy } from "./tcp-proxy.ts";

const REDIS_URL = process.env.REDIS_URL;
const T0 = 1_800_000_000_000;
const log = createLogger("test", { silent: true });
let keySeq = 0;
/** A fresh API-key id per test, so tests never share a window. */
const newKey = () => `key_${++keySeq}`;

/** The behaviour every backend must have; the clock is passed to each call, so nothing sleeps. */
function windowSuite(open: () => Promise<WindowStore>) {
  let store: WindowStore;
  beforeAll(async () => {
    store = await open();
  });
  afterAll(async () => {
    await store.close();
  });

  it("admits rpm requests in a minute and refuses the next with the wait until one drains", async () => {
    const key = newKey();
    for (let i = 0; i < 5; i++) expect(await store.admit(key, 5, 0, 0, T0)).toBeNull();
    expect(await store.admit(key, 5, 0, 0, T0)).toEqual({ limit: "rpm", retryAfterMs: PERIOD_MS / 5 });
    expect(await store.admit(key, 5, 0, 0, T0 + 11_999)).toEqual({ limit: "rpm", retryAfterMs: 1 });
    expect(await store.admit(key, 5, 0, 0, T0 + 12_000)).toBeNull();
    expect(await store.admit(key, 5, 0, 0, T0 + 12_000)).toEqual({ limit: "rpm", retryAfterMs: 12_000 });
  });

  it("frees the whole limit once a minute has passed, and part of it before (GCRA drains continuously)", async () => {
    const key = newKey();
    for (let i = 0; i < 3; i++) expect(await store.admit(key, 3, 0, 0, T0)).toBeNull();
    expect(await store.admit(key, 3, 0, 0, T0 + 19_999)).toEqual({ limit: "rpm", retryAfterMs: 1 });
    expect(await store.admit(key, 3, 0, 0, T0 + 20_000)).toBeNull();
    for (let i = 0; i < 3; i++) expect(await store.admit(key, 3, 0, 0, T0 + 20_000 + PERIOD_MS)).toBeNull();
    expect((await store.admit(key, 3, 0, 0, T0 + PERIOD_MS))?.limit).toBe("rpm");
  });

  it("charges a request's tokens and refuses one that does not fit, with the wait until it does", async () => {
    const key = newKey();
    expect(await store.admit(key, 0, 1000, 600, T0)).toBeNull();
    // 600 + 500 > 1000: 100 tokens must drain, at 1000 per minute = 6 s.
    expect(await store.admit(key, 0, 1000, 500, T0)).toEqual({ limit: "tpm", retryAfterMs: 6_000 });
    expect(await store.admit(key, 0, 1000, 400, T0)).toBeNull();
    expect(await store.admit(key, 0, 1000, 500, T0 + 30_000)).toBeNull();
  });

  it("adds tokens reported at settle, and the debt past the limit delays the next request accordingly", async () => {
    const key = newKey();
    expect(await store.admit(key, 0, 1000, 100, T0)).toBeNull();
    await store.adjust(key, 1000, 1400, T0); // completion 1400: the window holds 1500 tokens
    // 1500 + 100 - 1000 = 600 tokens must drain: 36 s.
    expect(await store.admit(key, 0, 1000, 100, T0)).toEqual({ limit: "tpm", retryAfterMs: 36_000 });
    expect(await store.admit(key, 0, 1000, 100, T0 + 35_999)).not.toBeNull();
    expect(await store.admit(key, 0, 1000, 100, T0 + 36_000)).toBeNull();
  });

  it("gives back an estimate corrected down, never below zero", async () => {
    const key = newKey();
    expect(await store.admit(key, 0, 1000, 800, T0)).toBeNull();
    await store.adjust(key, 1000, -700, T0);
    expect(await store.admit(key, 0, 1000, 900, T0)).toBeNull();
    await store.adjust(key, 1000, -5000, T0);
    expect(await store.admit(key, 0, 1000, 1000, T0)).toBeNull();
    expect((await store.admit(key, 0, 1000, 1, T0))?.limit).toBe("tpm");
    await store.adjust(newKey(), 1000, -100, T0); // a key without a window: nothing to give back
  });

  it("charges nothing when one limit refuses: a request refused for tokens does not use up a request", async () => {
    const key = newKey();
    expect(await store.admit(key, 2, 1000, 100, T0)).toBeNull();
    expect(await store.admit(key, 2, 1000, 950, T0)).toEqual({ limit: "tpm", retryAfterMs: 3_000 });
    expect(await store.admit(key, 2, 1000, 100, T0)).toBeNull();
    expect(await store.admit(key, 2, 1000, 100, T0)).toEqual({ limit: "rpm", retryAfterMs: 30_000 });
  });

  it("names the limit that binds longest and waits until both fit", async () => {
    const key = newKey();
    expect(await store.admit(key, 1, 1000, 900, T0)).toBeNull();
    // rpm 1: 60 s; tpm: 900 + 900 - 1000 = 800 tokens = 48 s.
    expect(await store.admit(key, 1, 1000, 900, T0)).toEqual({ limit: "rpm", retryAfterMs: 60_000 });
    await store.adjust(key, 1000, 1000, T0); // 1900 tokens: 1800 must drain = 108 s
    expect(await store.admit(key, 1, 1000, 900, T0)).toEqual({ limit: "tpm", retryAfterMs: 108_000 });
  });

  it("keeps a window's level when its limit changes (a cap lifted or a stricter one applied)", async () => {
    const key = newKey();
    for (let i = 0; i < 10; i++) expect(await store.admit(key, 10, 0, 0, T0)).toBeNull();
    expect(await store.admit(key, 10, 0, 0, T0)).not.toBeNull();
    for (let i = 0; i < 10; i++) expect(await store.admit(key, 20, 0, 0, T0)).toBeNull();
    expect((await store.admit(key, 20, 0, 0, T0))?.retryAfterMs).toBe(3_000);
    // Under a stricter limit the same 20 requests take longer to drain: (20 + 1 - 5) / 5 minutes.
    expect((await store.admit(key, 5, 0, 0, T0))?.retryAfterMs).toBe(192_000);
  });

  it("leaves a window alone when its limit is 0", async () => {
    const key = newKey();
    for (let i = 0; i < 50; i++) expect(await store.admit(key, 0, 1_000_000, 10, T0)).toBeNull();
    expect(await store.admit(key, 1, 0, 0, T0)).toBeNull(); // the 50 requests above were not counted
    const other = newKey();
    for (let i = 0; i < 3; i++) expect(await store.admit(other, 100, 0, 5_000, T0)).toBeNull();
    expect(await store.admit(other, 0, 1000, 1000, T0)).toBeNull(); // nor were their tokens
  });

  it("counts each key on its own", async () => {
    const [a, b] = [newKey(), newKey()];
    expect(await store.admit(a, 1, 0, 0, T0)).toBeNull();
    expect(await store.admit(a, 1, 0, 0, T0)).not.toBeNull();
    expect(await store.admit(b, 1, 0, 0, T0)).toBeNull();
  });

  it("drains nothing for a clock behind the last write (another instance's), and never rewinds", async () => {
    const key = newKey();
    expect(await store.admit(key, 2, 0, 0, T0 + 10_000)).toBeNull();
    expect(await store.admit(key, 2, 0, 0, T0)).toBeNull();
    expect((await store.admit(key, 2, 0, 0, T0))?.retryAfterMs).toBe(30_000);
    // Both requests drain from T0 + 10 s, not from T0: one fits 30 s after the later write.
    expect(await store.admit(key, 2, 0, 0, T0 + 39_999)).not.toBeNull();
    expect(await store.admit(key, 2, 0, 0, T0 + 40_000)).toBeNull();
  });

  it("handles large token limits exactly (integer arithmetic)", async () => {
    const key = newKey();
    const tpm = 50_000_000; // 833.3… tokens drain per millisecond
    expect(await store.admit(key, 0, tpm, tpm - 1, T0)).toBeNull();
    expect(await store.admit(key, 0, tpm, 1, T0)).toBeNull();
    expect(await store.admit(key, 0, tpm, 1, T0)).toEqual({ limit: "tpm", retryAfterMs: 1 });
    expect(await store.admit(key, 0, tpm, 1000, T0)).toEqual({ limit: "tpm", retryAfterMs: 2 });
    expect(await store.admit(key, 0, tpm, 1000, T0 + 1)).toEqual({ limit: "tpm", retryAfterMs: 1 });
    expect(await store.admit(key, 0, tpm, 1000, T0 + 2)).toBeNull();
  });
}

/**
 * take / giveBack (leases.ts' LeasableStore): what redis-store.ts's scripts do, the memory store (the primary of
 * several workers) must do alike.
 */
function leasableSuite(open: () => Promise<LeasableStore>) {
  let store: LeasableStore;
  beforeAll(async () => {
    store = await open();
  });
  afterAll(async () => {
    await store.close();
  });

  it("takes as many request units as fit, this request's one included, and takes nothing once refused", async () => {
    const key = newKey();
    expect(await store.take(key, 10, 0, 0, 4, 0, T0)).toEqual({ denial: null, requests: 4, tokens: 0 });
    expect(await store.take(key, 10, 0, 0, 4, 0, T0)).toEqual({ denial: null, requests: 4, tokens: 0 });
    expect(await store.take(key, 10, 0, 0, 4, 0, T0)).toEqual({ denial: null, requests: 2, tokens: 0 });
    expect(await store.take(key, 10, 0, 0, 4, 0, T0)).toEqual({ denial: { limit: "rpm", retryAfterMs: 6_000 }, requests: 0, tokens: 0 });
    expect(await store.admit(key, 10, 0, 0, T0 + 5_999)).toEqual({ limit: "rpm", retryAfterMs: 1 });
    // One drains every 6 s: a take then gets that one only.
    expect(await store.take(key, 10, 0, 0, 4, 0, T0 + 6_000)).toEqual({ denial: null, requests: 1, tokens: 0 });
  });

  it("takes a request's tokens and as many extra tokens as fit", async () => {
    const key = newKey();
    expect(await store.take(key, 0, 1000, 100, 1, 500, T0)).toEqual({ denial: null, requests: 1, tokens: 500 });
    // 600 held: 400 left, 100 of them this request's own.
    expect(await store.take(key, 0, 1000, 100, 1, 500, T0)).toEqual({ denial: null, requests: 1, tokens: 300 });
    expect(await store.take(key, 0, 1000, 1, 1, 500, T0)).toEqual({ denial: { limit: "tpm", retryAfterMs: 60 }, requests: 0, tokens: 0 });
  });

  it("charges nothing of either window when one refuses", async () => {
    const key = newKey();
    expect(await store.take(key, 5, 1000, 900, 3, 0, T0)).toEqual({ denial: null, requests: 3, tokens: 0 });
    expect((await store.take(key, 5, 1000, 200, 3, 100, T0))?.denial?.limit).toBe("tpm");
    // The refused take left 2 request units and 100 tokens.
    expect(await store.take(key, 5, 1000, 100, 3, 100, T0)).toEqual({ denial: null, requests: 2, tokens: 0 });
  });

  it("gives back unused units, and the key's next requests can use them", async () => {
    const key = newKey();
    expect(await store.take(key, 10, 1000, 100, 10, 900, T0)).toEqual({ denial: null, requests: 10, tokens: 900 });
    await store.giveBack(key, 10, 1000, 4, 300, T0);
    for (let i = 0; i < 4; i++) expect(await store.admit(key, 10, 1000, 75, T0)).toBeNull();
    expect(await store.admit(key, 10, 0, 0, T0)).toEqual({ limit: "rpm", retryAfterMs: 6_000 });
    expect((await store.admit(key, 0, 1000, 1, T0))?.limit).toBe("tpm");
  });

  it("floors a window at zero when more is given back than it holds, and gives nothing to a key without windows", async () => {
    const key = newKey();
    expect((await store.take(key, 10, 0, 0, 3, 0, T0)).requests).toBe(3);
    await store.giveBack(key, 10, 0, 50, 0, T0);
    let admitted = 0;
    for (let i = 0; i < 15; i++) if ((await store.admit(key, 10, 0, 0, T0)) === null) admitted++;
    expect(admitted).toBe(10);
    const fresh = newKey();
    await store.giveBack(fresh, 1, 1000, 5, 500, T0);
    expect(await store.admit(fresh, 1, 0, 0, T0)).toBeNull();
    expect(await store.admit(fresh, 1, 0, 0, T0)).not.toBeNull();
  });

  it("drains what a lease took as time passes, as admissions do", async () => {
    const key = newKey();
    expect((await store.take(key, 6, 0, 0, 6, 0, T0)).requests).toBe(6);
    await store.giveBack(key, 6, 0, 2, 0, T0 + 10_000); // 5 left after 10 s, 2 of them given back: 3
    expect((await store.take(key, 6, 0, 0, 6, 0, T0 + 10_000)).requests).toBe(3);
  });
}

/**
 * The primary's part (primary-store.ts) served in this process: `call` runs the handler it registered, the
 * payloads structured-cloned as the IPC channel does. The windows are the real memory store.
 */
function inProcessPrimary(fails = false) {
  const handlers = new Map<string, (payload: unknown, from: number) => unknown>();
  const host: PrimaryHost = {
    env: {},
    log,
    now: () => T0,
    workers: 2,
    serve: (topic, handler) => void handlers.set(topic, handler),
    askAll: async () => [],
    onWorkerExit() {},
  };
  const part = serveSharedWindows(host);
  const link = {
    async call<T>(topic: string, payload: unknown): Promise<T> {
      if (fails) throw new Error("primary: no answer within 1000 ms");
      const handler = handlers.get(topic);
      if (!handler) throw new Error(`nothing answers "${topic}"`);
      return structuredClone(await handler(structuredClone(payload), 0)) as T;
    },
  };
  return { link, part, topics: [...handlers.keys()] };
}

describe("rate-limit windows (memory)", () => {
  windowSuite(async () => createMemoryStore({ now: () => T0 }));
  describe("take and give back", () => leasableSuite(async () => createMemoryStore({ now: () => T0 })));

  it("forgets a key's windows once they have drained", async () => {
    let clock = T0;
    const store = createMemoryStore({ now: () => clock, sweepIntervalMs: 5 });
    store.admit("a", 10, 0, 0, clock);
    store.admit("b", 0, 1000, 1000, clock);
    store.adjust("b", 1000, 2000, clock); // 3000 tokens in debt: 3 minutes to drain
    expect(store.size).toBe(2);
    clock = T0 + PERIOD_MS + 1_000;
    await Bun.sleep(20);
    expect(store.size).toBe(1);
    clock = T0 + 3 * PERIOD_MS + 1_000;
    await Bun.sleep(20);
    expect(store.size).toBe(0);
    await store.close();
  });
});

describe("rate-limit windows (the primary of several workers: primary-store.ts)", () => {
  const opened = () => {
    const { link, part } = inProcessPrimary();
    const store = createPrimaryStore(link);
    return { ...store, close: async () => (await store.close(), await part.close()) };
  };
  windowSuite(async () => opened());
  describe("take and give back", () => leasableSuite(async () => opened()));
  describe("behind local leases, as a worker uses it", () => {
    windowSuite(async () => createLeasedStore(opened(), { leaseMs: 250, now: () => T0 }));
  });

  it("serves its topics (settles summed per key, several keys in one message)", () => {
    expect(inProcessPrimary().topics.sort()).toEqual(["rate-limit.adjust", "rate-limit.adjustMany", "rate-limit.admit", "rate-limit.giveBack", "rate-limit.take"]);
  });

  it("sums a key's settles into one message, sent before that key's next admission", async () => {
    const { link, part } = inProcessPrimary();
    const calls: string[] = [];
    const counted = { call: (topic: string, payload: unknown) => (calls.push(topic), link.call(topic, payload)) };
    const store = createPrimaryStore(counted as typeof link);
    const key = newKey();
    expect(await store.admit(key, 0, 100, 100, T0)).toBeNull();
    // Two settles of 30 tokens each: the window is full again only if both reached the primary before the admission.
    const settled = [store.adjust(key, 100, -30, T0), store.adjust(key, 100, -30, T0)];
    expect(await store.admit(key, 0, 100, 60, T0)).toBeNull();
    await Promise.all(settled);
    expect(calls).toEqual(["rate-limit.admit", "rate-limit.adjust", "rate-limit.admit"]);
    // Other keys' settles go out together after the batch interval.
    await Promise.all([store.adjust(newKey(), 100, 5, T0), store.adjust(newKey(), 100, 5, T0)]);
    expect(calls.slice(3)).toEqual(["rate-limit.adjustMany"]);
    await Promise.all([store.close(), part.close()]);
  });

  it("two workers behind leases never admit more than the limit together", async () => {
    const { link, part } = inProcessPrimary();
    const [a, b] = [createLeasedStore(createPrimaryStore(link), { leaseMs: 1_000, now: () => T0 }), createLeasedStore(createPrimaryStore(link), { leaseMs: 1_000, now: () => T0 })];
    const key = newKey();
    let admitted = 0;
    for (let i = 0; i < 1_000; i++) if ((await (i % 2 ? b : a).admit(key, 600, 0, 0, T0)) === null) admitted++;
    expect(admitted).toBe(600);
    await Promise.all([a.close(), b.close(), part.close()]);
  });

  it("fails closed with 503 unavailable when the primary does not answer, as with Redis lost", async () => {
    const store = createPrimaryStore(inProcessPrimary(true).link);
    for (const attempt of [() => store.admit(newKey(), 10, 0, 0, T0), () => store.take(newKey(), 10, 0, 0, 5, 0, T0), () => store.adjust(newKey(), 10, 5, T0)]) {
      const failure = await Promise.resolve(attempt()).catch((error) => error);
      expect(failure).toBeInstanceOf(UnavailableError);
      expect(failure.status).toBe(503);
      expect(failure.headers).toEqual({ "retry-after": "2" });
    }
  });
});

/** A unique key prefix per run, removed afterwards. */
const prefix = `gateway-test:rate-limit:${crypto.randomUUID()}:`;

const describeRedis = REDIS_URL ? describe : describe.skip;
const SKIPPED = " (skipped because REDIS_URL is unset; run with REDIS_URL=redis://127.0.0.1:6379)";

describeRedis(`rate-limit windows (redis)${REDIS_URL ? "" : SKIPPED}`, () => {
  const open = () => createRedisStore({ url: REDIS_URL!, keyPrefix: prefix, commandTimeoutMs: 500, log });

  afterAll(async () => {
    const raw = new Redis(REDIS_URL!);
    const keys = await raw.keys(`${prefix}*`);
    if (keys.length > 0) await raw.del(...keys);
    await raw.quit();
  });

  windowSuite(open);
  describe("take and give back", () => leasableSuite(open));

  describe("behind local leases (leases.ts; these limits are mostly too small to lease, so the store answers)", () => {
    windowSuite(async () => createLeasedStore(await open(), { leaseMs: 250, now: () => T0 }));
  });

  it("keeps one hash per key that expires once its windows have drained", async () => {
    const store = await open();
    const key = newKey();
    expect(await store.admit(key, 10, 1000, 100, T0)).toBeNull();
    await store.adjust(key, 1000, 4900, T0); // 5000 tokens: 5 minutes of debt
    const ttl = await store.redis.pttl(key);
    expect(ttl).toBeGreaterThan(5 * PERIOD_MS);
    expect(ttl).toBeLessThanOrEqual(5 * PERIOD_MS + 1_000);
    expect(await store.redis.hgetall(key)).toEqual({ r: String(PERIOD_MS), ra: String(T0), t: String(5000 * PERIOD_MS), ta: String(T0) });
    const other = newKey();
    expect(await store.admit(other, 10, 0, 0, T0)).toBeNull();
    expect(await store.redis.pttl(other)).toBeLessThanOrEqual(PERIOD_MS + 1_000);
    expect(await store.redis.pttl(other)).toBeGreaterThan(PERIOD_MS);
    await store.close();
  });

  it("sends the settles of one key within a few ms as one command with their sum, and still sends them at close", async () => {
    const store = await open();
    const key = newKey();
    expect(await store.admit(key, 0, 1000, 100, T0)).toBeNull();
    const scriptCalls = async () => {
      const stats = await store.redis.info("commandstats");
      return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
    };
    const before = await scriptCalls();
    // 20 requests of that key settle within the batch: 10 tokens each beyond their admission charge.
    await Promise.all(Array.from({ length: 20 }, () => store.adjust(key, 1000, 10, T0)));
    expect((await scriptCalls()) - before).toBe(1);
    // The window holds 100 + 20 × 10 = 300 tokens.
    expect(await store.admit(key, 0, 1000, 701, T0)).toEqual({ limit: "tpm", retryAfterMs: 60 });
    expect(await store.admit(key, 0, 1000, 700, T0)).toBeNull();

    // A settle not yet sent goes out before the next admission of its key: that admission sees it.
    void store.adjust(key, 1000, 1, T0);
    expect(await store.admit(key, 0, 1000, 0, T0)).toEqual({ limit: "tpm", retryAfterMs: 60 });

    const other = newKey();
    expect(await store.admit(other, 0, 1000, 100, T0)).toBeNull();
    void store.adjust(other, 1000, 400, T0); // not awaited: close sends it before quitting
    await store.close();
    const reader = await open();
    expect(await reader.admit(other, 0, 1000, 501, T0)).toEqual({ limit: "tpm", retryAfterMs: 60 });
    expect(await reader.admit(other, 0, 1000, 500, T0)).toBeNull();
    await reader.close();
  });

  it("shares one count among clients (gateway instances)", async () => {
    const [a, b] = [await open(), await open()];
    const key = newKey();
    expect(await a.admit(key, 3, 0, 0, T0)).toBeNull();
    expect(await b.admit(key, 3, 0, 0, T0)).toBeNull();
    expect(await a.admit(key, 3, 0, 0, T0)).toBeNull();
    expect(await b.admit(key, 3, 0, 0, T0)).toEqual({ limit: "rpm", retryAfterMs: 20_000 });
    await Promise.all([a.close(), b.close()]);
  });

  it("admits exactly the limit under concurrent requests from several clients (atomic scripts)", async () => {
    const clients = await Promise.all([open(), open(), open()]);
    const key = newKey();
    const verdicts = await Promise.all(Array.from({ length: 90 }, (_, i) => clients[i % 3]!.admit(key, 40, 0, 0, T0)));
    expect(verdicts.filter((verdict) => verdict === null).length).toBe(40);
    await Promise.all(clients.map((client) => client.close()));
  });

  it("counts on when Redis lost its scripts (restart, SCRIPT FLUSH), requests of one turn pipelined together", async () => {
    const store = await open();
    const key = newKey();
    expect(await store.admit(key, 10, 0, 0, T0)).toBeNull();
    await store.redis.script("FLUSH");
    // Issued in one turn, so they go out in one pipeline of EVALSHA that Redis answers NOSCRIPT to.
    const verdicts = await Promise.all(Array.from({ length: 12 }, () => store.admit(key, 10, 0, 0, T0)));
    expect(verdicts.filter((verdict) => verdict === null).length).toBe(9);
    expect(verdicts.filter((verdict) => verdict?.limit === "rpm").length).toBe(3);
    await store.close();
  });

  it("fails closed and fast with 503 unavailable when Redis cannot be reached", async () => {
    const store = await createRedisStore({ url: "redis://127.0.0.1:6390", keyPrefix: prefix, commandTimeoutMs: 200, log });
    const started = performance.now();
    const failure = await Promise.resolve(store.admit(newKey(), 10, 0, 0, T0)).catch((error) => error);
    expect(failure).toBeInstanceOf(UnavailableError);
    expect(failure.status).toBe(503);
    expect(failure.code).toBe("unavailable");
    expect(performance.now() - started).toBeLessThan(500);
    expect(await Promise.resolve(store.adjust(newKey(), 10, 5, T0)).catch((error) => error)).toBeInstanceOf(UnavailableError);
    await store.close();
  });

  it("recovers by itself when Redis comes back", async () => {
    const proxy = await startTcpProxy(REDIS_URL!);
    const store = await createRedisStore({ url: `redis://127.0.0.1:${proxy.port}`, keyPrefix: prefix, commandTimeoutMs: 200, log });
    const key = newKey();
    expect(await store.admit(key, 100, 0, 0, T0)).toBeNull();

    proxy.stop();
    await Bun.sleep(50);
    const failure = await Promise.resolve(store.admit(key, 100, 0, 0, T0)).catch((error) => error);
    expect(failure).toBeInstanceOf(UnavailableError);

    proxy.start();
    // ioredis reconnects on its own (every ≤ 1 s); no restart, no new client.
    const deadline = performance.now() + 5_000;
    let verdict: unknown = failure;
    while (performance.now() < deadline) {
      verdict = await Promise.resolve(store.admit(key, 100, 0, 0, T0)).catch((error) => error);
      if (verdict === null) break;
      await Bun.sleep(50);
    }
    expect(verdict).toBeNull();
    await store.close();
    proxy.stop();
  });
});
