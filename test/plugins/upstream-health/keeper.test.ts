import { describe, expect, it } from "bun:test";
import type { Deployment } from "../../../src/core/deployments.ts";
import { HealthKeeper, type HealthKeeperOptions, type Transition } from "../../../src/plugins/upstream-health/keeper.ts";

function deployment(name: string, weight = 1): Deployment {
  return { name, weight, endpoint: () => ({ url: `https://${name}.example`, headers: new Headers() }) };
}

const A = deployment("a");
const B = deployment("b");
const C = deployment("c");
const ALL = [A, B, C];

function setup(options: Partial<HealthKeeperOptions> = {}) {
  const clock = { now: 1_000_000 };
  const transitions: Transition[] = [];
  const keeper = new HealthKeeper({
    strategy: "priority",
    breaker: { failures: 3, cooldown_ms: 30_000 },
    maxRetryAfterMs: 60_000,
    now: () => clock.now,
    onTransition: (t) => transitions.push(t),
    ...options,
  });
  const fail = (d: Deployment, errorClass: any = "server_error", retryAfterMs?: number) => {
    keeper.started("p", d);
    keeper.finished("p", d, { ok: false, errorClass, retryAfterMs, latencyMs: 5 });
  };
  const succeed = (d: Deployment, latencyMs = 10) => {
    keeper.started("p", d);
    keeper.finished("p", d, { ok: true, latencyMs });
  };
  const names = (sticky = "") => keeper.order("p", ALL, sticky).map((d) => d.name);
  return { clock, keeper, transitions, fail, succeed, names };
}

describe("upstream-health keeper", () => {
  it("opens a breaker after N consecutive failures and skips the deployment while it is open", () => {
    const { keeper, fail, names, transitions, clock } = setup();
    fail(A);
    fail(A);
    expect(names()).toEqual(["a", "b", "c"]);
    fail(A);
    expect(names()).toEqual(["b", "c"]);
    expect(transitions).toEqual([{ provider: "p", deployment: "a", openUntil: clock.now + 30_000 }]);
    expect(keeper.inspect("p", A).breaker).toBe("open");
  });

  it("a success resets the consecutive count; client errors, broken streams and 429s never count", () => {
    const { fail, succeed, names } = setup();
    fail(A);
    fail(A);
    succeed(A);
    fail(A);
    fail(A);
    fail(A, "client_error");
    fail(A, "broken_stream");
    fail(A, "rate_limited");
    expect(names()).toEqual(["a", "b", "c"]);
  });

  it("an auth failure marks the deployment down at once", () => {
    const { fail, names } = setup();
    fail(B, "auth");
    expect(names()).toEqual(["a", "c"]);
  });

  it("after the cooldown lets exactly one probe through, closes on its success", () => {
    const { keeper, fail, succeed, clock, transitions } = setup();
    for (let i = 0; i < 3; i++) fail(A);
    clock.now += 29_999;
    expect(keeper.order("p", [A], "")).toEqual([]);
    clock.now += 1;
    expect(keeper.order("p", [A], "").map((d) => d.name)).toEqual(["a"]);
    expect(keeper.inspect("p", A).breaker).toBe("half_open");
    keeper.started("p", A);
    expect(keeper.order("p", [A], "")).toEqual([]); // the probe is out
    expect(keeper.order("p", ALL, "").map((d) => d.name)).toEqual(["b", "c"]);
    keeper.finished("p", A, { ok: true, latencyMs: 10 });
    expect(keeper.inspect("p", A).breaker).toBe("closed");
    expect(transitions.at(-1)).toEqual({ provider: "p", deployment: "a", openUntil: 0 });
    expect(keeper.order("p", ALL, "").map((d) => d.name)).toEqual(["a", "b", "c"]);
    succeed(A);
  });

  it("re-opens when the probe fails", () => {
    const { keeper, fail, clock } = setup();
    for (let i = 0; i < 3; i++) fail(A);
    clock.now += 30_000;
    expect(keeper.order("p", [A], "")).toHaveLength(1);
    fail(A);
    expect(keeper.inspect("p", A).breaker).toBe("open");
    expect(keeper.order("p", [A], "")).toEqual([]);
    expect(keeper.nextAvailableAt("p", [A])).toBe(clock.now + 30_000);
  });

  it("a probe handed out but never started lapses and is handed out again", () => {
    const { keeper, fail, clock } = setup();
    for (let i = 0; i < 3; i++) fail(A);
    clock.now += 30_000;
    expect(keeper.order("p", [A], "")).toHaveLength(1);
    expect(keeper.order("p", [A], "")).toHaveLength(0);
    clock.now += 5_000;
    expect(keeper.order("p", [A], "")).toHaveLength(1);
  });

  it("skips a deployment told to wait (Retry-After) until then, capped by max_retry_after_ms", () => {
    const { keeper, fail, clock, names, transitions } = setup({ maxRetryAfterMs: 10_000 });
    fail(A, "rate_limited", 3_000);
    expect(names()).toEqual(["b", "c"]);
    expect(keeper.nextAvailableAt("p", [A])).toBe(clock.now + 3_000);
    clock.now += 3_000;
    expect(names()).toEqual(["a", "b", "c"]);
    fail(B, "rate_limited", 600_000);
    expect(keeper.nextAvailableAt("p", [B])).toBe(clock.now + 10_000);
    expect(transitions.at(-1)).toEqual({ provider: "p", deployment: "b", waitUntil: clock.now + 10_000 });
  });

  it("nextAvailableAt: undefined while one may be tried, else the earliest of cooldown ends and waits", () => {
    const { keeper, fail, clock } = setup();
    expect(keeper.nextAvailableAt("p", ALL)).toBeUndefined();
    fail(A, "auth");
    fail(B, "rate_limited", 5_000);
    expect(keeper.nextAvailableAt("p", ALL)).toBeUndefined();
    fail(C, "overloaded", 40_000);
    fail(C, "auth");
    expect(keeper.nextAvailableAt("p", ALL)).toBe(clock.now + 5_000);
    expect(keeper.order("p", ALL, "")).toEqual([]);
  });

  it("with one deployment returns the same cached array each time", () => {
    const { keeper } = setup();
    const first = keeper.order("p", [A], "");
    expect(first).toEqual([A]);
    expect(keeper.order("p", [A], "k")).toBe(first);
  });

  it("round robin takes turns", () => {
    const { names } = setup({ strategy: "round_robin" });
    expect([names(), names(), names(), names()]).toEqual([
      ["a", "b", "c"],
      ["b", "c", "a"],
      ["c", "a", "b"],
      ["a", "b", "c"],
    ]);
  });

  it("least in flight puts the least busy first (ties in list order)", () => {
    const { keeper, names } = setup({ strategy: "least_in_flight" });
    keeper.started("p", A);
    keeper.started("p", A);
    keeper.started("p", B);
    expect(names()).toEqual(["c", "b", "a"]);
    keeper.finished("p", A, { ok: true, latencyMs: 1 });
    keeper.finished("p", A, { ok: true, latencyMs: 1 });
    expect(names()).toEqual(["a", "c", "b"]);
  });

  it("weighted picks the first by weight, the rest in list order", () => {
    let r = 0;
    const heavy = [deployment("x", 1), deployment("y", 3)];
    const { keeper } = setup({ strategy: "weighted", random: () => r });
    const first = () => keeper.order("p", heavy, "")[0]!.name;
    r = 0.2;
    expect(first()).toBe("x");
    r = 0.3;
    expect(first()).toBe("y");
    r = 0.99;
    expect(keeper.order("p", heavy, "").map((d) => d.name)).toEqual(["y", "x"]);
  });

  it("a sticky key keeps to its last deployment while it is healthy", () => {
    const { names, fail, clock, succeed } = setup({ strategy: "round_robin" });
    expect(names("k1")[0]).toBe("a");
    expect(names("k2")[0]).toBe("b");
    expect(names("k1")[0]).toBe("a");
    expect(names("k1")[0]).toBe("a");
    expect(names("k2")[0]).toBe("b");
    expect(names()[0]).not.toBe(undefined);
    fail(A, "auth");
    const moved = names("k1")[0];
    expect(moved).not.toBe("a");
    expect(names("k1")[0]).toBe(moved!); // sticks to the new one
    clock.now += 30_000;
    names(""); // hands out the probe
    succeed(A);
    expect(names("k1")[0]).toBe(moved!);
  });

  it("window mode: failures within window_ms, at the configured rate", () => {
    const { fail, succeed, names, clock } = setup({ breaker: { failures: 2, window_ms: 10_000, failure_rate: 0.5, cooldown_ms: 1_000 } });
    succeed(A);
    succeed(A);
    succeed(A);
    fail(A);
    fail(A); // 2 of 5: under the rate
    expect(names()).toEqual(["a", "b", "c"]);
    fail(A); // 3 of 6
    expect(names()).toEqual(["b", "c"]);
    clock.now += 20_000;
    names();
    succeed(A);
    fail(B);
    clock.now += 10_000;
    fail(B); // a new window: 1 failure
    expect(names()).toEqual(["a", "b", "c"]);
  });

  it("applies another instance's transitions", () => {
    const { keeper, clock, names } = setup();
    names();
    keeper.apply({ provider: "p", deployment: "b", openUntil: clock.now + 1_000 });
    keeper.apply({ provider: "p", deployment: "c", waitUntil: clock.now + 500 });
    expect(names()).toEqual(["a"]);
    keeper.apply({ provider: "p", deployment: "b", openUntil: 0 });
    expect(names()).toEqual(["a", "b"]);
  });

  it("keeps another instance's transitions for deployments it has not asked for yet, and applies them on first sight", () => {
    const { keeper, clock, names } = setup();
    keeper.apply({ provider: "p", deployment: "a", openUntil: clock.now + 1_000 });
    keeper.apply({ provider: "p", deployment: "b", waitUntil: clock.now + 500 });
    expect(names()).toEqual(["c"]);
    clock.now += 600;
    expect(names()).toEqual(["b", "c"]);
  });

  it("keeps stats: errors by class and the p50 of successful latencies", () => {
    const { keeper, fail, succeed, clock } = setup();
    fail(A, "timeout");
    fail(A, "rate_limited");
    succeed(A, 10);
    succeed(A, 30);
    succeed(A, 20);
    const state = keeper.inspect("p", A);
    expect(state.stats.errors(clock.now)).toEqual({ timeout: 1, rate_limited: 1 });
    expect(state.stats.p50()).toBe(20);
    expect(state.stats.errors(clock.now + 5 * 60_000)).toEqual({});
    expect(state.inFlight).toBe(0);
  });
});
