import { afterAll, describe, expect, it } from "bun:test";
import type { Deployment } from "../../../src/core/deployments.ts";
import { createLogger } from "../../../src/core/log.ts";
import { HealthKeeper } from "../../../src/plugins/upstream-health/keeper.ts";
import { RedisSync } from "../../../src/plugins/upstream-health/redis-sync.ts";

const REDIS_URL = process.env.REDIS_URL;
const A: Deployment = { name: "a", weight: 1, endpoint: () => ({ url: "https://a.example", headers: new Headers() }) };
const B: Deployment = { name: "b", weight: 1, endpoint: () => ({ url: "https://b.example", headers: new Headers() }) };

function instance(prefix: string) {
  let sync: RedisSync | undefined;
  const keeper = new HealthKeeper({
    strategy: "priority",
    breaker: { failures: 2, cooldown_ms: 30_000 },
    maxRetryAfterMs: 60_000,
    now: Date.now,
    onTransition: (t) => sync?.publish(t),
  });
  sync = new RedisSync(keeper, { url: REDIS_URL!, keyPrefix: prefix, log: createLogger("test", { silent: true }), now: Date.now });
  return { keeper, sync };
}

async function until(check: () => boolean, ms: number): Promise<number> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error("not within time");
    await Bun.sleep(10);
  }
  return Date.now() - start;
}

describe.skipIf(!REDIS_URL)("upstream-health redis sync", () => {
  const prefix = `test:upstream-health:${crypto.randomUUID()}:`;
  const one = instance(prefix);
  const two = instance(prefix);
  afterAll(async () => {
    await one.sync.close();
    await two.sync.close();
  });

  it("two instances on one Redis see each other's breaker opening, Retry-After and closing within a second", async () => {
    await Promise.all([one.sync.start(), two.sync.start()]);
    expect(two.keeper.order("p", [A, B], "").map((d) => d.name)).toEqual(["a", "b"]);
    for (let i = 0; i < 2; i++) one.keeper.finished("p", A, { ok: false, errorClass: "server_error", latencyMs: 1 });
    expect(one.keeper.order("p", [A, B], "").map((d) => d.name)).toEqual(["b"]);
    await until(() => two.keeper.order("p", [A, B], "").length === 1, 1_000);
    expect(two.keeper.inspect("p", A).breaker).toBe("open");

    one.keeper.finished("p", B, { ok: false, errorClass: "rate_limited", retryAfterMs: 5_000, latencyMs: 1 });
    await until(() => two.keeper.order("p", [A, B], "").length === 0, 1_000);
    expect(two.keeper.nextAvailableAt("p", [B])).toBeGreaterThan(Date.now() + 3_000);

    // An attempt on `a` that started before its breaker opened answers: `a` is closed again everywhere.
    two.keeper.finished("p", A, { ok: true, latencyMs: 1 });
    await until(() => one.keeper.inspect("p", A).breaker === "closed", 1_000);
  });

  it("an instance started later reads the breakers and waits already stored", async () => {
    for (let i = 0; i < 2; i++) one.keeper.finished("p", A, { ok: false, errorClass: "server_error", latencyMs: 1 });
    await Bun.sleep(100); // written in the background
    const late = instance(prefix);
    try {
      await late.sync.start();
      expect(late.keeper.order("p", [A, B], "").map((d) => d.name)).toEqual([]); // a open, b waiting (the Retry-After above)
      expect(late.keeper.inspect("p", A).breaker).toBe("open");
    } finally {
      await late.sync.close();
    }
  });
});

describe("upstream-health redis sync, Redis down", () => {
  it("keeps working locally", async () => {
    const keeper = new HealthKeeper({ strategy: "priority", breaker: { failures: 1, cooldown_ms: 1_000 }, maxRetryAfterMs: 1_000, now: Date.now });
    const lines: string[] = [];
    const log = { ...createLogger("test", { silent: true }), warn: (message: string) => lines.push(message) };
    const sync = new RedisSync(keeper, { url: "redis://127.0.0.1:1", keyPrefix: "x:", log, now: Date.now });
    await sync.start();
    keeper.finished("p", A, { ok: false, errorClass: "connection", latencyMs: 1 });
    sync.publish({ provider: "p", deployment: "a", openUntil: Date.now() + 1_000 });
    expect(keeper.order("p", [A, B], "").map((d) => d.name)).toEqual(["b"]);
    await Bun.sleep(50);
    expect(lines.length).toBe(1);
    await sync.close();
  });
});
