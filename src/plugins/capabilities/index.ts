import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { InvalidRequestError } from "../../core/errors.ts";

const FEATURES = [
  ["tools", "tools", "tool calling"],
  ["images", "vision", "image input"],
  ["jsonOutput", "json_output", "JSON / structured output"],
  ["reasoning", "reasoning", "reasoning / thinking"],
] as const;

/** A feature the model lacks (per the catalog) is a clear 400, never a silent drop. */
export default definePlugin({
  name: "capabilities",
  requires: ["catalog"],
  configSchema: Type.Object({}),
  setup() {
    return {
      onRequest(ctx) {
        const uses = ctx.request.uses;
        const model = ctx.model;
        if (!uses || !model) return;
        for (const [use, capability, label] of FEATURES) {
          if (uses[use] && !model.capabilities[capability]) {
            throw new InvalidRequestError(`model "${model.id}" does not support ${label}; remove it from the request or pick another model (see GET /v1/models)`, {
              param: use === "tools" ? "tools" : use === "images" ? "messages" : use === "jsonOutput" ? "response_format" : "reasoning",
            });
          }
        }
      },
    };
  },
});
