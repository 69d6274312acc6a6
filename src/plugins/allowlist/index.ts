import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { ModelNotAllowedError } from "../../core/errors.ts";
import type { GatewayContext } from "../../core/context.ts";
import type { Principal } from "../auth/principal.ts";

/** The allowlist's rule, offered to whatever shows models to a key (the catalog's GET /v1/models), so both agree. */
export interface ModelAccess {
  /** Whether the caller's key may call the model. */
  allows(principal: Principal, modelId: string): boolean;
}

declare module "../../core/plugin.ts" {
  interface Services {
    allowlist: ModelAccess;
  }
}

/** A key's `models`: null calls every model, a list only those exact ids. */
function allows(principal: Principal, modelId: string): boolean {
  const models = principal.key.models;
  return models === null || models.includes(modelId);
}

/** 403 for a model the caller's key may not call. */
function refuseUnlisted(ctx: GatewayContext): void {
  const principal = ctx.principal;
  if (principal && !allows(principal, ctx.request.model)) {
    throw new ModelNotAllowedError(
      `this API key may not call model "${ctx.request.model}"; its allowlist is: ${principal.key.models!.join(", ")}`,
      { param: "model" },
    );
  }
}

/**
 * A key with a `models` allowlist calls only those exact ids. Disabled, every key calls every model, and
 * GET /v1/models lists every model to every key (the catalog asks this plugin only when it is enabled).
 */
export default definePlugin({
  name: "allowlist",
  requires: ["auth", "catalog"],
  configSchema: Type.Object({}),
  setup() {
    return {
      provides: { allows } satisfies ModelAccess,

      onRequest: refuseUnlisted,
      // count_tokens: a key counts only for the models it may call.
      onLocalRequest: refuseUnlisted,
      // A fallback model the key may not call is skipped (the catalog pointed request.model at it already).
      onFallback: refuseUnlisted,
    };
  },
});
