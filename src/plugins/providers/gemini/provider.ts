import type { GatewayContext } from "../../../core/context.ts";
import type { Provider } from "../../../core/plugin.ts";
import { missingKeyReason } from "../key.ts";
import { ProviderUnavailableError } from "../../../core/errors.ts";
import { jsonHeaders, upstreamFetch } from "../../../transport/index.ts";
import { upstreamBodyFor } from "../../../core/translate.ts";
import { gemini } from "../../../formats/gemini/index.ts";

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
    formats: [gemini],
    unavailableReason: missingKeyReason(upstream.apiKey, upstream.apiKeyEnv),
    buildBody(ctx: GatewayContext, format) {
      const body = upstreamBodyFor(ctx, format, ctx.target!.upstreamModel);
      if (ctx.upstreamOutputCap !== undefined) applyOutputCap(body, ctx.upstreamOutputCap);
      return body;
    },
    async send(ctx, body) {
      if (!upstream.apiKey) {
        throw new ProviderUnavailableError(
          `model "${ctx.request.model}" is served by gemini, which has no API key: set ${upstream.apiKeyEnv} and restart the gateway`,
        );
      }
      const url = geminiUrl(upstream.baseUrl, ctx.target!.upstreamModel, ctx.request.stream);
      return upstreamFetch({ url, headers: headers!, body, signal: ctx.signal });
    },
  };
}

/** The cap the budget's hold assumed, always sent (Gemini's limit includes thinking tokens too). */
function applyOutputCap(body: Record<string, unknown>, cap: number): void {
  const config = (body.generationConfig ??= {}) as Record<string, unknown>;
  const current = config.maxOutputTokens;
  if (!(typeof current === "number" && current <= cap)) config.maxOutputTokens = cap;
}
