import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { openaiResponses } from "../../formats/openai-responses/index.ts";

/** Ingress: POST /v1/responses in the OpenAI Responses format (Codex CLI, the openai SDK's responses API). */
export default definePlugin({
  name: "responses",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/responses", ({ request }) => gateway.handle(request, openaiResponses), {
          parse: "none",
          detail: {
            summary: "Responses (OpenAI Responses API, as Codex CLI uses it), streaming or not",
            description:
              "Stateless: send the whole conversation in `input` every turn (previous_response_id is refused with a 400). " +
              "Headers: x-gateway-request-id on every answer; x-gateway-cost (USD) on non-streaming answers.",
          },
        });
      },
    };
  },
});
