import type { GatewayContext } from "../../../core/context.ts";
import type { Provider } from "../../../core/plugin.ts";
import type { UpstreamRoute } from "../../../core/route.ts";
import { missingKeyError, missingKeyReason } from "../key.ts";
import { jsonHeaders } from "../../../transport/index.ts";
import { openaiChat } from "../../../formats/openai-chat/index.ts";
import { openaiResponses } from "../../../formats/openai-responses/index.ts";
import { openaiImages } from "../../../formats/openai-images/index.ts";

export interface OpenAIWireUpstream {
  /** Provider name, as the catalog's `provider` field names it. */
  name: string;
  /** Base URL ending before `/chat/completions`, e.g. https://api.openai.com/v1. */
  baseUrl: string;
  /** Name of the environment variable that holds the key (for the 503 message). */
  apiKeyEnv: string;
  apiKey: string | undefined;
  /** Where the budget's output cap goes when the client set none: OpenAI wants max_completion_tokens, compatible vendors max_tokens. */
  outputCapField: "max_completion_tokens" | "max_tokens";
  /** Also serves the Responses API natively at `{base_url}/responses` (OpenAI itself; compatible vendors do not). */
  responses?: boolean;
  /** Also serves image generation at `{base_url}/images/generations` (OpenAI Images format, base64 answers). */
  images?: boolean;
}

/** Sets an output cap field to `cap` unless it already holds a number at or below it. */
export function capOutput(body: Record<string, unknown>, field: string, cap: number): void {
  const value = body[field];
  if (!(typeof value === "number" && value <= cap)) body[field] = cap;
}

/** A provider for any upstream that speaks OpenAI chat completions. */
export function createOpenAIWireProvider(upstream: OpenAIWireUpstream): Provider {
  const baseUrl = upstream.baseUrl.replace(/\/+$/, "");
  const url = baseUrl + "/chat/completions";
  const responsesUrl = baseUrl + "/responses";
  const imagesUrl = baseUrl + "/images/generations";
  const headers = upstream.apiKey ? jsonHeaders({ authorization: `Bearer ${upstream.apiKey}` }) : undefined;
  return {
    codecs: [openaiChat, ...(upstream.responses ? [openaiResponses] : []), ...(upstream.images ? [openaiImages] : [])],
    unavailableReason: missingKeyReason(upstream.apiKey, upstream.apiKeyEnv),
    adjustBody(body: Record<string, unknown>, ctx: GatewayContext, route: UpstreamRoute) {
      if (route.codec === openaiImages) return; // priced by size and quality: no output cap field
      // The cap the budget's hold assumed always goes upstream: an honest upstream never bills past the hold.
      const cap = ctx.upstreamOutputCap;
      if (cap === undefined) return;
      if (route.codec === openaiResponses) {
        capOutput(body, "max_output_tokens", cap);
      } else if (body.max_tokens == null && body.max_completion_tokens == null) {
        body[upstream.outputCapField] = cap;
      } else {
        // The client's own field(s), never above the cap (a client may send both).
        if (body.max_tokens != null) capOutput(body, "max_tokens", cap);
        if (body.max_completion_tokens != null) capOutput(body, "max_completion_tokens", cap);
      }
    },
    endpoint(ctx: GatewayContext, route: UpstreamRoute) {
      if (!headers) throw missingKeyError(ctx.request.model, upstream.name, upstream.apiKeyEnv);
      const target = route.codec === openaiResponses ? responsesUrl : route.codec === openaiImages ? imagesUrl : url;
      return { url: target, headers };
    },
  };
}
