import { monitorEventLoopDelay } from "node:perf_hooks";
import type { MetricsRegistry } from "./registry.ts";

/** Group-commit write latency, seconds (SQLite: a local transaction; Postgres: a round trip and its commit). */
const COMMIT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * The process: prom-client's process metrics that hold under Bun, requests in flight, event-loop lag and the
 * store's commit latency. The lag comes from node:perf_hooks' monitorEventLoopDelay, which works under Bun (a 200 ms
 * block shows as a 0.2 s maximum): a timer every `resolution` ms, nothing per request.
 */
export class RuntimeMetrics {
  private readonly lag: ReturnType<typeof monitorEventLoopDelay>;
  /** Feeds gateway_store_commit_seconds: the storage's onCommit listener. */
  readonly commitObserver: (seconds: number, rows: number) => void;

  constructor(registry: MetricsRegistry, inFlight: () => number | undefined) {
    registry.processMetrics();
    registry.gauge("gateway_requests_in_flight", "Requests in the pipeline now (a stream until its last byte).", [], (gauge) => {
      const value = inFlight();
      if (value !== undefined) gauge.set(value);
    });
    this.lag = monitorEventLoopDelay({ resolution: 20 });
    this.lag.enable();
    const lag = this.lag;
    // Both read the delays since the previous scrape, then the window starts again (the lag of the last interval).
    // Registered after the p99 gauge, whose collect sets it: the exposition reads the gauges in registration order.
    let maxGauge: { set(value: number): void } | undefined;
    registry.gauge(
      "gateway_event_loop_lag_seconds",
      "Event-loop delay since the previous scrape, 99th percentile, seconds (what a timer due now waits on average is far less).",
      [],
      (gauge) => {
        gauge.set(lag.count > 0 ? lag.percentile(99) / 1e9 : 0);
        maxGauge?.set(lag.count > 0 ? lag.max / 1e9 : 0);
        lag.reset();
      },
      "max", // with several workers: the worst one's
    );
    maxGauge = registry.gauge("gateway_event_loop_lag_max_seconds", "Longest event-loop delay since the previous scrape, seconds.", [], undefined, "max");
    // 1 per process; summed when the workers' metrics merge: how many answered this scrape.
    registry.gauge("gateway_workers", "Worker processes whose metrics this answer holds (1 in a gateway of one process).", []).set(1);
    const commits = registry.plainHistogram(
      "gateway_store_commit_seconds",
      "Write latency of the store's group commit of metered generations (each batch's transaction), seconds.",
      COMMIT_BUCKETS,
    );
    this.commitObserver = (seconds) => commits.observe(seconds);
  }

  close(): void {
    this.lag.disable();
  }
}
