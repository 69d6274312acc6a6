import type { GatewayContext } from "../../../core/context.ts";
import type { Provider } from "../../../core/plugin.ts";
import { missingKeyError, missingKeyReason } from "../key.ts";
import { jsonHeaders } from "../../../transport/index.ts";
import { gemini } from "./codec.ts";

export interface GeminiUpstream {
  /** Base URL before `/v1beta`, e.g. https://generativelanguage.googleapis.com. */
  baseUrl: string;
  /** Name of the environment variable that holds the key (for the 503 message). */
  apiKeyEnv: string;
  apiKey: string | undefined;
}

/**
 * The generateContent URL of a model: `:streamGenerateContent?alt=sse` for streams
 * (https://ai.google.dev/api/generate-content).
 */
export function geminiUrl(baseUrl: string, upstreamModel: string, stream: boolean): string {
  const model = encodeURIComponent(upstreamModel.replace(/^models\//, ""));
  const base = `${baseUrl.replace(/\/+$/, "")}/v1beta/models/${model}`;
  return stream ? `${base}:streamGenerateContent?alt=sse` : `${base}:generateContent`;
}

/** The Gemini API upstream: every client format is translated to generateContent. */
export function createGeminiProvider(upstream: GeminiUpstream): Provider {
  const headers = upstream.apiKey ? jsonHeaders({ "x-goog-api-key": upstream.apiKey }) : undefined;
  return {
    codecs: [gemini],
    unavailableReason: missingKeyReason(upstream.apiKey, upstream.apiKeyEnv),
    adjustBody(body: Record<string, unknown>, ctx: GatewayContext) {
      if (ctx.upstreamOutputCap !== undefined) applyOutputCap(body, ctx.upstreamOutputCap);
    },
    endpoint(ctx: GatewayContext) {
      if (!headers) throw missingKeyError(ctx.request.model, "gemini", upstream.apiKeyEnv);
      return { url: geminiUrl(upstream.baseUrl, ctx.target!.upstreamModel, ctx.request.stream), headers };
    },
  };
}

/** The cap the budget's hold assumed, always sent (Gemini's limit includes thinking tokens too). */
function applyOutputCap(body: Record<string, unknown>, cap: number): void {
  const config = (body.generationConfig ??= {}) as Record<string, unknown>;
  const current = config.maxOutputTokens;
  if (!(typeof current === "number" && current <= cap)) config.maxOutputTokens = cap;
}
