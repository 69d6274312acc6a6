import { afterAll, describe, expect, it } from "bun:test";
import Redis from "ioredis";
import { createRedisStore } from "../../../src/plugins/rate-limit/redis-store.ts";
import { createLeasedStore, type LeasableStore } from "../../../src/plugins/rate-limit/leases.ts";
import type { Denial } from "../../../src/plugins/rate-limit/gcra.ts";
import { UnavailableError } from "../../../src/core/errors.ts";
import { createLogger } from "../../../src/core/log.ts";
import { startTcpProxy } from "./tcp-proxy.ts";

/**
 * Local leases in front of the Redis windows (real Redis). Every test passes its clock to each call; the
 * stores' own clock (`now`, read by the sweeper that ends idle leases) is `clock`.
 */
const REDIS_URL = process.env.REDIS_URL;
const T0 = 1_800_000_000_000;
const log = createLogger("test", { silent: true });
const prefix = `gateway-test:rate-limit-leases:${crypto.randomUUID()}:`;
let keySeq = 0;
const newKey = () => `key_${++keySeq}`;
let clock = T0;
const now = () => clock;

/** A Redis store that counts the round trips the lease layer makes to it. */
async function counted(url = REDIS_URL!) {
  const store = await createRedisStore({ url, keyPrefix: prefix, commandTimeoutMs: 200, log });
  const calls = { admit: 0, take: 0, giveBack: 0 };
  const wrapped: LeasableStore = {
    admit: (...args) => (calls.admit++, store.admit(...args)),
    take: (...args) => (calls.take++, store.take(...args)),
    giveBack: (...args) => (calls.giveBack++, store.giveBack(...args)),
    adjust: (...args) => store.adjust(...args),
    close: () => store.close(),
  };
  return { store, calls, wrapped };
}

async function leased(leaseMs: number, url?: string) {
  const inner = await counted(url);
  return { ...inner, leased: createLeasedStore(inner.wrapped, { leaseMs, now }) };
}

const settle = async (verdict: Denial | null | Promise<Denial | null>) => await verdict;

describe.skipIf(!REDIS_URL)(`rate-limit leases${REDIS_URL ? "" : " (skipped because REDIS_URL is unset)"}`, () => {
  afterAll(async () => {
    const raw = new Redis(REDIS_URL!);
    const keys = await raw.keys(`${prefix}*`);
    if (keys.length > 0) await raw.del(...keys);
    await raw.quit();
  });

  it("two instances sharing one Redis never admit more than the limit together, in far fewer round trips", async () => {
    clock = T0;
    const [a, b] = [await leased(1_000), await leased(1_000)]; // rpm 600 → leases of 10
    const plain = await createRedisStore({ url: REDIS_URL!, keyPrefix: prefix, commandTimeoutMs: 200, log });
    const key = newKey();
    let admitted = 0;
    let lastDenial: Denial | null = null;
    for (let i = 0; i < 1_000; i++) {
      const verdict = await settle((i % 2 ? b : a).leased.admit(key, 600, 0, 0, T0));
      if (verdict === null) admitted++;
      else lastDenial = verdict;
    }
    expect(admitted).toBe(600); // all of the minute's burst, not one more
    // The denial (and its retry-after) comes from Redis: one request drains in 100 ms.
    expect(lastDenial).toEqual({ limit: "rpm", retryAfterMs: 100 });
    expect(await plain.admit(key, 600, 0, 0, T0)).toEqual({ limit: "rpm", retryAfterMs: 100 });
    // 600 admissions took about 60 leases; the 400 refused ones each asked Redis.
    expect(a.calls.take + b.calls.take).toBeLessThanOrEqual(60 + 400 + 2);
    expect(a.calls.take + b.calls.take + a.calls.admit + b.calls.admit).toBeLessThan(1_000 - 500);

    // Over time: 1,000 more admissions, 20 ms apart (20 s), never more than GCRA allows (10 per second drain).
    const other = newKey();
    let overTime = 0;
    const start = T0 + 120_000;
    for (let i = 0; i < 1_000; i++) {
      clock = start + i * 20;
      if ((await settle((i % 2 ? b : a).leased.admit(other, 600, 0, 0, clock))) === null) overTime++;
    }
    const elapsed = 999 * 20;
    expect(overTime).toBeLessThanOrEqual(600 + Math.floor((600 * elapsed) / 60_000));
    expect(overTime).toBeGreaterThanOrEqual(600 + Math.floor((600 * elapsed) / 60_000) - 20); // at most two leases' worth left unused
    await Promise.all([a.leased.close(), b.leased.close(), plain.close()]);
  });

  it("sends every request of a small limit (fewer than 2 per lease) to Redis, exact across instances", async () => {
    clock = T0;
    const [a, b] = [await leased(1_000), await leased(1_000)]; // rpm 60 → 1 per lease: no lease
    const key = newKey();
    let admitted = 0;
    for (let i = 0; i < 100; i++) if ((await settle((i % 2 ? b : a).leased.admit(key, 60, 0, 0, T0))) === null) admitted++;
    expect(admitted).toBe(60);
    expect(a.calls.admit + b.calls.admit).toBe(100);
    expect(a.calls.take + b.calls.take).toBe(0);
    expect(a.leased.leases + b.leased.leases).toBe(0);
    await Promise.all([a.leased.close(), b.leased.close()]);
  });

  it("admits from a live lease synchronously, and gives back its leftovers (requests and tokens) when it ends", async () => {
    clock = T0;
    const a = await leased(100); // rpm 6000, tpm 60,000 → leases of 10 requests and 100 tokens
    const plain = await createRedisStore({ url: REDIS_URL!, keyPrefix: prefix, commandTimeoutMs: 200, log });
    const key = newKey();
    expect(await a.leased.admit(key, 6_000, 60_000, 10, T0)).toBeNull(); // took 10 requests, 10 + 100 tokens
    expect(a.leased.leases).toBe(1);
    expect(a.leased.admit(key, 6_000, 60_000, 10, T0)).toBeNull(); // from the lease: no promise, no round trip
    expect(a.calls).toEqual({ admit: 0, take: 1, giveBack: 0 });

    // Another instance sees them taken: 5,990 requests and 59,890 tokens are left at T0.
    expect(await plain.admit(key, 0, 60_000, 59_890, T0)).toBeNull();
    expect(await plain.admit(key, 0, 60_000, 1, T0)).toEqual({ limit: "tpm", retryAfterMs: 1 });

    // The lease ends after 100 ms; the sweeper gives back 8 requests and 90 tokens.
    clock = T0 + 100;
    // The sweep runs every 100 ms of real time: wait for its give-back (a deadline, not a fixed sleep).
    for (const deadline = performance.now() + 5_000; (a.leased.leases > 0 || a.calls.giveBack === 0) && performance.now() < deadline; ) await Bun.sleep(20);
    expect(a.leased.leases).toBe(0);
    expect(a.calls.giveBack).toBe(1);
    // In 100 ms 100 tokens drained, plus the 90 given back.
    expect(await plain.admit(key, 0, 60_000, 190, T0 + 100)).toBeNull();
    expect(await plain.admit(key, 0, 60_000, 1, T0 + 100)).not.toBeNull();
    const hash = await plain.redis.hgetall(key);
    // Requests: 10 taken at T0, 10 drained by T0 + 100, 8 given back: floored at zero.
    expect(hash.r).toBe("0");
    await Promise.all([a.leased.close(), plain.close()]);
  });

  it("gives a lease's leftovers back at close, and the next instance can use them", async () => {
    clock = T0;
    const a = await leased(1_000);
    const key = newKey();
    for (let i = 0; i < 595; i++) expect(await a.leased.admit(key, 600, 0, 0, T0)).toBeNull();
    // 600 taken (the last lease took what was left), 595 used.
    await a.leased.close();
    const b = await leased(1_000);
    let admitted = 0;
    for (let i = 0; i < 10; i++) if ((await b.leased.admit(key, 600, 0, 0, T0)) === null) admitted++;
    expect(admitted).toBe(5);
    await b.leased.close();
  });

  it("sends settles to Redis as before", async () => {
    clock = T0;
    const a = await leased(1_000);
    const plain = await createRedisStore({ url: REDIS_URL!, keyPrefix: prefix, commandTimeoutMs: 200, log });
    const key = newKey();
    expect(await a.leased.admit(key, 6_000, 600_000, 100, T0)).toBeNull(); // lease: 100 + 10,000 tokens
    await a.leased.adjust(key, 600_000, 400_000, T0);
    // 410,100 tokens taken or reported.
    expect(await plain.admit(key, 0, 600_000, 189_900, T0)).toBeNull();
    expect(await plain.admit(key, 0, 600_000, 1, T0)).not.toBeNull();
    await Promise.all([a.leased.close(), plain.close()]);
  });

  it("with Redis down, serves a key from its live lease until the lease ends, then 503; keys without one fail at once", async () => {
    clock = T0;
    const proxy = await startTcpProxy(REDIS_URL!);
    const a = await leased(1_000, `redis://127.0.0.1:${proxy.port}`);
    const [key, small] = [newKey(), newKey()];
    expect(await a.leased.admit(key, 600, 0, 0, T0)).toBeNull(); // a lease of 10
    expect(await a.leased.admit(small, 30, 0, 0, T0)).toBeNull(); // no lease
    proxy.stop();
    await Bun.sleep(50);

    const unavailable = async (verdict: unknown) => {
      const error: any = await Promise.resolve(verdict).catch((caught) => caught);
      expect(error).toBeInstanceOf(UnavailableError);
      expect(error.status).toBe(503);
    };
    await unavailable(a.leased.admit(small, 30, 0, 0, T0));
    for (let i = 0; i < 5; i++) expect(a.leased.admit(key, 600, 0, 0, T0 + 999)).toBeNull();
    // The lease ends at T0 + 1000 (4 requests still in it): then fail closed.
    await unavailable(a.leased.admit(key, 600, 0, 0, T0 + 1_000));
    await unavailable(a.leased.admit(key, 600, 0, 0, T0 + 1_000));

    // And a lease used up during the outage fails closed at its next request.
    proxy.start();
    const deadline = performance.now() + 5_000;
    let verdict: unknown;
    while (performance.now() < deadline) {
      verdict = await Promise.resolve(a.leased.admit(key, 600, 0, 0, T0 + 2_000)).catch((error) => error);
      if (verdict === null) break;
      await Bun.sleep(50);
    }
    expect(verdict).toBeNull();
    proxy.stop();
    await Bun.sleep(50);
    for (let i = 0; i < 9; i++) expect(a.leased.admit(key, 600, 0, 0, T0 + 2_000)).toBeNull();
    await unavailable(a.leased.admit(key, 600, 0, 0, T0 + 2_000));
    await a.leased.close();
  });
});
