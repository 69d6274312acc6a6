import type { GatewayContext } from "./context.ts";
import type { IngressFormat, IngressTranslation, UpstreamCodec, UpstreamTranslation, WireFormat } from "./format.ts";
import { InvalidRequestError } from "./errors.ts";

/**
 * How a request reaches its upstream, decided once per request by the core (routeFor) and handed to the
 * provider and every later step: relayed (the client's format is the upstream's own) or translated.
 */
export type UpstreamRoute = RelayedRoute | TranslatedRoute;

export interface RelayedRoute {
  readonly relayed: true;
  readonly ingress: IngressFormat;
  /** The client's own format, which the upstream speaks natively. */
  readonly codec: WireFormat;
}

export interface TranslatedRoute {
  readonly relayed: false;
  readonly ingress: IngressFormat & { readonly translation: IngressTranslation };
  readonly codec: UpstreamCodec & { readonly translation: UpstreamTranslation };
}

/**
 * The route to an upstream that speaks `codecs` (preferred first): the client's format when the upstream speaks
 * it, else translation to the first. Throws when that pair cannot be translated.
 */
export function routeFor(ingress: IngressFormat, codecs: readonly UpstreamCodec[], model: string): UpstreamRoute {
  const native = codecs.find((codec) => codec === (ingress as unknown));
  if (native !== undefined && isWireFormat(native)) return { relayed: true, ingress, codec: native };
  const codec = codecs[0]!;
  if (!ingress.translation || !codec.translation) {
    throw new InvalidRequestError(`model "${model}" is served in the ${codec.name} format; translation from ${ingress.name} is not available`, {
      param: "model",
    });
  }
  return { relayed: false, ingress: ingress as TranslatedRoute["ingress"], codec: codec as TranslatedRoute["codec"] };
}

function isWireFormat(codec: UpstreamCodec): codec is WireFormat {
  return typeof (codec as Partial<WireFormat>).relayRequestBody === "function";
}

/**
 * The body for the upstream: the client's own body relayed (model renamed), or the canonical request encoded
 * in the upstream's format.
 */
export function upstreamBodyFor(ctx: GatewayContext, route: UpstreamRoute, upstreamModel: string): Record<string, unknown> {
  if (route.relayed) return route.codec.relayRequestBody(ctx, upstreamModel);
  ctx.canonical ??= route.ingress.translation.toCanonical(ctx.body);
  return route.codec.translation.fromCanonical(ctx.canonical, upstreamModel);
}
