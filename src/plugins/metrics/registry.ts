import { Counter, Gauge, Histogram, Registry } from "prom-client";
import processCpuTotal from "prom-client/lib/metrics/processCpuTotal.js";
import processStartTime from "prom-client/lib/metrics/processStartTime.js";
import osMemoryHeap from "prom-client/lib/metrics/osMemoryHeap.js";
import processOpenFileDescriptors from "prom-client/lib/metrics/processOpenFileDescriptors.js";
import processMaxFileDescriptors from "prom-client/lib/metrics/processMaxFileDescriptors.js";
import heapSizeAndUsed from "prom-client/lib/metrics/heapSizeAndUsed.js";

/** One labelled series of a counter, found once and kept: the hot path only adds. */
export interface CounterSeries {
  inc(amount: number): void;
}

/** One labelled series of a histogram. */
export interface HistogramSeries {
  observe(value: number): void;
}

/**
 * A metric family whose series are looked up by their label values (in the family's label order), each made once
 * and then kept in a Map keyed by the joined values: a request pays one Map lookup per family, never a labels object.
 * Label values must come from a bounded set (labels.ts): the Map holds every series ever made.
 */
export class Family<S> {
  private readonly series = new Map<string, S>();
  constructor(private readonly make: (values: string[]) => S) {}

  /** The series of these label values (made on first use). */
  get(...values: string[]): S {
    const key = values.length === 1 ? values[0]! : values.join("\u0000");
    let found = this.series.get(key);
    if (found === undefined) {
      found = this.make(values);
      this.series.set(key, found);
    }
    return found;
  }

  get size(): number {
    return this.series.size;
  }
}

/**
 * The gateway's metrics registry (prom-client): the families of the hot path (`counter`, `histogram`, cached
 * series), gauges read at scrape time (`gauge` with a collect), and the process metrics that are true under Bun.
 */
export class MetricsRegistry {
  readonly registry = new Registry();

  counter(name: string, help: string, labelNames: readonly string[]): Family<CounterSeries> {
    const metric = new Counter({ name, help, labelNames: [...labelNames], registers: [this.registry] });
    return new Family((values) => metric.labels(...values));
  }

  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Family<HistogramSeries> {
    const metric = new Histogram({ name, help, labelNames: [...labelNames], buckets: [...buckets], registers: [this.registry] });
    return new Family((values) => metric.labels(...values));
  }

  /** A histogram without labels. */
  plainHistogram(name: string, help: string, buckets: readonly number[]): HistogramSeries {
    return new Histogram({ name, help, buckets: [...buckets], registers: [this.registry] });
  }

  /** A gauge set at scrape time: by `collect` when given (synchronous), else by whoever refreshes it before the scrape. */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[], collect?: (gauge: Gauge<L>) => void): Gauge<L> {
    return new Gauge<L>({
      name,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
      ...(collect ? { collect() { collect(this); } } : {}),
    });
  }

  /**
   * prom-client's default metrics that hold under Bun (checked one by one): CPU seconds, start time, resident and
   * virtual memory, open and max file descriptors, JS heap total / used and external memory. Left out:
   * process_heap_bytes (VmData: under Bun it is JavaScriptCore's multi-GB address-space reservation, not a heap),
   * the nodejs_eventloop_lag_* family (its setImmediate probe reads 0 under Bun; gateway_event_loop_lag_seconds
   * replaces it), nodejs_active_handles / requests / resources (empty: Bun does not report them),
   * nodejs_heap_space_* (V8 heap spaces: all 0 under JavaScriptCore), nodejs_gc_duration_seconds (no GC entries
   * under Bun) and nodejs_version_info (Bun's claimed Node version, not what runs).
   */
  processMetrics(): void {
    for (const metric of [processCpuTotal, processStartTime, osMemoryHeap, processOpenFileDescriptors, processMaxFileDescriptors, heapSizeAndUsed]) {
      metric(this.registry, {});
    }
    this.registry.removeSingleMetric("process_heap_bytes");
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition, in the Prometheus text format. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }
}
