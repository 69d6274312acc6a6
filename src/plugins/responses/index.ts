import { ingressPlugin } from "../../core/ingress.ts";
import { openaiResponses } from "../../formats/openai-responses/index.ts";
import { responsesDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/responses in the OpenAI Responses format (Codex CLI, the openai SDK's responses API). */
export default ingressPlugin({ name: "responses", path: "/v1/responses", format: openaiResponses, detail: responsesDocs });
