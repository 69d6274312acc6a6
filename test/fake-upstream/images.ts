/**
 * OpenAI Images (`POST /v1/images/generations`) for the fake upstream, as api.openai.com answers it for the
 * GPT image models: `{created, background, data: [{b64_json}], output_format, quality, size, usage}`, where
 * every image is a small valid PNG and usage is `{input_tokens, input_tokens_details: {text_tokens,
 * image_tokens}, output_tokens, total_tokens}`.
 *
 * Like OpenAI it refuses `response_format` for gpt-image models ("Unknown parameter"), a missing or empty
 * prompt, and sizes / qualities / n outside what the API takes.
 *
 * Deterministic usage (exported so tests compute exact costs): input_tokens = the prompt's words
 * (`imagePromptTokens`); output_tokens = gpt-image-1's table[quality][size] x n (`imageOutputTokensOf`).
 *
 * Scenario control: `[[fake {json}]]` inside the prompt. Keys (all optional):
 *   usage: {input_tokens, output_tokens, text_tokens, image_tokens, total_tokens}   reported usage override
 *   no_usage: true          answer without `usage`
 *   with_url: true          also put a hosted `url` in every data item (the gateway must strip it)
 *   no_image: true          data items without b64_json (an upstream failure for the gateway)
 *   status, error           answer with that HTTP status and an OpenAI error body
 *   delay_ms, headers       as openai.ts
 */
import { jsonResponse, sleep, type Ctx } from "./server.ts";
import { registerFake } from "./registry.ts";
import { INVALID_API_KEY_JSON, buildErrorBody, countWords, type FakeDirective } from "./openai.ts";
import { encodePng } from "../../src/plugins/sandbox/png.ts";

export interface ImagesDirective extends Pick<FakeDirective, "status" | "error" | "delay_ms" | "headers" | "no_usage"> {
  usage?: { input_tokens?: number; output_tokens?: number; text_tokens?: number; image_tokens?: number; total_tokens?: number };
  with_url?: boolean;
  no_image?: boolean;
}

/** gpt-image-1's output tokens per image (OpenAI image-generation guide). */
export const FAKE_IMAGE_TOKENS: Record<string, Record<string, number>> = {
  low: { "1024x1024": 272, "1024x1536": 408, "1536x1024": 400 },
  medium: { "1024x1024": 1056, "1024x1536": 1584, "1536x1024": 1568 },
  high: { "1024x1024": 4160, "1024x1536": 6240, "1536x1024": 6208 },
};
const SIZES = ["1024x1024", "1536x1024", "1024x1536", "auto"];
const QUALITIES = ["low", "medium", "high", "auto"];

/** Input tokens the fake reports for a prompt: its word count, plus 1 (never 0). */
export function imagePromptTokens(prompt: string): number {
  return countWords(prompt) + 1;
}

/** Output tokens the fake reports (auto quality = medium, auto size = 1024x1024). */
export function imageOutputTokensOf(quality = "auto", size = "auto", n = 1): number {
  const q = quality === "auto" ? "medium" : quality;
  const s = size === "auto" ? "1024x1024" : size;
  return FAKE_IMAGE_TOKENS[q]![s]! * n;
}

/** The PNG the fake returns: 1/128 of the size (so 8x8, 12x8 or 8x12), a gradient. */
export function fakePng(size: string): Uint8Array {
  const [w, h] = size.split("x").map((side) => Number(side) / 128) as [number, number];
  return encodePng(w, h, (x, y) => [(x * 31) & 0xff, (y * 29) & 0xff, 0x80]);
}

function error(status: number, err: FakeDirective["error"], headers?: Record<string, string>): Response {
  return jsonResponse(status, JSON.stringify(buildErrorBody(status, err)), headers);
}

function parseImagesDirective(prompt: string): ImagesDirective | null {
  const start = prompt.indexOf("[[fake");
  if (start < 0) return null;
  let end = prompt.indexOf("]]", start);
  while (end >= 0) {
    const slice = prompt.slice(start + "[[fake".length, end).trim();
    if (slice === "") return {};
    try {
      const parsed = JSON.parse(slice);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as ImagesDirective;
    } catch {}
    end = prompt.indexOf("]]", end + 1);
  }
  throw new Error("malformed [[fake ...]] directive");
}

export async function handleImages(ctx: Ctx): Promise<Response> {
  const auth = ctx.req.headers.get("authorization") ?? "";
  if (!/^bearer \S+/i.test(auth)) return jsonResponse(401, INVALID_API_KEY_JSON);
  const body = ctx.body;
  if (ctx.jsonError || !body || typeof body !== "object") return error(400, { message: "We could not parse the JSON body of your request." });
  const model = typeof body.model === "string" ? body.model : "dall-e-2";
  if (typeof body.prompt !== "string" || body.prompt === "") {
    return error(400, { message: "Missing required parameter: 'prompt'.", param: "prompt", code: "missing_required_parameter" });
  }
  if (model.startsWith("gpt-image") && body.response_format !== undefined) {
    return error(400, { message: "Unknown parameter: 'response_format'.", param: "response_format", code: "unknown_parameter" });
  }
  const size = body.size ?? "auto";
  const quality = body.quality ?? "auto";
  const n = body.n ?? 1;
  if (!SIZES.includes(size)) {
    return error(400, { message: `Invalid value: '${size}'. Supported values are: '1024x1024', '1024x1536', '1536x1024', and 'auto'.`, param: "size", code: "invalid_value" });
  }
  if (!QUALITIES.includes(quality)) {
    return error(400, { message: `Invalid value: '${quality}'. Supported values are: 'low', 'medium', 'high', and 'auto'.`, param: "quality", code: "invalid_value" });
  }
  if (!Number.isInteger(n) || n < 1 || n > 10) return error(400, { message: `Invalid 'n': integer between 1 and 10 expected.`, param: "n", code: "invalid_value" });

  let d: ImagesDirective | null;
  try {
    d = parseImagesDirective(body.prompt);
  } catch (e) {
    return error(400, { message: `fake upstream: ${(e as Error).message}`, code: "fake_directive_error" });
  }
  if (d?.delay_ms) await sleep(d.delay_ms, ctx.signal);
  if ((d?.status ?? 0) >= 400 || d?.error !== undefined) return error(d!.status ?? 500, d!.error, d!.headers);

  const actualSize = size === "auto" ? "1024x1024" : size;
  const actualQuality = quality === "auto" ? "medium" : quality;
  const png = Buffer.from(fakePng(actualSize)).toString("base64");
  const data = Array.from({ length: n }, (_, index) => ({
    ...(d?.no_image ? {} : { b64_json: png }),
    ...(d?.with_url ? { url: `https://images.example.invalid/${index}.png` } : {}),
  }));
  const text = d?.usage?.text_tokens ?? imagePromptTokens(body.prompt);
  const image = d?.usage?.image_tokens ?? 0;
  const input = d?.usage?.input_tokens ?? text + image;
  const output = d?.usage?.output_tokens ?? imageOutputTokensOf(actualQuality, actualSize, n);
  const usage = { input_tokens: input, input_tokens_details: { text_tokens: text, image_tokens: image }, output_tokens: output, total_tokens: d?.usage?.total_tokens ?? input + output };
  const answer = {
    created: Math.floor(Date.now() / 1000),
    background: "opaque",
    data,
    output_format: "png",
    quality: actualQuality,
    size: actualSize,
    ...(d?.no_usage ? {} : { usage }),
  };
  return jsonResponse(200, JSON.stringify(answer), d?.headers);
}

registerFake("openai-images", [{ method: "POST", path: "/v1/images/generations", handler: handleImages }]);
