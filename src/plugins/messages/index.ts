import { Type } from "@sinclair/typebox";
import { definePlugin, type Gateway } from "../../core/plugin.ts";
import { ModelNotAllowedError, asGatewayError } from "../../core/errors.ts";
import { anthropicMessages } from "../../formats/anthropic-messages/index.ts";
import { validateCountTokensRequest } from "../../formats/anthropic-messages/request.ts";
import { unknownModel } from "../catalog/index.ts";
import type { ModelAccess } from "../allowlist/index.ts";
import { countInputTokens } from "./count-tokens.ts";
import { countTokensDocs, messagesDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/messages (Anthropic Messages, any model family) and POST /v1/messages/count_tokens. */
export default definePlugin({
  name: "messages",
  requires: ["auth", "catalog"],
  configSchema: Type.Object({}),
  setup(_config, host) {
    const auth = host.service("auth");
    const catalog = host.service("catalog");
    let access: ModelAccess | undefined;

    /** count_tokens: authenticated, validated like a Messages request, answered with an upper bound. */
    async function countTokens(request: Request, gateway: Gateway): Promise<Response> {
      try {
        const principal = await auth.authenticate(request.headers);
        const body = validateCountTokensRequest(await gateway.readJson(request));
        const model = catalog.get(body.model);
        if (!model) throw unknownModel(catalog, body.model);
        if (access && !access.allows(principal, model.id)) {
          throw new ModelNotAllowedError(`this API key may not call model "${model.id}"; its allowlist is: ${principal.key.models!.join(", ")}`, { param: "model" });
        }
        return Response.json({ input_tokens: countInputTokens(body as Record<string, unknown>, model.family) });
      } catch (error) {
        return anthropicMessages.errorResponse(asGatewayError(error));
      }
    }

    return {
      routes(app, gateway) {
        // count_tokens follows the rule requests follow: the allowlist plugin's, only when it is enabled.
        access = host.has("allowlist") ? host.service("allowlist") : undefined;
        app.post("/v1/messages", ({ request }) => gateway.handle(request, anthropicMessages), {
          parse: "none",
          detail: messagesDocs,
        });
        app.post("/v1/messages/count_tokens", ({ request }) => countTokens(request, gateway), {
          parse: "none",
          detail: countTokensDocs,
        });
      },
    };
  },
});
