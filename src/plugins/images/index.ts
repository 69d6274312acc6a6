import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { openaiImages } from "../../formats/openai-images/index.ts";

/** Ingress: POST /v1/images/generations (OpenAI Images format), image models only, base64 answers. */
export default definePlugin({
  name: "images",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/images/generations", ({ request }) => gateway.handle(request, openaiImages), {
          parse: "none",
          detail: {
            summary: "Image generation (OpenAI Images format): base64 PNG in data[].b64_json, billed by tokens",
            description:
              "Fields: model (an image model), prompt, size (1024x1024 default, 1536x1024, 1024x1536), quality (low, medium default, high), " +
              "n (1-4, default 1). No hosted URL: response_format must be absent or b64_json. " +
              "Headers: x-gateway-request-id and x-gateway-cost (USD).",
          },
        });
      },
    };
  },
});
