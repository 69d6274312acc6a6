import { ingressPlugin } from "../../core/ingress.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";
import { chatCompletionsDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/chat/completions in the OpenAI chat-completions format. */
export default ingressPlugin({ name: "chat-completions", path: "/v1/chat/completions", format: openaiChat, detail: chatCompletionsDocs });
