import type { AnyElysia } from "elysia";
import type { Static, TSchema } from "@sinclair/typebox";
import type { CanonicalRequest, GatewayContext, Outcome } from "./context.ts";
import type { StreamEvent } from "./canonical.ts";
import type { IngressFormat, UpstreamCodec, WireFormat } from "./format.ts";
import type { UpstreamRoute } from "./route.ts";
import type { Logger } from "./log.ts";
import type { AttemptRecord, Deployment } from "./deployments.ts";
import type { UpstreamCall, UpstreamResponse } from "../transport/transport.ts";
import type { PrimaryHost, PrimaryPart, WorkerLink } from "./workers.ts";

/**
 * What plugins offer each other, keyed by plugin name. Each plugin that `provides` something adds
 * its entry by declaration merging: `declare module "../../core/plugin.ts" { interface Services { storage: Repository } }`.
 */
export interface Services {}

/** An upstream the router can send a request to: declarative, the core builds the body and sends it. */
export interface Provider {
  /** The wire formats it speaks, preferred first: a client speaking one is relayed as is; others are translated to the first. */
  readonly codecs: readonly UpstreamCodec[];
  /**
   * Where its requests can go, in priority order (at least one): each a base URL with its key and its own
   * `endpoint` (core/deployments.ts). The core's attempt loop (core/attempts.ts) tries them in the order a
   * DeploymentHealth gives, else this one.
   */
  readonly deployments: readonly Deployment[];
  /** The upstream statuses after which the next deployment is tried, instead of the default set (core/attempts.ts). */
  readonly retryOn?: readonly number[];
  /**
   * Whether the upstream takes explicit prompt-cache breakpoints (`cache_control`, docs/wire-formats.md#prompt-caching):
   * "breakpoints" keeps them, "none" (or absent) means its adjustBody strips them from relayed bodies.
   */
  readonly cacheControl?: "breakpoints" | "none";
  /** The provider's own last touches on the upstream body (output caps), before onUpstreamRequest hooks. */
  adjustBody?(body: Record<string, unknown>, ctx: GatewayContext, route: UpstreamRoute): void;
  /** Answers the call itself instead of the transport (a simulated upstream). */
  send?(ctx: GatewayContext, call: UpstreamCall): Promise<UpstreamResponse>;
  /**
   * Why this upstream cannot serve any request as configured: none of its deployments can (e.g. "OPENAI_API_KEY
   * is not set"); absent when one can. The start-up log and GET /ready name the models it leaves unserved.
   */
  readonly unavailableReason?: string;
  /** Serves whatever model the router names, whatever its provider (a simulated upstream): while it is enabled no model is unserved. */
  readonly servesEveryModel?: boolean;
}

/** Where one request goes through a deployment, with which headers (build them once: `jsonHeaders`). */
export interface UpstreamEndpoint {
  url: string;
  /** From `jsonHeaders` (transport/transport.ts). */
  headers: Headers;
}

/**
 * What a router offers as its `provides`: every model id it routes and the provider named to serve it. The core
 * finds it among the plugins' `provides` to name, at start-up and in GET /ready, the models no provider can serve.
 */
export interface ModelDirectory {
  routedModels(): readonly { readonly id: string; readonly provider: string }[];
}

export function isModelDirectory(value: unknown): value is ModelDirectory {
  return typeof (value as Partial<ModelDirectory> | null | undefined)?.routedModels === "function";
}

/** Runs a request through the pipeline: what ingress routes call. */
export interface Gateway {
  handle(request: Request, ingress: IngressFormat): Promise<Response>;
  /**
   * A request the gateway answers itself, without an upstream call and without a bill (count_tokens): the
   * headers hooks, the body within the limits, `local.decode`, the stages' onLocalRequest, then `local.answer`.
   * Errors are answered in `ingress`'s shape; the request line is the pipeline's.
   */
  answerLocally(request: Request, ingress: IngressFormat, local: LocalAnswer): Promise<Response>;
  /** A client's JSON body within the gateway's body limits (413 / 503 / 400), for routes outside the pipeline. */
  readJson(request: Request): Promise<Record<string, unknown>>;
  /** Number of requests in flight (drained on shutdown). */
  readonly inFlight: number;
  /** The enabled providers by name (the catalog's `provider` field): what lists their deployments (GET /admin/v1/upstreams). */
  readonly upstreams: ReadonlyMap<string, Provider>;
  /**
   * The client's address: the socket peer, or behind a trusted proxy (`server.trusted_proxies`) the address it
   * forwarded (core/client-ip.ts). What the edge limit counts and the log lines show; "unknown" for a closed socket.
   */
  clientIp(request: Request): string;
}

/** What an ingress route answered by the gateway itself supplies to `Gateway.answerLocally`. */
export interface LocalAnswer {
  /** What the stages read about the request (its model); throws a GatewayError for a body that is no such request. */
  decode(body: Record<string, unknown>): CanonicalRequest;
  /** The JSON answer, once every stage's onLocalRequest admitted the request. */
  answer(ctx: GatewayContext): unknown;
}

export interface PluginHost {
  readonly configFile: string;
  /** The environment the configuration was expanded from (provider keys are read from it). */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly log: Logger;
  /** Wall-clock milliseconds; injectable so time windows are testable without sleeping. */
  readonly now: () => number;
  /** The `provides` of an earlier plugin in the pipeline; throws when it is not enabled. */
  service<K extends keyof Services>(name: K): Services[K];
  /** Whether a plugin is enabled in this configuration. */
  has(name: string): boolean;
  /**
   * Marks a configured value secret (a provider key, a token): it is masked wherever text leaves the gateway,
   * error answers and log lines (core/secrets.ts). Missing values and values under 8 characters are ignored.
   */
  secret(value: string | undefined): void;
  /**
   * The other worker processes serving this port (`server.workers` > 1, core/workers.ts), or null in a gateway of
   * one process. What a plugin keeps in memory is per process: it shares it through this link, or says in its
   * README that it is per worker. Only worker 0 (the leader) runs once-per-host duties (pollers, sweeps).
   */
  readonly workers: WorkerLink | null;
}

/** An answer of a route outside the pipeline: the route pattern and path parameters when one matched. */
export interface RouteAnswer {
  request: Request;
  route: string | undefined;
  params: Record<string, string | undefined> | undefined;
  status: number;
}

/** What an `onUpstreamAttempt` hook follows one attempt with. */
export interface AttemptObserver {
  /** Headers added to this attempt's upstream request. */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * The attempt ended: how (status, error class, latency: the record ctx.attempts gets), once its answer headers came
   * or it failed; null when it ended for a reason not the deployment's (the client left) and no record was made.
   */
  end(record: AttemptRecord | null): void;
}

export interface PluginInstance<Provides = unknown> {
  /** Offered to later plugins as `host.service(<plugin name>)`. */
  provides?: Provides;
  /** Upstreams this plugin serves, by provider name (the catalog's `provider` field). */
  providers?: Record<string, Provider>;
  /**
   * In pipeline order, before a byte of the body is read: what needs only the headers (authentication), so a
   * caller that is refused costs no body. May throw a GatewayError to short-circuit. Only `ctx.headers` is set.
   */
  onHeaders?(ctx: GatewayContext): void | Promise<void>;
  /** In pipeline order; may throw a GatewayError to short-circuit. */
  onRequest?(ctx: GatewayContext): void | Promise<void>;
  /**
   * In pipeline order, instead of onRequest, for a request the gateway answers itself (`Gateway.answerLocally`:
   * count_tokens): only what decides whether the caller may ask (the model's route, the allowlist, the request
   * rate). It must hold nothing: no onComplete follows. A plugin without it never sees such a request, so
   * nothing is held or billed for it. May throw a GatewayError.
   */
  onLocalRequest?(ctx: GatewayContext): void | Promise<void>;
  /**
   * In pipeline order, before the core sends the request to the fallback model `model` (a catalog id from
   * `ctx.fallbacks`: every deployment of the previous model's provider failed, retryably, before any byte reached
   * the client). The router points ctx at it (ctx.request.model, ctx.target); the budget makes sure the hold covers
   * it. Throwing skips that fallback (the core then runs these hooks again with the model it came from).
   */
  onFallback?(ctx: GatewayContext, model: string): void | Promise<void>;
  /** In pipeline order; last rewrite of `ctx.upstreamBody`. */
  onUpstreamRequest?(ctx: GatewayContext): void | Promise<void>;
  /** Reverse order; non-streaming answers, after usage is known, before the body is sent. */
  onResponse?(ctx: GatewayContext): void | Promise<void>;
  /** Reverse order; every normalized event of a stream. Synchronous: it sits on the hot path. */
  onStreamEvent?(ctx: GatewayContext, event: StreamEvent): void;
  /** Reverse order; after the last byte or the failure. Runs for every plugin whose onRequest stage was reached. */
  onComplete?(ctx: GatewayContext, outcome: Outcome): void | Promise<void>;
  /**
   * For observers (traces): every pipeline request as it starts, before any onHeaders, whatever happens next. Only
   * `requestId`, `startedAt`, `headers`, `ingress` and `log` are set. Synchronous; it must not throw.
   */
  onRequestStart?(ctx: GatewayContext): void;
  /**
   * For observers (metrics, traces): every pipeline request as it ends, after the onComplete hooks and before the
   * access line, whatever stage it reached (a refusal from the headers, count_tokens too). Synchronous; an error is logged.
   */
  onRequestEnd?(ctx: GatewayContext, outcome: Outcome): void;
  /**
   * For observers: one upstream attempt starts (core/attempts.ts). May return headers to add to that attempt's
   * upstream request (a `traceparent`) and is told how it ended (the same record ctx.attempts gets). Synchronous.
   */
  onUpstreamAttempt?(ctx: GatewayContext, attempt: { provider: string; deployment: string }): AttemptObserver | undefined;
  /** Extra HTTP routes (admin, cost API, ingress endpoints). */
  routes?(app: AnyElysia, gateway: Gateway): void;
  /**
   * Told of every answer of a route outside the pipeline, errors included (e.g. the admin audit). The app
   * calls it from the hooks it runs anyway: a plugin's own global hook would cost every request.
   */
  routeAnswered?(answer: RouteAnswer): void;
  /** Readiness: false keeps GET /ready at 503. */
  ready?(): boolean | Promise<boolean>;
  /** Graceful shutdown, in reverse pipeline order, after in-flight requests drained. */
  close?(): void | Promise<void>;
}

export interface PluginDefinition<S extends TSchema = TSchema, Provides = unknown> {
  /** kebab-case; equals the folder name, the YAML key and the log tag. */
  readonly name: string;
  /** Plugins that must be enabled and come earlier in the pipeline. */
  readonly requires?: readonly string[];
  readonly configSchema: S;
  /** A rule about the config its schema cannot say (one of two forms): the problem as "/field: what is wrong", or undefined. */
  checkConfig?(config: Static<S>): string | undefined;
  setup(config: Static<S>, host: PluginHost): PluginInstance<Provides> | Promise<PluginInstance<Provides>>;
  /**
   * With several workers (core/primary.ts): this plugin's part in the primary process, which serves no request and
   * holds what the workers share (answers their `workers.call`). Set up before any worker starts.
   */
  primary?(config: Static<S>, host: PrimaryHost): PrimaryPart | Promise<PrimaryPart>;
}

/** Declares a plugin; importing a plugin module does no I/O, only `setup` may. */
export function definePlugin<S extends TSchema, Provides = unknown>(
  definition: PluginDefinition<S, Provides>,
): PluginDefinition<S, Provides> {
  return definition;
}
