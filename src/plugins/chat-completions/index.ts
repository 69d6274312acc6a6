import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { clientAddress } from "../../core/app.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";

/** Ingress: POST /v1/chat/completions in the OpenAI chat-completions format. */
export default definePlugin({
  name: "chat-completions",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/chat/completions", ({ request, server }) => gateway.handle(request, openaiChat, clientAddress(server, request)), {
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
