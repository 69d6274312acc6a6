import type { ErrorClass } from "../../core/deployments.ts";

/** Error classes in a fixed order: the columns of the error counters. */
export const ERROR_CLASSES: readonly ErrorClass[] = [
  "connection",
  "timeout",
  "rate_limited",
  "overloaded",
  "server_error",
  "auth",
  "client_error",
  "broken_stream",
  "idle_timeout",
];
const CLASS_INDEX = new Map<ErrorClass, number>(ERROR_CLASSES.map((name, index) => [name, index]));

const MINUTE_MS = 60_000;
/** Error counts cover the last this many whole minutes (the current one included). */
export const ERROR_WINDOW_MINUTES = 5;
/** Successful latencies kept for the p50. */
const LATENCY_SAMPLES = 64;

/**
 * What the operator sees of a deployment: errors by class over the last five minutes (one-minute buckets)
 * and the latency of its recent successful attempts (a ring buffer). Fixed-size typed arrays: recording allocates nothing.
 */
export class DeploymentStats {
  private readonly counts = new Int32Array(ERROR_WINDOW_MINUTES * ERROR_CLASSES.length);
  private readonly minutes = new Float64Array(ERROR_WINDOW_MINUTES).fill(-1);
  private readonly latencies = new Float64Array(LATENCY_SAMPLES);
  private latencyCount = 0;

  recordError(errorClass: ErrorClass, now: number): void {
    const column = CLASS_INDEX.get(errorClass);
    if (column === undefined) return;
    const minute = Math.floor(now / MINUTE_MS);
    const slot = minute % ERROR_WINDOW_MINUTES;
    if (this.minutes[slot] !== minute) {
      this.minutes[slot] = minute;
      this.counts.fill(0, slot * ERROR_CLASSES.length, (slot + 1) * ERROR_CLASSES.length);
    }
    this.counts[slot * ERROR_CLASSES.length + column]!++;
  }

  recordLatency(latencyMs: number): void {
    this.latencies[this.latencyCount % LATENCY_SAMPLES] = latencyMs;
    this.latencyCount++;
  }

  /** Errors by class in the last ERROR_WINDOW_MINUTES minutes; classes with none are left out. */
  errors(now: number): Partial<Record<ErrorClass, number>> {
    const minute = Math.floor(now / MINUTE_MS);
    const out: Partial<Record<ErrorClass, number>> = {};
    for (let slot = 0; slot < ERROR_WINDOW_MINUTES; slot++) {
      const at = this.minutes[slot]!;
      if (at < 0 || minute - at >= ERROR_WINDOW_MINUTES) continue;
      for (let column = 0; column < ERROR_CLASSES.length; column++) {
        const count = this.counts[slot * ERROR_CLASSES.length + column]!;
        if (count > 0) out[ERROR_CLASSES[column]!] = (out[ERROR_CLASSES[column]!] ?? 0) + count;
      }
    }
    return out;
  }

  /** Median latency of the recent successful attempts; null before the first. */
  p50(): number | null {
    const n = Math.min(this.latencyCount, LATENCY_SAMPLES);
    if (n === 0) return null;
    const sorted = this.latencies.slice(0, n).sort();
    return n % 2 === 1 ? sorted[(n - 1) / 2]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
  }
}
