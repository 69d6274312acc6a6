import type { GatewayContext } from "./context.ts";
import type { UpstreamRoute } from "./route.ts";
import type { UpstreamEndpoint } from "./plugin.ts";

/**
 * Resilience vocabulary shared by the core's attempt loop (which deployment to try, when to try the next),
 * the providers (which deployments they have) and the health plugin (breakers, balancing, Retry-After).
 */

/** One place a provider's requests can go: a base URL with its key. Priority = its index in the provider's list. */
export interface Deployment {
  /** Unique within its provider: the operator's name, else `<provider>#<n>` (1-based). Shown in records and /admin/v1/upstreams. */
  readonly name: string;
  /** For weighted balancing; 1 by default. */
  readonly weight: number;
  /** Why this deployment cannot serve as configured (no key); absent when it can. */
  readonly unavailableReason?: string;
  /** Where a request goes through this deployment, with which headers. */
  endpoint(ctx: GatewayContext, route: UpstreamRoute): UpstreamEndpoint;
}

/** Why an attempt failed, as the retry policy sees it. */
export type ErrorClass =
  | "connection" // refused, reset or DNS before any answer
  | "timeout" // no answer headers in time
  | "rate_limited" // 429
  | "overloaded" // 503, 529
  | "server_error" // 500, 502, 504, 408
  | "auth" // 401, 403: the deployment's key is bad
  | "client_error" // 400, 404, 413, 422 and other 4xx: the request is the problem; never retried
  | "broken_stream" // failed after bytes reached the client: never retried
  | "idle_timeout"; // silent mid-answer past the idle timeout

/** One try of one deployment, as the generation record keeps it. */
export interface AttemptRecord {
  deployment: string;
  /** The upstream's HTTP status; null when none came (connection error, timeout). */
  status: number | null;
  /** null for the attempt that answered. */
  error_class: ErrorClass | null;
  latency_ms: number;
}

/**
 * What the health keeper learns from an attempt. `ok: false` without an `errorClass`: it ended for a reason that is
 * not the deployment's (the client left, the request's own deadline): only its in-flight count changes. The
 * attempt that answered is finished when its answer is over (a stream may still break: broken_stream, idle_timeout).
 */
export interface AttemptOutcome {
  ok: boolean;
  errorClass?: ErrorClass;
  /** From the upstream's Retry-After (already capped by the attempt loop). */
  retryAfterMs?: number;
  latencyMs: number;
}

/**
 * Keeps each deployment's health (circuit breaker, Retry-After, in-flight count, latency) and orders the
 * candidates for a request. Offered by a plugin's `provides` (the core finds it like ModelDirectory); without
 * one, the core tries deployments in priority order with no memory. `order` is synchronous: it is on every
 * request's path (shared state is synchronised in the background).
 */
export interface DeploymentHealth {
  /**
   * The deployments to try, in order: healthy ones by the provider's balancing strategy (requests with the same
   * `stickyKey`, a key and model, keep to one deployment while it is healthy), without open breakers or
   * deployments told to wait. May be empty.
   */
  order(provider: string, deployments: readonly Deployment[], stickyKey: string): readonly Deployment[];
  /** An attempt is starting (in-flight count). */
  started(provider: string, deployment: Deployment): void;
  /** The attempt ended: breaker, Retry-After, latency, in-flight count. */
  finished(provider: string, deployment: Deployment, outcome: AttemptOutcome): void;
  /** When the first of these deployments may be tried again (epoch ms), for a refusal's retry-after; undefined when one may now. */
  nextAvailableAt(provider: string, deployments: readonly Deployment[]): number | undefined;
}

/** Whether a plugin's `provides` is a DeploymentHealth (the core finds it like a ModelDirectory). */
export function isDeploymentHealth(value: unknown): value is DeploymentHealth {
  const health = value as Partial<DeploymentHealth> | null | undefined;
  return typeof health?.order === "function" && typeof health.finished === "function" && typeof health.started === "function";
}
