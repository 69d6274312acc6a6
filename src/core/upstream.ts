import type { GatewayContext } from "./context.ts";
import type { Provider } from "./plugin.ts";
import { upstreamBodyFor, type UpstreamRoute } from "./route.ts";
import { upstreamFetch, type UpstreamResponse } from "../transport/index.ts";

/** The body a provider's upstream gets: relayed or translated (route.ts), then the provider's own adjustments. */
export function buildUpstreamBody(ctx: GatewayContext, provider: Provider, route: UpstreamRoute): Record<string, unknown> {
  const body = upstreamBodyFor(ctx, route, ctx.target!.upstreamModel);
  provider.adjustBody?.(body, ctx, route);
  return body;
}

/** Sends `body` to the provider's endpoint through the transport (or the provider's own `send`, a simulated upstream). */
export function sendUpstream(ctx: GatewayContext, provider: Provider, route: UpstreamRoute, body: Record<string, unknown>): Promise<UpstreamResponse> {
  const { url, headers } = provider.endpoint(ctx, route);
  const call = { url, headers, body, signal: ctx.signal };
  return provider.send ? provider.send(ctx, call) : upstreamFetch(call);
}
