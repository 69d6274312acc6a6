import { readOpenAIError } from "../openai-chat/errors.ts";
import type { WireFormat } from "../../core/format.ts";
import type { GatewayContext } from "../../core/context.ts";
import { UpstreamError, errorBody, errorResponse, type GatewayError } from "../../core/errors.ts";
import type { Usage } from "../../core/canonical.ts";
import { decodeImageRequest, imageParams } from "./request.ts";
import { IMAGE_OUTPUT_TOKENS, isImageQuality, isImageSize } from "./tokens.ts";

export { IMAGE_OUTPUT_TOKENS, IMAGE_QUALITIES, IMAGE_SIZES, imageOutputTokens } from "./tokens.ts";
export { imageParams } from "./request.ts";

/** The name of this format: the catalog serves only image models on it. */
export const OPENAI_IMAGES = "openai-images";

interface ImagesUsage {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
  input_tokens_details?: { text_tokens?: number; image_tokens?: number; cached_tokens?: number } | null;
}

/**
 * Images API usage -> canonical usage: input_tokens (text, plus image tokens on edits) in, output_tokens
 * (image tokens) out. Cached prompt tokens, when an upstream reports them, are priced as cache reads.
 */
export function readImagesUsage(usage: ImagesUsage | null | undefined): Usage | undefined {
  if (!usage || typeof usage !== "object" || typeof usage.output_tokens !== "number") return undefined;
  const cached = usage.input_tokens_details?.cached_tokens;
  return {
    inputTokens: usage.input_tokens ?? 0,
    cacheReadTokens: typeof cached === "number" ? cached : 0,
    cacheWriteTokens: 0,
    outputTokens: usage.output_tokens,
    reasoningTokens: 0,
  };
}

/** The images an answer carries; an answer without base64 data is an upstream failure (nothing billed). */
function imagesOf(body: Record<string, unknown>): Record<string, unknown>[] {
  const data = body.data;
  if (!Array.isArray(data) || data.length === 0 || !data.every((item) => typeof item?.b64_json === "string" && item.b64_json !== "")) {
    throw new UpstreamError("the image upstream answered without base64 image data (data[].b64_json)");
  }
  return data;
}

/**
 * OpenAI Images (POST /v1/images/generations), as a client speaks it and as an upstream speaks it.
 * Non-streaming only (no stream relay: decodeRequest refuses `stream`); relay-only (no translation to chat formats). Images travel inline as base64:
 * `response_format` is never sent upstream (the GPT image models always answer b64_json and refuse the
 * parameter) and any hosted `url` is stripped from the answer.
 */
export const openaiImages: WireFormat = {
  name: OPENAI_IMAGES,
  decodeRequest: decodeImageRequest,
  errorResponse: (error: GatewayError, headers?: Record<string, string>) => errorResponse(error, headers),

  relayRequestBody(ctx: GatewayContext, upstreamModel: string) {
    // Size, quality and n are sent explicitly so the upstream generates what the reservation priced.
    const { response_format: _format, stream: _stream, partial_images: _partial, ...rest } = ctx.body;
    return { ...rest, model: upstreamModel, ...imageParams(ctx.body) };
  },

  readResponse(body) {
    const images = imagesOf(body);
    const reported = readImagesUsage(body.usage as ImagesUsage | undefined);
    if (reported) return { usage: reported };
    // No usage reported: bill the table's output for what was generated (dearest entry when the answer
    // does not echo size and quality); the prompt is not billed.
    const quality = isImageQuality(body.quality) ? body.quality : "high";
    const perImage = isImageSize(body.size) ? IMAGE_OUTPUT_TOKENS[quality][body.size] : Math.max(...Object.values(IMAGE_OUTPUT_TOKENS[quality]));
    return { usage: { inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: perImage * images.length, reasoningTokens: 0 } };
  },

  relayResponse(body) {
    const data = imagesOf(body).map((item) =>
      typeof item.revised_prompt === "string" ? { b64_json: item.b64_json, revised_prompt: item.revised_prompt } : { b64_json: item.b64_json },
    );
    const { url: _url, ...rest } = body;
    return { ...rest, data };
  },

  readUpstreamError: readOpenAIError,

  streamErrorFrame: (error: GatewayError) => `data: ${JSON.stringify(errorBody(error))}\n\n`,
};
