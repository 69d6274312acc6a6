import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";
import { chatCompletionsDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/chat/completions in the OpenAI chat-completions format. */
export default definePlugin({
  name: "chat-completions",
  configSchema: Type.Object({}),
  setup() {
    return {
      routes(app, gateway) {
        app.post("/v1/chat/completions", ({ request }) => gateway.handle(request, openaiChat), {
          parse: "none",
          detail: chatCompletionsDocs,
        });
      },
    };
  },
});
