import type { FormatTranslation } from "../../../core/format.ts";
import { encodeResponsesResponse } from "./encode-response.ts";
import { createResponsesStreamEncoder } from "./stream-encoder.ts";
import { responsesToCanonical } from "./to-canonical.ts";
import { createResponsesStreamDecoder, decodeResponsesResponse, responsesFromCanonical } from "./upstream.ts";

/** OpenAI Responses to and from the canonical form: client side (to/encode) and upstream side (from/decode). */
export const openaiResponsesTranslation: FormatTranslation = {
  toCanonical: responsesToCanonical,
  encodeResponse: encodeResponsesResponse,
  createStreamEncoder: createResponsesStreamEncoder,
  fromCanonical: responsesFromCanonical,
  decodeResponse: decodeResponsesResponse,
  createStreamDecoder: createResponsesStreamDecoder,
};
