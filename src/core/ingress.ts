import { Type } from "@sinclair/typebox";
import type { AnyElysia, DocumentDecoration } from "elysia";
import { definePlugin, type Gateway, type PluginDefinition } from "./plugin.ts";
import type { IngressFormat } from "./format.ts";

/**
 * An ingress plugin: one POST route that hands the request, unparsed, to the pipeline in the client's wire format.
 * It lives in the core, next to definePlugin, because it is made of the core alone (the plugin contract, the
 * Gateway, IngressFormat) and is the one shape every ingress shares; a plugin folder keeps only what is its own.
 */
export function ingressPlugin(spec: {
  /** The plugin's name (= folder = YAML key). */
  name: string;
  path: string;
  format: IngressFormat;
  /** The route's OpenAPI operation. */
  detail: DocumentDecoration;
  /** Further routes of this ingress (count_tokens next to /v1/messages). */
  moreRoutes?(app: AnyElysia, gateway: Gateway): void;
}): PluginDefinition {
  const { path, format, detail, moreRoutes } = spec;
  return definePlugin({
    name: spec.name,
    configSchema: Type.Object({}),
    setup() {
      return {
        routes(app, gateway) {
          app.post(path, function ingress({ request }) { return gateway.handle(request, format); }, { parse: "none", detail });
          moreRoutes?.(app, gateway);
        },
      };
    },
  });
}
