import type { FormatTranslation } from "../../../core/format.ts";
import { chatFromCanonical } from "./from-canonical.ts";
import { decodeChatResponse, encodeChatResponse } from "./response.ts";
import { createChatStreamDecoder } from "./stream-decoder.ts";
import { createChatStreamEncoder } from "./stream-encoder.ts";
import { chatToCanonical } from "./to-canonical.ts";

/** OpenAI Chat Completions to and from the canonical form: client side (to/encode) and upstream side (from/decode). */
export const openaiChatTranslation: FormatTranslation = {
  toCanonical: chatToCanonical,
  encodeResponse: encodeChatResponse,
  createStreamEncoder: createChatStreamEncoder,
  fromCanonical: chatFromCanonical,
  decodeResponse: decodeChatResponse,
  createStreamDecoder: createChatStreamDecoder,
};

export { toChatToolId } from "./tool-calls.ts";
