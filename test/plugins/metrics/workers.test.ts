import { describe, expect, it } from "bun:test";
import { MetricsRegistry } from "../../../src/plugins/metrics/registry.ts";
import { MoneyMetrics, STORE_GAUGES } from "../../../src/plugins/metrics/money-metrics.ts";
import { RuntimeMetrics } from "../../../src/plugins/metrics/runtime-metrics.ts";
import { serveMergedMetrics, mergedMetrics, type CollectPayload } from "../../../src/plugins/metrics/workers.ts";
import { createLogger } from "../../../src/core/log.ts";
import type { PrimaryHost, WorkerLink } from "../../../src/core/workers.ts";

const log = createLogger("test", { silent: true });

/** One worker's registry, with the families and gauges the plugin makes. */
function worker(inFlight: number, holds: number) {
  const registry = new MetricsRegistry();
  const requests = registry.counter("gateway_requests_total", "requests", ["ingress"]);
  const durations = registry.histogram("gateway_request_duration_seconds", "durations", ["ingress"], [0.1, 1]);
  const runtime = new RuntimeMetrics(registry, () => inFlight);
  const money = new MoneyMetrics(registry, () => ({ creditTotalsByKind: async () => ({ card: 5_000 }), holdsOutstanding: async () => ({ count: holds, amount: holds * 10 }) }), log);
  return { registry, requests, durations, runtime, money };
}

/**
 * The primary's part and the workers' answers in this process, over structured clones (as the IPC channel
 * carries them): the merge itself is prom-client's, with each metric's aggregator.
 */
function wire(workers: ReturnType<typeof worker>[]) {
  const serve = new Map<string, (payload: unknown, from: number) => unknown>();
  const answers: ((payload: unknown) => unknown)[] = [];
  const host: PrimaryHost = {
    env: {},
    log,
    now: Date.now,
    workers: workers.length,
    serve: (topic, handler) => void serve.set(topic, handler),
    askAll: async <T>(topic: string, payload: unknown) => {
      expect(topic).toBe("metrics.local");
      return Promise.all(answers.map(async (answer) => structuredClone(await answer(payload)) as T));
    },
    onWorkerExit() {},
  };
  serveMergedMetrics(host);
  return workers.map((one, index) => {
    const link = {
      index,
      count: workers.length,
      call: async <T>(topic: string, payload: unknown) => structuredClone(await serve.get(topic)!(structuredClone(payload), index)) as T,
      publish() {},
      subscribe() {},
      answer: (topic: string, handler: (payload: unknown) => unknown) => {
        expect(topic).toBe("metrics.local");
        answers.push(handler);
      },
    } as WorkerLink;
    return mergedMetrics(link, () => one.registry.json(STORE_GAUGES, true));
  });
}

const line = (text: string, prefix: string) => text.split("\n").find((row) => row.startsWith(prefix + " "));

describe("metrics merged across workers (workers.ts)", () => {
  it("sums counters, histograms and in-flight requests; store gauges once, from the scraped worker; counts the workers that answered", async () => {
    const [a, b] = [worker(3, 7), worker(4, 7)];
    const scrape = wire([a, b]);
    a.requests.get1("openai").inc(5);
    b.requests.get1("openai").inc(2);
    b.requests.get1("anthropic").inc(1);
    a.durations.get1("openai").observe(0.05);
    b.durations.get1("openai").observe(0.5);
    b.durations.get1("openai").observe(5);

    // Worker b is scraped: it reads the store, a leaves its store gauges out.
    await b.money.refresh();
    const text = await scrape[1]!((await b.registry.json(STORE_GAUGES, false)) satisfies CollectPayload["store"]);

    expect(line(text, 'gateway_requests_total{ingress="openai"}')).toEndWith(" 7");
    expect(line(text, 'gateway_requests_total{ingress="anthropic"}')).toEndWith(" 1");
    expect(line(text, 'gateway_request_duration_seconds_bucket{ingress="openai",le="0.1"}')).toEndWith(" 1");
    expect(line(text, 'gateway_request_duration_seconds_bucket{ingress="openai",le="1"}')).toEndWith(" 2");
    expect(line(text, 'gateway_request_duration_seconds_bucket{ingress="openai",le="+Inf"}')).toEndWith(" 3");
    expect(line(text, 'gateway_request_duration_seconds_count{ingress="openai"}')).toEndWith(" 3");
    expect(line(text, "gateway_requests_in_flight")).toBe("gateway_requests_in_flight 7");
    expect(line(text, "gateway_workers")).toBe("gateway_workers 2");
    // Read once from the store, not once per worker.
    expect(line(text, "gateway_holds_outstanding")).toBe("gateway_holds_outstanding 7");
    expect(line(text, 'gateway_credits_nano_usd{kind="card"}')).toBe('gateway_credits_nano_usd{kind="card"} 5000');
    expect(text.match(/^gateway_holds_outstanding /gm)?.length).toBe(1);
    expect(line(text, "process_start_time_seconds")).toBeDefined();
    expect(Number(line(text, "process_resident_memory_bytes")!.split(" ")[1])).toBeGreaterThan(0);
    a.runtime.close();
    b.runtime.close();
  });

  it("merges what is not a per-worker share by max, min or once, as the README's table says", async () => {
    const one = worker(0, 0);
    const aggregators = Object.fromEntries((await one.registry.json(new Set(), true)).map((metric) => [metric.name, metric.aggregator]));
    expect(aggregators).toMatchObject({
      gateway_requests_total: "sum",
      gateway_request_duration_seconds: "sum",
      gateway_requests_in_flight: "sum",
      gateway_workers: "sum",
      process_resident_memory_bytes: "sum",
      gateway_event_loop_lag_seconds: "max",
      gateway_event_loop_lag_max_seconds: "max",
      process_start_time_seconds: "min",
      gateway_credits_nano_usd: "first",
      gateway_holds_outstanding: "first",
      gateway_holds_outstanding_nano_usd: "first",
    });
    one.runtime.close();
  });
});
