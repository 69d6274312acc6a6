import type { GatewayContext, Outcome } from "./context.ts";
import type { AttemptObserver, Provider } from "./plugin.ts";
import type { Logger } from "./log.ts";
import type { AttemptRecord, Deployment, DeploymentHealth, ErrorClass } from "./deployments.ts";
import type { UpstreamRoute } from "./route.ts";
import type { UpstreamCodec } from "./format.ts";
import { GatewayError, ProviderUnavailableError, UpstreamError, UpstreamHttpError, UpstreamTimeoutError, asGatewayError } from "./errors.ts";
import { abortError } from "./request-outcome.ts";
import { RequestSignal, type AbortSignalLike } from "./request-signals.ts";
import { sendUpstream } from "./upstream.ts";
import { classifyStatus, isRetried, parseRetryAfter, retryAfterSeconds } from "./retry-policy.ts";
import type { UpstreamResponse } from "../transport/transport.ts";

/** The server's attempt settings (plugins-config.yaml `server`). */
export interface AttemptSettings {
  /** One streamed attempt's wait for answer headers; 0 = none. */
  firstByteTimeoutMs: number;
  /** A non-streamed attempt's (its headers come with the whole answer); 0 = none. */
  firstByteTimeoutNonStreamMs: number;
  maxAttempts: number;
  /** No new attempt starts this long after the first began. */
  budgetMs: number;
}

export interface AttemptHost {
  readonly settings: AttemptSettings;
  /** The plugins' onUpstreamAttempt hooks (observers: traces); empty when none has one. */
  readonly observers: readonly ((ctx: GatewayContext, attempt: { provider: string; deployment: string }) => AttemptObserver | undefined)[];
  /** A plugin's DeploymentHealth, when one is enabled. */
  readonly health: DeploymentHealth | undefined;
  readonly log: Logger;
  /** Wall clock (epoch ms): Retry-After dates, nextAvailableAt. */
  readonly now: () => number;
}

/** The attempt that answered, told to the health keeper once the request is over (`finishAnswered`). */
export interface Answered {
  provider: string;
  deployment: Deployment;
  /** Until its answer headers came. */
  latencyMs: number;
}

/** Without a Retry-After or a health keeper's word, a refusal asks the client to wait this long. */
const DEFAULT_RETRY_AFTER_MS = 1_000;

/** A failed attempt: its class, what it asked to wait, and its unread answer or its error (for the last one's mapping). */
interface Failure {
  deployment: Deployment;
  errorClass: ErrorClass;
  retryAfterMs?: number;
  response?: UpstreamResponse;
  error?: unknown;
}

/**
 * Sends the request to the provider's deployments in turn until one answers: the next is tried after a connection
 * error, a first-byte timeout or a retried status (retry-policy.ts), within `maxAttempts` and `budgetMs`, always
 * before a byte reached the client. Returns the answering response (2xx, or an error not retried: the caller maps
 * it) and its deployment; throws when every attempt failed. Every attempt is recorded in `ctx.attempts`.
 */
export async function sendWithAttempts(
  host: AttemptHost,
  ctx: GatewayContext,
  providerName: string,
  provider: Provider,
  route: UpstreamRoute,
  body: Record<string, unknown>,
): Promise<{ response: UpstreamResponse; answered: Answered | undefined }> {
  let candidates: readonly Deployment[];
  try {
    candidates = candidatesFor(host, ctx, providerName, provider, route);
  } catch (error) {
    if (error instanceof ProviderUnavailableError) PROVIDER_FAILURES.add(error);
    throw error;
  }
  if (candidates.length === 0) throw providerFailed(refusal(host, providerName, provider, `every deployment of provider ${providerName} is resting after failures (open breakers, Retry-After waits)`));
  const firstMono = performance.now();
  const failures: Failure[] = [];
  for (let index = 0; index < candidates.length; index++) {
    const deployment = candidates[index]!;
    const result = await attemptOnce(host, ctx, providerName, provider, deployment, route, body);
    if (!("errorClass" in result)) return result;
    failures.push(result);
    const another =
      index + 1 < candidates.length && index + 1 < host.settings.maxAttempts && performance.now() - firstMono < host.settings.budgetMs && !ctx.signal.aborted;
    if (!another) break;
    result.response?.body?.getReader().cancel().catch(() => {}); // its slot and connection go back
    result.response = undefined;
  }
  throw providerFailed(await exhausted(host, providerName, provider, route.codec, failures));
}

/** The errors that say the provider could not answer at all (every deployment failed retryably, or none can serve). */
const PROVIDER_FAILURES = new WeakSet<object>();

function providerFailed(error: GatewayError): GatewayError {
  PROVIDER_FAILURES.add(error);
  return error;
}

/**
 * Whether `sendWithAttempts` threw this because the provider could not answer: every deployment failed for a
 * retried reason (or none could serve), before any byte reached the client. Such a request may go to a fallback
 * model; a client's abort, its deadline or a refusal of the request itself never does.
 */
export function isProviderFailure(error: unknown): boolean {
  return typeof error === "object" && error !== null && PROVIDER_FAILURES.has(error);
}

/**
 * The deployments to try: those with a key, in the health keeper's order (sticky per key and model, and per
 * `prompt_cache_key` when the client sent one: a conversation stays where its cache is) when there are several, else in
 * priority order.
 */
function candidatesFor(host: AttemptHost, ctx: GatewayContext, providerName: string, provider: Provider, route: UpstreamRoute): readonly Deployment[] {
  const usable = provider.deployments.filter((deployment) => deployment.unavailableReason === undefined);
  if (usable.length === 0) {
    // None can serve (no key): the provider's own refusal, as its endpoint words it.
    const first = provider.deployments[0];
    first?.endpoint(ctx, route);
    throw new ProviderUnavailableError(`provider ${providerName} cannot serve: ${provider.unavailableReason ?? "it has no deployments"}`);
  }
  // A provider's only deployment is always tried: with nowhere else to go, the upstream's own answer (its 429 and
  // Retry-After, its 503) tells the client more than a refusal of ours. Its health is still kept (started/finished).
  if (!host.health || usable.length === 1) return usable;
  return host.health.order(providerName, usable, `${String(ctx.log.key_id ?? "")} ${ctx.request.model}${ctx.request.cacheKey ? ` ${ctx.request.cacheKey}` : ""}`);
}

/** One attempt: sent, classified before a byte of it reaches the client, recorded, told to the health keeper. */
async function attemptOnce(
  host: AttemptHost,
  ctx: GatewayContext,
  providerName: string,
  provider: Provider,
  deployment: Deployment,
  route: UpstreamRoute,
  body: Record<string, unknown>,
): Promise<{ response: UpstreamResponse; answered: Answered | undefined } | Failure> {
  host.health?.started(providerName, deployment);
  const observers = host.observers.length === 0 ? NO_OBSERVERS : observe(host, ctx, providerName, deployment);
  const startedMono = performance.now();
  const firstByteMs = ctx.request.stream ? host.settings.firstByteTimeoutMs : host.settings.firstByteTimeoutNonStreamMs;
  const attempt = attemptSignal(ctx.signal, firstByteMs);
  let response: UpstreamResponse;
  try {
    response = await sendUpstream(ctx, provider, route, body, deployment, attempt.signal, observers.headers);
  } catch (error) {
    attempt.end(false);
    const latencyMs = Math.round(performance.now() - startedMono);
    if (ctx.signal.aborted || error instanceof RangeError || (error instanceof GatewayError && !(error instanceof UpstreamTimeoutError))) {
      // The client left, the request's own deadline, a body too deep to send: not the deployment's doing.
      host.health?.finished(providerName, deployment, { ok: false, latencyMs });
      if (ctx.signal.aborted && (ctx.signal.reason as Error | undefined)?.name === "TimeoutError") record(ctx, deployment, null, "timeout", latencyMs, observers);
      else observers.end(null);
      if (error instanceof GatewayError) throw error;
      if (ctx.signal.aborted) throw abortError(ctx);
      throw asGatewayError(error); // RangeError: the client's body too deep to serialize, a 400
    }
    // The attempt's own first-byte timer fired (the transport reads it as a timeout; a simulated upstream may not).
    const errorClass: ErrorClass = error instanceof UpstreamTimeoutError || attempt.signal.aborted ? "timeout" : "connection";
    record(ctx, deployment, null, errorClass, latencyMs, observers);
    host.health?.finished(providerName, deployment, { ok: false, errorClass, latencyMs });
    host.log.warn("upstream attempt failed", { request_id: ctx.requestId, provider: providerName, deployment: deployment.name, error_class: errorClass });
    return { deployment, errorClass, error };
  }
  attempt.end(true);
  const latencyMs = Math.round(performance.now() - startedMono);
  if (response.ok) {
    record(ctx, deployment, response.status, null, latencyMs, observers);
    // The health keeper hears of it when the answer is over (finishAnswered): a stream may still break.
    return { response, answered: host.health ? { provider: providerName, deployment, latencyMs } : undefined };
  }
  const errorClass = classifyStatus(response.status);
  record(ctx, deployment, response.status, errorClass, latencyMs, observers);
  if (!isRetried(response.status, provider.retryOn)) {
    host.health?.finished(providerName, deployment, { ok: false, errorClass, latencyMs });
    return { response, answered: undefined };
  }
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), host.now());
  host.health?.finished(providerName, deployment, { ok: false, errorClass, latencyMs, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
  if (errorClass === "auth") {
    // The operator's key for this deployment is wrong or revoked: name the deployment, never the key.
    host.log.warn("upstream deployment refused the gateway's API key", { provider: providerName, deployment: deployment.name, status: response.status });
  }
  return { deployment, errorClass, response, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}

function record(ctx: GatewayContext, deployment: Deployment, status: number | null, errorClass: ErrorClass | null, latencyMs: number, observers: AttemptObservers): void {
  const entry: AttemptRecord = { deployment: deployment.name, status, error_class: errorClass, latency_ms: latencyMs };
  ctx.attempts.push(entry);
  observers.end(entry);
}

/** The observers of one attempt: the headers they add, and their end. */
interface AttemptObservers {
  headers: Readonly<Record<string, string>> | undefined;
  end(entry: AttemptRecord | null): void;
}

const NO_OBSERVERS: AttemptObservers = { headers: undefined, end() {} };

function observe(host: AttemptHost, ctx: GatewayContext, provider: string, deployment: Deployment): AttemptObservers {
  const following: AttemptObserver[] = [];
  let headers: Record<string, string> | undefined;
  for (const hook of host.observers) {
    try {
      const observer = hook(ctx, { provider, deployment: deployment.name });
      if (!observer) continue;
      following.push(observer);
      if (observer.headers) headers = { ...headers, ...observer.headers };
    } catch (error) {
      host.log.error("onUpstreamAttempt failed", { request_id: ctx.requestId, error: String(error) });
    }
  }
  return {
    headers,
    end(entry) {
      for (const observer of following) {
        try {
          observer.end(entry);
        } catch (error) {
          host.log.error("an attempt observer failed", { request_id: ctx.requestId, error: String(error) });
        }
      }
    },
  };
}

/**
 * The signal one attempt's fetch listens to: the request's own, and a first-byte timer that fails only this attempt.
 * `end(true)` (headers came) stops the timer and keeps following the request's signal; `end(false)` lets go of it.
 */
function attemptSignal(parent: AbortSignalLike, firstByteMs: number): { signal: AbortSignalLike; end(answered: boolean): void } {
  if (firstByteMs <= 0) return { signal: parent, end() {} };
  const child = new RequestSignal();
  const follow = () => child.abort(parent.reason);
  if (parent.aborted) child.abort(parent.reason);
  else parent.addEventListener("abort", follow);
  const timer = setTimeout(() => child.abort(new DOMException(`no answer headers within ${firstByteMs} ms`, "TimeoutError")), firstByteMs);
  return {
    signal: child,
    end(answered) {
      clearTimeout(timer);
      if (!answered) parent.removeEventListener("abort", follow);
    },
  };
}

/** What the client gets when every attempt failed. */
async function exhausted(host: AttemptHost, providerName: string, provider: Provider, codec: UpstreamCodec, failures: Failure[]): Promise<GatewayError> {
  const last = failures.at(-1)!;
  if (failures.length === 1) return failureError(last, codec, providerName);
  const waits = failures.map((failure) => failure.retryAfterMs).filter((ms): ms is number => ms !== undefined);
  const shortest = waits.length === 0 ? undefined : Math.min(...waits);
  const tried = failures.map((failure) => `${failure.deployment.name}: ${failure.errorClass}`).join(", ");
  if (failures.every((failure) => failure.errorClass === "rate_limited")) {
    const error = await failureError(last, codec, providerName);
    error.message = `every deployment of provider ${providerName} is rate limited (${tried})`;
    if (shortest !== undefined) error.headers = { ...error.headers, "retry-after": retryAfterSeconds(shortest) };
    return error;
  }
  last.response?.body?.getReader().cancel().catch(() => {});
  return refusal(host, providerName, provider, `every deployment of provider ${providerName} failed (${tried})`, shortest);
}

/** 503 provider_unavailable with a retry-after: the health keeper's word, else the shortest Retry-After seen, else a default. */
function refusal(host: AttemptHost, providerName: string, provider: Provider, message: string, shortest?: number): GatewayError {
  const next = host.health?.nextAvailableAt(providerName, provider.deployments);
  const waitMs = next !== undefined ? Math.max(0, next - host.now()) : (shortest ?? DEFAULT_RETRY_AFTER_MS);
  return new ProviderUnavailableError(message, { headers: { "retry-after": retryAfterSeconds(waitMs) } });
}

/** A single failure as the client sees it: the upstream's error mapped (upstreamFailure), unreachable (502) or timed out (504). */
async function failureError(failure: Failure, codec: UpstreamCodec, providerName: string): Promise<GatewayError> {
  if (failure.response) return upstreamFailure(failure.response, codec, providerName);
  if (failure.error instanceof GatewayError) return failure.error;
  return new UpstreamError(`upstream ${providerName} could not be reached: ${(failure.error as Error)?.message}`, { cause: failure.error });
}

/**
 * Once the request is over: an answer that broke after its headers marks the attempt that gave it (broken_stream,
 * idle_timeout: never retried), and the health keeper hears how the answering attempt ended.
 */
export function endAttempts(ctx: GatewayContext, outcome: Outcome, health: DeploymentHealth | undefined, answered: Answered | undefined): void {
  const code = outcome.status === "failed" ? outcome.error.code : "";
  const broken: ErrorClass | undefined = code === "upstream_timeout" ? "idle_timeout" : code.startsWith("upstream") ? "broken_stream" : undefined;
  const last = ctx.attempts.at(-1);
  if (broken !== undefined && last !== undefined && last.error_class === null) last.error_class = broken;
  if (!health || !answered) return;
  const { provider, deployment, latencyMs } = answered;
  if (outcome.status === "success") health.finished(provider, deployment, { ok: true, latencyMs });
  // Without a class (the client left, a plugin failed after the answer): not the deployment's doing.
  else health.finished(provider, deployment, broken ? { ok: false, errorClass: broken, latencyMs } : { ok: false, latencyMs });
}

/** Maps an upstream's non-2xx answer to what the client should see. */
export async function upstreamFailure(response: UpstreamResponse, format: UpstreamCodec, name: string): Promise<GatewayError> {
  const text = await response.text().catch(() => "");
  const info = format.readUpstreamError(response.status, text);
  const message = `upstream ${name} answered ${response.status}: ${info.message}`;
  if (response.status === 400 || response.status === 413 || response.status === 422) {
    return new UpstreamHttpError(response.status === 422 ? 400 : response.status, message, "invalid_request_error", info.code ?? "upstream_invalid_request");
  }
  if (response.status === 429) {
    const error = new UpstreamHttpError(429, message, "rate_limit_error", "upstream_rate_limited");
    const retryAfter = response.headers.get("retry-after");
    if (retryAfter) error.headers = { "retry-after": retryAfter };
    return error;
  }
  if (response.status === 503 || response.status === 529) {
    return new UpstreamHttpError(503, message, "overloaded_error", "upstream_overloaded");
  }
  // 401/403 upstream mean the gateway's own provider key is wrong: never a client-key problem.
  return new UpstreamHttpError(502, message, "upstream_error", "upstream_error");
}
