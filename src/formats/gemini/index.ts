import type { FormatTranslation, WireFormat } from "../../core/format.ts";
import { GatewayError } from "../../core/errors.ts";
import { geminiErrorResponse, geminiStreamErrorFrame, readGeminiUpstreamError } from "./errors.ts";
import { geminiFromCanonical } from "./from-canonical.ts";
import { GEMINI_FORMAT_NAME } from "./parts.ts";
import { decodeGeminiResponse, readGeminiResponse } from "./response.ts";
import { createGeminiStreamDecoder } from "./stream-decoder.ts";

/** Gemini is only ever an upstream here: no route accepts it from clients, so client-side members are bugs. */
function upstreamOnly(member: string): never {
  throw new GatewayError(`internal error: ${GEMINI_FORMAT_NAME} is an upstream-only format; ${member} must not be called`);
}

const geminiTranslation: FormatTranslation = {
  toCanonical: () => upstreamOnly("translation.toCanonical"),
  encodeResponse: () => upstreamOnly("translation.encodeResponse"),
  createStreamEncoder: () => upstreamOnly("translation.createStreamEncoder"),
  fromCanonical: geminiFromCanonical,
  decodeResponse: decodeGeminiResponse,
  createStreamDecoder: createGeminiStreamDecoder,
};

/**
 * Google Gemini generateContent / streamGenerateContent?alt=sse, as an upstream (docs/wire-formats.md#google-gemini).
 */
export const gemini: WireFormat = {
  name: GEMINI_FORMAT_NAME,
  decodeRequest: () => upstreamOnly("decodeRequest"),
  errorResponse: geminiErrorResponse,
  relayRequestBody: () => upstreamOnly("relayRequestBody"),
  readResponse: readGeminiResponse,
  relayResponse: () => upstreamOnly("relayResponse"),
  createStreamRelay: () => upstreamOnly("createStreamRelay"),
  readUpstreamError: readGeminiUpstreamError,
  streamErrorFrame: geminiStreamErrorFrame,
  translation: geminiTranslation,
};

export { GEMINI_FORMAT_NAME } from "./parts.ts";
export { decodeGeminiCallId, encodeGeminiCallId } from "./tool-ids.ts";
