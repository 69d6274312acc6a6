import type { GatewayContext } from "./context.ts";
import type { WireFormat } from "./format.ts";
import { InvalidRequestError } from "./errors.ts";

/** Whether this request crosses formats (client format ≠ upstream format). */
export function crossesFormats(ctx: GatewayContext, upstream: WireFormat): boolean {
  return ctx.ingress !== upstream;
}

/** Throws when a pair of formats cannot be translated. */
export function assertTranslatable(ingress: WireFormat, upstream: WireFormat, model: string): void {
  if (!ingress.translation || !upstream.translation) {
    throw new InvalidRequestError(`model "${model}" is served in the ${upstream.name} format; translation from ${ingress.name} is not available`, {
      param: "model",
    });
  }
}

/**
 * The body for an upstream of `format`: the client's own body relayed (model renamed) when the formats
 * match, otherwise the canonical request encoded for the upstream. What providers call from buildBody.
 */
export function upstreamBodyFor(ctx: GatewayContext, format: WireFormat, upstreamModel: string): Record<string, unknown> {
  if (!crossesFormats(ctx, format)) return format.relayRequestBody(ctx, upstreamModel);
  assertTranslatable(ctx.ingress, format, ctx.request.model);
  ctx.canonical ??= ctx.ingress.translation!.toCanonical(ctx.body);
  return format.translation!.fromCanonical(ctx.canonical, upstreamModel);
}
