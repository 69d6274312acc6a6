import type { GatewayContext } from "../../core/context.ts";
import type { Deployment } from "../../core/deployments.ts";
import type { Gauge } from "prom-client";
import { BREAKER_VALUES, OTHER } from "./labels.ts";
import type { CounterSeries, Family, MetricsRegistry } from "./registry.ts";

/** What the breaker gauge reads: the upstream-health plugin's keeper (its `inspect`, as GET /admin/v1/upstreams does). */
export interface BreakerSource {
  inspect(provider: string, deployment: Deployment): { breaker: string };
}

type Upstreams = ReadonlyMap<string, { readonly deployments: readonly Deployment[] }>;

/**
 * gateway_upstream_attempts_total from each request's ctx.attempts at its end (an attempt's outcome is final then: a
 * stream that broke after its headers is `broken_stream`), and gateway_breaker_state per configured deployment at scrape.
 */
export class UpstreamMetrics {
  private readonly attempts: Family<CounterSeries>;
  private readonly breakers: Gauge<"provider" | "deployment">;
  private upstreams: Upstreams = new Map();
  /** Configured deployment names: by provider, and the provider of each name (the first that has it). */
  private readonly byProvider = new Map<string, ReadonlySet<string>>();
  private readonly providerOf = new Map<string, string>();

  constructor(
    registry: MetricsRegistry,
    private readonly health: () => BreakerSource | undefined,
  ) {
    this.attempts = registry.counter(
      "gateway_upstream_attempts_total",
      "Upstream attempts by provider, deployment and outcome (ok, or the attempt's error class: connection, timeout, rate_limited, server_error, auth, broken_stream, ...).",
      ["provider", "deployment", "outcome"],
    );
    this.breakers = registry.gauge(
      "gateway_breaker_state",
      "Circuit breaker of each deployment as this instance sees it: 0 closed, 1 half-open, 2 open (with the upstream-health plugin).",
      ["provider", "deployment"],
      (gauge) => this.readBreakers(gauge),
      // Each worker keeps its own breakers: with several, the most open one's state.
      "max",
    );
  }

  /** The gateway's providers and deployments (known once routes are mounted): the only label values allowed. */
  configure(upstreams: Upstreams): void {
    this.upstreams = upstreams;
    for (const [provider, { deployments }] of upstreams) {
      this.byProvider.set(provider, new Set(deployments.map((deployment) => deployment.name)));
      for (const deployment of deployments) if (!this.providerOf.has(deployment.name)) this.providerOf.set(deployment.name, provider);
    }
  }

  record(ctx: GatewayContext): void {
    const attempts = ctx.attempts;
    if (attempts.length === 0) return;
    const target = ctx.target?.provider;
    for (const attempt of attempts) {
      // A record names its deployment only: the target's provider when it has that deployment, else (an attempt
      // before a fallback to another provider) the provider configured with that name.
      const known = target !== undefined && this.byProvider.get(target)?.has(attempt.deployment);
      const provider = known ? target! : this.providerOf.get(attempt.deployment);
      this.attempts.get3(provider ?? OTHER, provider === undefined ? OTHER : attempt.deployment, attempt.error_class ?? "ok").inc(1);
    }
  }

  private readBreakers(gauge: Gauge<"provider" | "deployment">): void {
    const health = this.health();
    if (!health) return;
    for (const [provider, { deployments }] of this.upstreams) {
      for (const deployment of deployments) {
        gauge.set({ provider, deployment: deployment.name }, BREAKER_VALUES[health.inspect(provider, deployment).breaker] ?? 0);
      }
    }
  }
}
