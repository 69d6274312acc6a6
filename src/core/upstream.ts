import type { GatewayContext } from "./context.ts";
import type { Provider } from "./plugin.ts";
import type { Deployment } from "./deployments.ts";
import type { AbortSignalLike } from "./request-signals.ts";
import { upstreamBodyFor, type UpstreamRoute } from "./route.ts";
import { upstreamFetch, type UpstreamResponse } from "../transport/index.ts";

/** The body a provider's upstream gets: relayed or translated (route.ts), then the provider's own adjustments. */
export function buildUpstreamBody(ctx: GatewayContext, provider: Provider, route: UpstreamRoute): Record<string, unknown> {
  const body = upstreamBodyFor(ctx, route, ctx.target!.upstreamModel);
  provider.adjustBody?.(body, ctx, route);
  return body;
}

/**
 * Sends `body` to one deployment's endpoint (the first by default) through the transport (or the provider's own
 * `send`, a simulated upstream), listening to `signal` (the request's own by default; an attempt's, core/attempts.ts).
 */
export function sendUpstream(
  ctx: GatewayContext,
  provider: Provider,
  route: UpstreamRoute,
  body: Record<string, unknown>,
  deployment: Deployment = provider.deployments[0]!,
  signal: AbortSignalLike = ctx.signal,
  extraHeaders?: Readonly<Record<string, string>>,
): Promise<UpstreamResponse> {
  const { url, headers } = deployment.endpoint(ctx, route);
  const call = { url, headers: extraHeaders ? withHeaders(headers, extraHeaders) : headers, body, signal };
  return provider.send ? provider.send(ctx, call) : upstreamFetch(call);
}

/** The endpoint's headers (often built once per deployment and shared) plus an attempt's own, in a copy. */
function withHeaders(headers: Headers, extra: Readonly<Record<string, string>>): Headers {
  const copy = new Headers(headers);
  for (const [name, value] of Object.entries(extra)) copy.set(name, value);
  return copy;
}
