import type { Deployment } from "../../core/deployments.ts";
import type { BreakerState, HealthKeeper } from "./keeper.ts";

/** One deployment as GET /admin/v1/upstreams shows it. */
export interface DeploymentView {
  name: string;
  weight: number;
  unavailable_reason: string | null;
  breaker: BreakerState;
  /** Breaker-counted failures so far (consecutive, or in the current window). */
  failures: number;
  /** Failed attempts by error class over the last 5 minutes. */
  errors_last_5m: Record<string, number>;
  /** Median latency of the last 64 successful attempts; null before the first. */
  p50_latency_ms: number | null;
  in_flight: number;
  /** A Retry-After still running: skipped until then. */
  waiting_until: string | null;
  /** An open breaker lets one probe through from then. */
  probe_at: string | null;
}

/** Every provider's deployments with this instance's view of their health. */
export function upstreamViews(providers: ReadonlyMap<string, { readonly deployments: readonly Deployment[] }>, keeper: HealthKeeper, now: number) {
  return [...providers].map(([provider, { deployments }]) => ({
    provider,
    deployments: deployments.map((deployment): DeploymentView => {
      const state = keeper.inspect(provider, deployment);
      return {
        name: deployment.name,
        weight: deployment.weight,
        unavailable_reason: deployment.unavailableReason ?? null,
        breaker: state.breaker,
        failures: state.failures,
        errors_last_5m: state.stats.errors(now),
        p50_latency_ms: state.stats.p50(),
        in_flight: state.inFlight,
        waiting_until: state.waitUntil > now ? new Date(state.waitUntil).toISOString() : null,
        probe_at: state.breaker === "open" ? new Date(state.probeAt).toISOString() : null,
      };
    }),
  }));
}
