/** The sandbox's simulated image upstream: deterministic tiny PNGs with usage from the token table. Pure. */
import { IMAGE_OUTPUT_TOKENS, isImageQuality, isImageSize } from "../../formats/openai-images/tokens.ts";
import { encodePng } from "./png.ts";
import { sandboxTokens } from "./reply.ts";

interface ImagesBody {
  prompt?: unknown;
  size?: unknown;
  quality?: unknown;
  n?: unknown;
}

/** FNV-1a, for colours that depend on the prompt only. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * An OpenAI Images answer: one PNG per image, 1/128 of the requested size (8x8, 12x8 or 8x12), a
 * two-colour checkerboard derived from the prompt; usage: the prompt at one token per 4 characters, the
 * output at the gpt-image-1 table for the size and quality.
 */
export function sandboxImages(body: ImagesBody) {
  const prompt = typeof body.prompt === "string" ? body.prompt : "";
  const size = isImageSize(body.size) ? body.size : "1024x1024";
  const quality = isImageQuality(body.quality) ? body.quality : "medium";
  const n = typeof body.n === "number" && body.n > 0 ? body.n : 1;
  const [width, height] = size.split("x").map((side) => Number(side) / 128) as [number, number];
  const data = Array.from({ length: n }, (_, index) => {
    const seed = hash(`${prompt}#${index}`);
    const a = [seed & 0xff, (seed >>> 8) & 0xff, (seed >>> 16) & 0xff] as const;
    const b = [255 - a[0], 255 - a[1], 255 - a[2]] as const;
    const png = encodePng(width, height, (x, y) => ((x + y) % 2 === 0 ? a : b));
    return { b64_json: Buffer.from(png).toString("base64") };
  });
  const input = sandboxTokens(prompt);
  const output = IMAGE_OUTPUT_TOKENS[quality][size] * n;
  return {
    created: Math.floor(Date.now() / 1000),
    background: "opaque",
    data,
    output_format: "png",
    quality,
    size,
    usage: {
      input_tokens: input,
      input_tokens_details: { text_tokens: input, image_tokens: 0 },
      output_tokens: output,
      total_tokens: input + output,
    },
  };
}
