import { InvalidRequestError } from "../../core/errors.ts";
import type { CanonicalRequest } from "../../core/canonical.ts";
import {
  DEFAULT_QUALITY,
  DEFAULT_SIZE,
  IMAGE_QUALITIES,
  IMAGE_SIZES,
  MAX_IMAGES,
  MAX_PROMPT_CHARS,
  imageOutputTokens,
  isImageQuality,
  isImageSize,
  type ImageQuality,
  type ImageSize,
} from "./tokens.ts";

/** What the gateway generates for a request: the client's fields with the defaults filled in. */
export interface ImageParams {
  size: ImageSize;
  quality: ImageQuality;
  n: number;
}

/** The parameters of an already validated body (null and absent fields take the defaults). */
export function imageParams(body: Record<string, unknown>): ImageParams {
  return {
    size: isImageSize(body.size) ? body.size : DEFAULT_SIZE,
    quality: isImageQuality(body.quality) ? body.quality : DEFAULT_QUALITY,
    n: typeof body.n === "number" ? body.n : 1,
  };
}

/**
 * Validates a POST /v1/images/generations body (400 naming the field and, for enumerations, the allowed
 * values) and summarizes it: `maxOutputTokens` is what the images can cost by the token table, so the
 * budget holds the price of the whole request before the call. Unknown fields pass through upstream.
 */
export function decodeImageRequest(input: unknown): CanonicalRequest {
  const body = input as Record<string, unknown>;
  if (typeof body.model !== "string" || body.model === "") {
    throw invalid("model", `'model' is required: the image model's id (see GET /v1/models)${got(body.model)}`);
  }
  if (body.prompt === undefined || body.prompt === null) throw invalid("prompt", "'prompt' is required: a text description of the image");
  if (typeof body.prompt !== "string") throw invalid("prompt", `'prompt' must be a string${got(body.prompt)}`);
  if (body.prompt.trim() === "") throw invalid("prompt", "'prompt' must not be empty");
  if (body.prompt.length > MAX_PROMPT_CHARS) {
    throw invalid("prompt", `'prompt' is ${body.prompt.length} characters long; the limit is ${MAX_PROMPT_CHARS}`);
  }
  if (body.size != null && !isImageSize(body.size)) throw invalid("size", `'size' must be one of ${IMAGE_SIZES.join(", ")}${got(body.size)}`);
  if (body.quality != null && !isImageQuality(body.quality)) {
    throw invalid("quality", `'quality' must be one of ${IMAGE_QUALITIES.join(", ")}${got(body.quality)}`);
  }
  if (body.n != null && !(Number.isInteger(body.n) && (body.n as number) >= 1 && (body.n as number) <= MAX_IMAGES)) {
    throw invalid("n", `'n' must be an integer from 1 to ${MAX_IMAGES}${got(body.n)}`);
  }
  if (body.response_format != null && body.response_format !== "b64_json") {
    throw invalid(
      "response_format",
      `'response_format' must be b64_json: images are returned inline as base64 and no hosted URL is kept${got(body.response_format)}`,
    );
  }
  if (body.stream != null && body.stream !== false) {
    throw invalid("stream", "'stream' is not supported on /v1/images/generations: the images come in one JSON answer");
  }
  const { size, quality, n } = imageParams(body);
  return { model: body.model, stream: false, maxOutputTokens: imageOutputTokens(quality, size, n), clientWantsStreamUsage: false };
}

function invalid(param: string, message: string): InvalidRequestError {
  return new InvalidRequestError(`invalid request: ${message}`, { param });
}

function got(value: unknown): string {
  return value === undefined ? "" : ` (got ${JSON.stringify(value)?.slice(0, 60) ?? String(value)})`;
}
