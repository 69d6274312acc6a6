import { Gauge, Registry, type Aggregator } from "prom-client";
import processCpuTotal from "prom-client/lib/metrics/processCpuTotal.js";
import processStartTime from "prom-client/lib/metrics/processStartTime.js";
import osMemoryHeap from "prom-client/lib/metrics/osMemoryHeap.js";
import processOpenFileDescriptors from "prom-client/lib/metrics/processOpenFileDescriptors.js";
import processMaxFileDescriptors from "prom-client/lib/metrics/processMaxFileDescriptors.js";
import heapSizeAndUsed from "prom-client/lib/metrics/heapSizeAndUsed.js";

/** A registry's metrics as prom-client's `getMetricsAsJSON()` gives them: plain data, sent between processes. */
export type MetricsJSON = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;

/** One labelled series of a counter, found once and kept: the hot path only adds. */
export interface CounterSeries {
  inc(amount: number): void;
}

/** One labelled series of a histogram. */
export interface HistogramSeries {
  observe(value: number): void;
}

/** A counter's series: a number. */
class CounterCell implements CounterSeries {
  value = 0;
  constructor(readonly labels: Record<string, string>) {}
  inc(amount: number): void {
    this.value += amount;
  }
}

/** A histogram's series: a count per bucket (not cumulative: the exposition sums them), the sum and the count. */
class HistogramCell implements HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Record<string, string>,
    readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length);
  }
  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    if (i < bounds.length) this.counts[i]! += 1;
    this.sum += value;
    this.count += 1;
  }
}

/** What prom-client's Registry reads of a metric: its name and `get()` (lib/registry.js getMetricsAsString). */
interface ExposedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/**
 * A metric family whose series are found by their label values, each made once and kept in a Map keyed by the joined
 * values: a request pays one Map lookup per family, never a labels object. Label values must come from a bounded set
 * (labels.ts): the Map holds every series ever made.
 *
 * Written here rather than prom-client's Counter / Histogram: prom-client hashes and validates the labels object on
 * every inc / observe, even through cached `labels(...)` children. A request's end cost 2.7 µs with them and 0.23 µs
 * with these (about 6% and 0.5% of the ~45 µs of CPU a request costs at c=64: over, then under, the 1%;
 * docs/observability.md). These families register into prom-client's Registry like its own metrics, so the
 * exposition (and the process metrics) stay prom-client's.
 */
export class Family<S> {
  private readonly series = new Map<string, S & { labels: Record<string, string> }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: "counter" | "histogram",
    private readonly labelNames: readonly string[],
    private readonly make: (labels: Record<string, string>) => S & { labels: Record<string, string> },
  ) {}

  private made(key: string, values: readonly string[]): S {
    const labels: Record<string, string> = {};
    this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
    const series = this.make(labels);
    this.series.set(key, series);
    return series;
  }

  get1(a: string): S {
    return this.series.get(a) ?? this.made(a, [a]);
  }
  get2(a: string, b: string): S {
    const key = a + "\u0000" + b;
    return this.series.get(key) ?? this.made(key, [a, b]);
  }
  get3(a: string, b: string, c: string): S {
    const key = a + "\u0000" + b + "\u0000" + c;
    return this.series.get(key) ?? this.made(key, [a, b, c]);
  }
  get5(a: string, b: string, c: string, d: string, e: string): S {
    const key = a + "\u0000" + b + "\u0000" + c + "\u0000" + d + "\u0000" + e;
    return this.series.get(key) ?? this.made(key, [a, b, c, d, e]);
  }

  get size(): number {
    return this.series.size;
  }

  /** prom-client's Registry reads this at scrape time. */
  async get(): Promise<{ name: string; help: string; type: string; values: ExposedValue[]; aggregator: string }> {
    const values: ExposedValue[] = [];
    for (const series of this.series.values()) {
      if (series instanceof CounterCell) values.push({ labels: series.labels, value: series.value });
      else if (series instanceof HistogramCell) histogramValues(this.name, series, values);
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: "sum" };
  }
}

function histogramValues(name: string, cell: HistogramCell, out: ExposedValue[]): void {
  const bounds = cell.bounds;
  let cumulative = 0;
  for (let i = 0; i < bounds.length; i++) {
    cumulative += cell.counts[i]!;
    out.push({ labels: { ...cell.labels, le: bounds[i]! }, value: cumulative, metricName: `${name}_bucket` });
  }
  out.push({ labels: { ...cell.labels, le: "+Inf" }, value: cell.count, metricName: `${name}_bucket` });
  out.push({ labels: cell.labels, value: cell.sum, metricName: `${name}_sum` });
  out.push({ labels: cell.labels, value: cell.count, metricName: `${name}_count` });
}

/**
 * The gateway's metrics registry (prom-client): the families of the hot path (`counter`, `histogram`: cached series
 * written by hand), gauges set at scrape time (prom-client's), and the process metrics that are true under Bun.
 */
export class MetricsRegistry {
  readonly registry = new Registry();

  counter(name: string, help: string, labelNames: readonly string[]): Family<CounterSeries> {
    const family = new Family<CounterSeries>(name, help, "counter", labelNames, (labels) => new CounterCell(labels));
    this.registry.registerMetric(family as never);
    return family;
  }

  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Family<HistogramSeries> {
    const family = new Family<HistogramSeries>(name, help, "histogram", labelNames, (labels) => new HistogramCell(labels, buckets));
    this.registry.registerMetric(family as never);
    return family;
  }

  /** A histogram without labels. */
  plainHistogram(name: string, help: string, buckets: readonly number[]): HistogramSeries {
    const family = this.histogram(name, help, [], buckets);
    return family.get1("");
  }

  /**
   * A gauge set at scrape time: by `collect` when given (synchronous), else by whoever refreshes it before the scrape.
   * `aggregator`: how the workers' values merge into one (workers.ts; default: their sum).
   */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[], collect?: (gauge: Gauge<L>) => void, aggregator: Aggregator = "sum"): Gauge<L> {
    return new Gauge<L>({
      name,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
      aggregator,
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
    // prom-client omits the start time when it merges processes; with workers it is the oldest running one's.
    (this.registry.getSingleMetric("process_start_time_seconds") as { aggregator?: Aggregator } | undefined)!.aggregator = "min";
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition, in the Prometheus text format. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  /** The metrics as prom-client's JSON (what workers.ts merges): those named in `names`, or all but them (`except`). */
  async json(names: ReadonlySet<string>, except: boolean): Promise<MetricsJSON> {
    const metrics = await this.registry.getMetricsAsJSON();
    return metrics.filter((metric) => names.has(metric.name) !== except);
  }
}
