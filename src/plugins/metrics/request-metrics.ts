import type { GatewayContext, Outcome } from "../../core/context.ts";
import { codeLabel, OTHER, statusClassLabel } from "./labels.ts";
import type { CounterSeries, Family, HistogramSeries, MetricsRegistry } from "./registry.ts";

/** Request durations, seconds: from a quick refusal to a long stream. */
const DURATION_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Time to the first token, seconds. */
const TTFT_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60];

/** The series one (ingress, model) pair writes, found once. */
interface PairSeries {
  duration: HistogramSeries;
  ttft: HistogramSeries;
  /** By Usage field: input, output, cache_read, cache_write, reasoning (the model's). */
  input: CounterSeries;
  output: CounterSeries;
  cacheRead: CounterSeries;
  cacheWrite: CounterSeries;
  reasoning: CounterSeries;
}

/** The model label of a request: its catalog id once routed (a fallback's when one answered), else "other". */
export function modelLabel(ctx: GatewayContext): string {
  return ctx.model?.id ?? OTHER;
}

/**
 * gateway_requests_total, gateway_request_duration_seconds, gateway_time_to_first_token_seconds and
 * gateway_tokens_total: written once per request, at its end (onRequestEnd), never per stream event.
 */
export class RequestMetrics {
  private readonly requests: Family<CounterSeries>;
  private readonly durations: Family<HistogramSeries>;
  private readonly ttfts: Family<HistogramSeries>;
  private readonly tokens: Family<CounterSeries>;
  private readonly pairs = new Map<string, PairSeries>();

  constructor(registry: MetricsRegistry) {
    this.requests = registry.counter(
      "gateway_requests_total",
      "Requests through the pipeline, by ingress format, model (catalog id or other), provider, HTTP status class and error code (ok when it succeeded).",
      ["ingress", "model", "provider", "status_class", "code"],
    );
    this.durations = registry.histogram(
      "gateway_request_duration_seconds",
      "Request duration from its arrival to its last byte (a stream's end), seconds.",
      ["ingress", "model"],
      DURATION_BUCKETS,
    );
    this.ttfts = registry.histogram(
      "gateway_time_to_first_token_seconds",
      "Time from a request's arrival to the first byte of its upstream answer (the first token of a stream), seconds.",
      ["ingress", "model"],
      TTFT_BUCKETS,
    );
    this.tokens = registry.counter(
      "gateway_tokens_total",
      "Tokens by model and type: input (every prompt token), output (reasoning included), cache_read and cache_write (parts of input), reasoning (part of output).",
      ["model", "type"],
    );
  }

  record(ctx: GatewayContext, outcome: Outcome, model: string, endMono: number): void {
    const ingress = ctx.ingress.name;
    this.requests.get5(ingress, model, ctx.target?.provider ?? OTHER, statusClassLabel(outcome), codeLabel(outcome)).inc(1);
    const pair = this.pair(ingress, model);
    pair.duration.observe((endMono - ctx.startedMono) / 1000);
    if (ctx.firstTokenMono !== undefined) pair.ttft.observe((ctx.firstTokenMono - ctx.startedMono) / 1000);
    const usage = ctx.usage;
    if (usage === undefined) return;
    if (usage.inputTokens > 0) pair.input.inc(usage.inputTokens);
    if (usage.outputTokens > 0) pair.output.inc(usage.outputTokens);
    if (usage.cacheReadTokens > 0) pair.cacheRead.inc(usage.cacheReadTokens);
    if (usage.cacheWriteTokens > 0) pair.cacheWrite.inc(usage.cacheWriteTokens);
    if (usage.reasoningTokens > 0) pair.reasoning.inc(usage.reasoningTokens);
  }

  private pair(ingress: string, model: string): PairSeries {
    const key = ingress + "\u0000" + model;
    let pair = this.pairs.get(key);
    if (pair === undefined) {
      pair = {
        duration: this.durations.get2(ingress, model),
        ttft: this.ttfts.get2(ingress, model),
        input: this.tokens.get2(model, "input"),
        output: this.tokens.get2(model, "output"),
        cacheRead: this.tokens.get2(model, "cache_read"),
        cacheWrite: this.tokens.get2(model, "cache_write"),
        reasoning: this.tokens.get2(model, "reasoning"),
      };
      this.pairs.set(key, pair);
    }
    return pair;
  }
}
