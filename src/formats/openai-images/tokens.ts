/**
 * The image sizes and qualities the gateway serves, and the output tokens one image costs.
 *
 * No official per-size token table exists for the gpt-image-2.x models, so the gateway uses OpenAI's published
 * gpt-image-1 table (https://platform.openai.com/docs/guides/image-generation). It is used only to hold funds before
 * the call (the budget reservation); the charge is always the usage the upstream reports.
 */

export const IMAGE_SIZES = ["1024x1024", "1536x1024", "1024x1536"] as const;
export const IMAGE_QUALITIES = ["low", "medium", "high"] as const;
export type ImageSize = (typeof IMAGE_SIZES)[number];
export type ImageQuality = (typeof IMAGE_QUALITIES)[number];

/** Used when the client leaves the field out (OpenAI's own default is `auto`, which cannot be priced before the call). */
export const DEFAULT_SIZE: ImageSize = "1024x1024";
export const DEFAULT_QUALITY: ImageQuality = "medium";
/** Images per request (`n`). OpenAI allows up to 10; 4 bounds the hold to 4 x 6,240 tokens. */
export const MAX_IMAGES = 4;
/** OpenAI's prompt limit for the GPT image models, in characters. */
export const MAX_PROMPT_CHARS = 32_000;

/** Output tokens of one image by quality and size: gpt-image-1's table (OpenAI image-generation guide). */
export const IMAGE_OUTPUT_TOKENS: Readonly<Record<ImageQuality, Readonly<Record<ImageSize, number>>>> = {
  low: { "1024x1024": 272, "1024x1536": 408, "1536x1024": 400 },
  medium: { "1024x1024": 1056, "1024x1536": 1584, "1536x1024": 1568 },
  high: { "1024x1024": 4160, "1024x1536": 6240, "1536x1024": 6208 },
};

/** Output tokens of `n` images of this quality and size. */
export function imageOutputTokens(quality: ImageQuality, size: ImageSize, n = 1): number {
  return IMAGE_OUTPUT_TOKENS[quality][size] * n;
}

export function isImageSize(value: unknown): value is ImageSize {
  return typeof value === "string" && (IMAGE_SIZES as readonly string[]).includes(value);
}

export function isImageQuality(value: unknown): value is ImageQuality {
  return typeof value === "string" && (IMAGE_QUALITIES as readonly string[]).includes(value);
}
