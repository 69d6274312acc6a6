import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { openaiResponses } from "../../formats/openai-responses/index.ts";
import { responsesDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/responses in the OpenAI Responses format (Codex CLI, the openai SDK's responses API). */
export default definePlugin({
  name: "responses",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/responses", ({ request }) => gateway.handle(request, openaiResponses), {
          parse: "none",
          detail: responsesDocs,
        });
      },
    };
  },
});
