import type { StreamingWireFormat } from "../../core/format.ts";
import { anthropicErrorResponse, anthropicStreamErrorFrame, readAnthropicUpstreamError } from "./errors.ts";
import { createMessagesStreamRelay, readMessagesResponse, relayMessagesRequestBody, relayMessagesResponse } from "./relay.ts";
import { decodeMessagesRequest } from "./request.ts";
import { messagesTranslation } from "./translation/index.ts";
import { ANTHROPIC_MESSAGES } from "./signature.ts";

/** For the Anthropic provider's adjustBody: keeps thinking.budget_tokens below max_tokens. */
export { fitThinkingBudget } from "./translation/from-canonical.ts";
/** For the Anthropic provider's adjustBody: automatic prompt-cache breakpoints on translated routes. */
export { addAutomaticBreakpoints, minimumCacheableTokens } from "./cache.ts";

/** Anthropic Messages, as a client speaks it (POST /v1/messages) and as an upstream speaks it natively. */
export const anthropicMessages: StreamingWireFormat = {
  name: ANTHROPIC_MESSAGES,
  decodeRequest: decodeMessagesRequest,
  errorResponse: anthropicErrorResponse,
  relayRequestBody: relayMessagesRequestBody,
  readResponse: readMessagesResponse,
  relayResponse: relayMessagesResponse,
  createStreamRelay: createMessagesStreamRelay,
  readUpstreamError: readAnthropicUpstreamError,
  streamErrorFrame: anthropicStreamErrorFrame,
  translation: messagesTranslation,
};
