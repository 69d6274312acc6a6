import type { UpstreamCodec } from "../../../core/format.ts";
import { readGeminiUpstreamError } from "./errors.ts";
import { geminiFromCanonical } from "./from-canonical.ts";
import { GEMINI_FORMAT_NAME } from "./parts.ts";
import { decodeGeminiResponse } from "./response.ts";
import { createGeminiStreamDecoder } from "./stream-decoder.ts";

/**
 * Google Gemini generateContent / streamGenerateContent?alt=sse, as an upstream (docs/wire-formats.md#google-gemini).
 * Upstream only: no route accepts it from clients, so it has no client side and every client format is translated.
 */
export const gemini = {
  name: GEMINI_FORMAT_NAME,
  readUpstreamError: readGeminiUpstreamError,
  translation: {
    fromCanonical: geminiFromCanonical,
    decodeResponse: decodeGeminiResponse,
    createStreamDecoder: createGeminiStreamDecoder,
  },
} satisfies UpstreamCodec;

export { GEMINI_FORMAT_NAME } from "./parts.ts";
export { decodeGeminiCallId, encodeGeminiCallId } from "./tool-ids.ts";
