import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";

/** Ingress: POST /v1/chat/completions in the OpenAI chat-completions format. */
export default definePlugin({
  name: "chat-completions",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/chat/completions", ({ request }) => gateway.handle(request, openaiChat), {
          parse: "none",
          detail: {
            summary: "Chat completions (OpenAI format), streaming or not",
            description: "Headers: x-gateway-request-id on every answer; x-gateway-cost (USD) on non-streaming answers.",
          },
        });
      },
    };
  },
});
