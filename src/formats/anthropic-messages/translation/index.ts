import type { FormatTranslation } from "../../../core/format.ts";
import { createMessagesStreamDecoder } from "../stream-decoder.ts";
import { decodeMessagesResponse } from "./decode-response.ts";
import { encodeMessagesResponse } from "./encode-response.ts";
import { canonicalToMessages } from "./from-canonical.ts";
import { createMessagesStreamEncoder } from "./stream-encoder.ts";
import { messagesToCanonical } from "./to-canonical.ts";

/** Anthropic Messages <-> canonical: the client side (Messages clients on other upstreams) and the upstream side. */
export const messagesTranslation: FormatTranslation = {
  toCanonical: messagesToCanonical,
  encodeResponse: encodeMessagesResponse,
  createStreamEncoder: createMessagesStreamEncoder,
  fromCanonical: canonicalToMessages,
  decodeResponse: decodeMessagesResponse,
  createStreamDecoder: createMessagesStreamDecoder,
};
