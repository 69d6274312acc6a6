import { describe, expect, it } from "bun:test";
import { createSharedEdgeCounter, serveEdgeCounts, TAKE_TOPIC } from "../../../src/plugins/edge-rate-limit/shared-counts.ts";
import { createSecondWindowCounter } from "../../../src/core/window-counter.ts";
import type { PrimaryHost } from "../../../src/core/workers.ts";
import { createLogger } from "../../../src/core/log.ts";

const T0 = 1_800_000_000_000; // a second's start

/**
 * The primary's part served in this process, one clock for it and the workers: `call` runs the handler it
 * registered with structured-cloned payloads, as the IPC channel does, and counts the calls.
 */
function inProcessPrimary(limit: number, workers: number) {
  const clock = { now: T0 };
  const handlers = new Map<string, (payload: unknown, from: number) => unknown>();
  const host: PrimaryHost = {
    env: {},
    log: createLogger("test", { silent: true }),
    now: () => clock.now,
    workers,
    serve: (topic, handler) => void handlers.set(topic, handler),
    askAll: async () => [],
    onWorkerExit() {},
  };
  serveEdgeCounts(host, limit);
  let calls = 0;
  let down = false;
  const link = (index: number) => ({
    index,
    count: workers,
    async call<T>(topic: string, payload: unknown): Promise<T> {
      calls += 1;
      if (down) throw new Error("primary: no answer within 500 ms");
      return structuredClone(await handlers.get(topic)!(structuredClone(payload), index)) as T;
    },
  });
  const worker = (index: number, fallback = createSecondWindowCounter(limit, () => clock.now)) =>
    createSharedEdgeCounter(link(index), limit, { fallback, now: () => clock.now });
  return {
    clock,
    worker,
    topics: () => [...handlers.keys()],
    calls: () => calls,
    setDown: (value: boolean) => void (down = value),
  };
}

/** `count` requests of `ip` through `admit`, all at once: how many were admitted. */
async function admitted(admit: (ip: string) => boolean | Promise<boolean>, ip: string, count: number): Promise<number> {
  const answers = await Promise.all(Array.from({ length: count }, () => admit(ip)));
  return answers.filter(Boolean).length;
}

describe("edge-rate-limit across workers (the primary's count, leased)", () => {
  it("serves its one topic", () => {
    expect(inProcessPrimary(60, 2).topics()).toEqual([TAKE_TOPIC]);
  });

  it("never admits more than the limit in a second over all workers, and admits it all when asked for more", async () => {
    for (const [limit, workers] of [[10, 2], [60, 2], [60, 8], [1_000, 4]] as const) {
      const primary = inProcessPrimary(limit, workers);
      const counters = Array.from({ length: workers }, (_, i) => primary.worker(i));
      // Every worker asks for far more than the limit, interleaved.
      const perWorker = await Promise.all(counters.map((admit) => admitted(admit, "203.0.113.7", limit)));
      const total = perWorker.reduce((a, b) => a + b, 0);
      expect(total).toBeLessThanOrEqual(limit);
      // Units left in other workers' leases are the only shortfall: at most (lease - 1) per worker.
      const lease = Math.max(1, Math.floor(limit / (8 * workers)));
      expect(total).toBeGreaterThanOrEqual(limit - workers * (lease - 1));
      // Another address has its own count.
      expect(await admitted(counters[0]!, "198.51.100.2", 1)).toBe(1);
    }
  });

  it("admits from a lease at once, without a round trip, and asks again only when it is used up", async () => {
    const primary = inProcessPrimary(1_000, 2); // leases of 62 units
    const admit = primary.worker(0);
    expect(await admit("203.0.113.7")).toBe(true);
    expect(primary.calls()).toBe(1);
    for (let i = 0; i < 61; i++) expect(admit("203.0.113.7")).toBe(true); // synchronous: no promise
    expect(primary.calls()).toBe(1);
    expect(await admit("203.0.113.7")).toBe(true);
    expect(primary.calls()).toBe(2);
  });

  it("asks once for requests of one address that arrive together", async () => {
    const primary = inProcessPrimary(1_000, 2);
    const admit = primary.worker(0);
    expect(await admitted(admit, "203.0.113.7", 40)).toBe(40);
    expect(primary.calls()).toBe(1);
  });

  it("refuses the rest of a second without asking once the primary granted none, and admits again the next second", async () => {
    const primary = inProcessPrimary(10, 2);
    const [first, second] = [primary.worker(0), primary.worker(1)];
    expect(await admitted(first, "203.0.113.7", 10)).toBe(10);
    expect(await second("203.0.113.7")).toBe(false);
    const calls = primary.calls();
    for (let i = 0; i < 100; i++) expect(second("203.0.113.7")).toBe(false);
    expect(primary.calls()).toBe(calls);
    primary.clock.now += 1_000;
    expect(await second("203.0.113.7")).toBe(true);
  });

  it("counts in this worker alone while the primary does not answer, then shares again", async () => {
    const primary = inProcessPrimary(5, 2);
    const admit = primary.worker(0);
    primary.setDown(true);
    expect(await admitted(admit, "203.0.113.7", 8)).toBe(5); // the worker's own one-second count
    primary.setDown(false);
    primary.clock.now += 1_000;
    const other = primary.worker(1);
    expect((await admitted(admit, "203.0.113.7", 4)) + (await admitted(other, "203.0.113.7", 4))).toBe(5);
  });
});
