import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { openaiImages } from "../../formats/openai-images/index.ts";
import { imagesDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/images/generations (OpenAI Images format), image models only, base64 answers. */
export default definePlugin({
  name: "images",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/images/generations", ({ request }) => gateway.handle(request, openaiImages), {
          parse: "none",
          detail: imagesDocs,
        });
      },
    };
  },
});
