import { GatewayError } from "../../core/errors.ts";
import { ingressPlugin } from "../../core/ingress.ts";
import type { LocalAnswer } from "../../core/plugin.ts";
import { anthropicMessages } from "../../formats/anthropic-messages/index.ts";
import { validateCountTokensRequest } from "../../formats/anthropic-messages/request.ts";
import { countInputTokens } from "./count-tokens.ts";
import { countTokensDocs, messagesDocs } from "../../openapi/inference.ts";

/**
 * count_tokens, answered by the gateway itself: the pipeline authenticates, routes the model, applies the
 * allowlist and counts the request against the key's RPM (the stages' onLocalRequest); nothing goes upstream,
 * nothing is held or billed.
 */
const countTokens: LocalAnswer = {
  decode(body) {
    const request = validateCountTokensRequest(body);
    return { model: request.model, stream: false, clientWantsStreamUsage: false };
  },
  answer(ctx) {
    if (!ctx.model) throw new GatewayError("no plugin routed the request (is the catalog plugin enabled?)");
    return { input_tokens: countInputTokens(ctx.body, ctx.model.family) };
  },
};

/** Ingress: POST /v1/messages (Anthropic Messages, any model family) and POST /v1/messages/count_tokens. */
export default ingressPlugin({
  name: "messages",
  path: "/v1/messages",
  format: anthropicMessages,
  detail: messagesDocs,
  moreRoutes(app, gateway) {
    app.post("/v1/messages/count_tokens", function countTokensRoute({ request }) { return gateway.answerLocally(request, anthropicMessages, countTokens); }, {
      parse: "none",
      detail: countTokensDocs,
    });
  },
});
