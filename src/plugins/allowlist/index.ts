import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { ModelNotAllowedError } from "../../core/errors.ts";

/** A key with a `models` allowlist calls only those exact ids. */
export default definePlugin({
  name: "allowlist",
  requires: ["auth", "catalog"],
  configSchema: Type.Object({}),
  setup() {
    return {
      onRequest(ctx) {
        const allowed = ctx.principal?.key.models;
        if (allowed && !allowed.includes(ctx.request.model)) {
          throw new ModelNotAllowedError(
            `this API key may not call model "${ctx.request.model}"; its allowlist is: ${allowed.join(", ")}`,
            { param: "model" },
          );
        }
      },
    };
  },
});
