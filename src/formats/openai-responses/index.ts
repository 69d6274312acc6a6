import type { StreamingWireFormat } from "../../core/format.ts";
import { errorResponse, type GatewayError } from "../../core/errors.ts";
import { decodeResponsesRequest } from "./request.ts";
import { createResponsesStreamRelay, readResponsesResponse, relayResponsesRequestBody, relayResponsesResponse } from "./relay.ts";
import { responsesStreamErrorFrame } from "./errors.ts";
import { readOpenAIError } from "../openai-chat/errors.ts";
import { RESPONSES_FORMAT } from "./reasoning-state.ts";
import { openaiResponsesTranslation } from "./translation/index.ts";

/**
 * The OpenAI Responses API (`POST /v1/responses`, docs/wire-formats.md#openai-responses), as Codex CLI and the openai
 * SDK speak it, and as OpenAI serves it upstream. Stateless: previous_response_id is refused, history comes in
 * `input`.
 */
export const openaiResponses: StreamingWireFormat = {
  name: RESPONSES_FORMAT,
  decodeRequest: decodeResponsesRequest,
  errorResponse: (error: GatewayError, headers?: Record<string, string>) => errorResponse(error, headers),
  relayRequestBody: relayResponsesRequestBody,
  readResponse: readResponsesResponse,
  relayResponse: relayResponsesResponse,
  createStreamRelay: createResponsesStreamRelay,
  readUpstreamError: readOpenAIError,
  streamErrorFrame: responsesStreamErrorFrame,
  translation: openaiResponsesTranslation,
};
