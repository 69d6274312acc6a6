import { readOpenAIError } from "./errors.ts";
import type { StreamingWireFormat } from "../../core/format.ts";
import { errorBody, errorResponse, type GatewayError } from "../../core/errors.ts";
import { decodeChatRequest } from "./request.ts";
import { createChatStreamRelay, readChatUsage, relayChatRequestBody, relayChatResponse } from "./relay.ts";
import { openaiChatTranslation } from "./translation/index.ts";

/** For providers whose upstream takes no prompt-cache breakpoints: removes them from a relayed body. */
export { stripCacheControl } from "./cache-control.ts";

/** OpenAI Chat Completions, as a client speaks it and as an upstream speaks it. */
export const openaiChat: StreamingWireFormat = {
  name: "openai-chat",
  decodeRequest: decodeChatRequest,
  errorResponse: (error: GatewayError, headers?: Record<string, string>) => errorResponse(error, headers),
  relayRequestBody: relayChatRequestBody,
  readResponse(body) {
    // No id: the client gets the request id in its place (relayChatResponse).
    return { usage: readChatUsage(body.usage) };
  },
  relayResponse: relayChatResponse,
  createStreamRelay: createChatStreamRelay,
  readUpstreamError: readOpenAIError,
  streamErrorFrame: (error: GatewayError) => `data: ${JSON.stringify(errorBody(error))}\n\n`,
  translation: openaiChatTranslation,
};
