import type { GatewayContext } from "../../../core/context.ts";
import type { Provider } from "../../../core/plugin.ts";
import type { Deployment } from "../../../core/deployments.ts";
import { missingKeyError } from "../key.ts";
import { deploymentBase, deploymentFields, type DeploymentSpec } from "../deployments.ts";
import { jsonHeaders } from "../../../transport/index.ts";
import { gemini } from "./codec.ts";

export interface GeminiUpstream {
  /** Where it sends, in priority order; each base URL before `/v1beta`, e.g. https://generativelanguage.googleapis.com. */
  deployments: readonly DeploymentSpec[];
  /** The statuses after which the next deployment is tried (config `retry_on`). */
  retryOn?: readonly number[];
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
  return {
    codecs: [gemini],
    ...deploymentFields(upstream.deployments.map(geminiDeployment), upstream.retryOn),
    adjustBody(body: Record<string, unknown>, ctx: GatewayContext) {
      if (ctx.upstreamOutputCap !== undefined) applyOutputCap(body, ctx.upstreamOutputCap);
    },
  };
}

function geminiDeployment(spec: DeploymentSpec): Deployment {
  const headers = spec.apiKey ? jsonHeaders({ "x-goog-api-key": spec.apiKey }) : undefined;
  return {
    ...deploymentBase(spec),
    endpoint(ctx: GatewayContext) {
      if (!headers) throw missingKeyError(ctx.request.model, "gemini", spec.apiKeyEnv);
      return { url: geminiUrl(spec.baseUrl, ctx.target!.upstreamModel, ctx.request.stream), headers };
    },
  };
}

/** The cap the budget's hold assumed, always sent (Gemini's limit includes thinking tokens too). */
function applyOutputCap(body: Record<string, unknown>, cap: number): void {
  const config = (body.generationConfig ??= {}) as Record<string, unknown>;
  const current = config.maxOutputTokens;
  if (!(typeof current === "number" && current <= cap)) config.maxOutputTokens = cap;
}
