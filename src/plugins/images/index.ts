import { ingressPlugin } from "../../core/ingress.ts";
import { openaiImages } from "../../formats/openai-images/index.ts";
import { imagesDocs } from "../../openapi/inference.ts";

/** Ingress: POST /v1/images/generations (OpenAI Images format), image models only, base64 answers. */
export default ingressPlugin({ name: "images", path: "/v1/images/generations", format: openaiImages, detail: imagesDocs });
