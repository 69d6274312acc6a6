import type { GatewayContext } from "../../src/core/context.ts";
import type { IngressFormat } from "../../src/core/format.ts";
import type { Provider } from "../../src/core/plugin.ts";
import { routeFor, type UpstreamRoute } from "../../src/core/route.ts";
import { buildUpstreamBody, sendUpstream } from "../../src/core/upstream.ts";
import type { UpstreamResponse } from "../../src/transport/index.ts";

/** The route the core picks for this context's client on `provider` (relayed or translated). */
export function routeOf(provider: Provider, ctx: GatewayContext): UpstreamRoute {
  return routeFor(ctx.ingress as IngressFormat, provider.codecs, ctx.request.model);
}

/** The upstream body the core builds for `provider` (before onUpstreamRequest hooks). */
export function bodyFor(provider: Provider, ctx: GatewayContext): Record<string, unknown> {
  return buildUpstreamBody(ctx, provider, routeOf(provider, ctx));
}

/** Sends `body` the way the core does: the provider's endpoint, through the transport. */
export async function sendVia(provider: Provider, ctx: GatewayContext, body: Record<string, unknown>): Promise<UpstreamResponse> {
  return await sendUpstream(ctx, provider, routeOf(provider, ctx), body);
}
