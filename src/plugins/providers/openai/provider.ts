import type { GatewayContext } from "../../../core/context.ts";
import type { Provider } from "../../../core/plugin.ts";
import type { UpstreamRoute } from "../../../core/route.ts";
import type { Deployment } from "../../../core/deployments.ts";
import { missingKeyError } from "../key.ts";
import { deploymentBase, deploymentFields, type DeploymentSpec } from "../deployments.ts";
import { jsonHeaders } from "../../../transport/index.ts";
import { openaiChat, stripCacheControl } from "../../../formats/openai-chat/index.ts";
import { openaiResponses } from "../../../formats/openai-responses/index.ts";
import { openaiImages } from "../../../formats/openai-images/index.ts";

export interface OpenAIWireUpstream {
  /** Provider name, as the catalog's `provider` field names it. */
  name: string;
  /** Where it sends, in priority order; each base URL ends before `/chat/completions`, e.g. https://api.openai.com/v1. */
  deployments: readonly DeploymentSpec[];
  /** The statuses after which the next deployment is tried (config `retry_on`). */
  retryOn?: readonly number[];
  /** Where the budget's output cap goes when the client set none: OpenAI wants max_completion_tokens, compatible vendors max_tokens. */
  outputCapField: "max_completion_tokens" | "max_tokens";
  /** Also serves the Responses API natively at `{base_url}/responses` (OpenAI itself; compatible vendors do not). */
  responses?: boolean;
  /** Also serves image generation at `{base_url}/images/generations` (OpenAI Images format, base64 answers). */
  images?: boolean;
  /**
   * Whether it takes prompt-cache breakpoints (`cache_control` on chat content blocks, as Qwen does); default "none":
   * relayed chat bodies lose them (OpenAI answers 400 to unknown part fields).
   */
  cacheControl?: "breakpoints" | "none";
}

/** Sets an output cap field to `cap` unless it already holds a number at or below it. */
export function capOutput(body: Record<string, unknown>, field: string, cap: number): void {
  const value = body[field];
  if (!(typeof value === "number" && value <= cap)) body[field] = cap;
}

/** A provider for any upstream that speaks OpenAI chat completions. */
export function createOpenAIWireProvider(upstream: OpenAIWireUpstream): Provider {
  const deployments = upstream.deployments.map((spec) => openaiDeployment(upstream.name, spec));
  const cacheControl = upstream.cacheControl ?? "none";
  return {
    codecs: [openaiChat, ...(upstream.responses ? [openaiResponses] : []), ...(upstream.images ? [openaiImages] : [])],
    ...deploymentFields(deployments, upstream.retryOn),
    cacheControl,
    adjustBody(body: Record<string, unknown>, ctx: GatewayContext, route: UpstreamRoute) {
      if (route.codec === openaiImages) return; // priced by size and quality: no output cap field
      // Translated bodies never carry breakpoints (chatFromCanonical writes none); a relayed one keeps the client's.
      if (route.relayed && route.codec === openaiChat && cacheControl === "none") stripCacheControl(body);
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
  };
}

/** One base URL with its key: the chat, Responses and images URLs under it, headers built once. */
function openaiDeployment(provider: string, spec: DeploymentSpec): Deployment {
  const baseUrl = spec.baseUrl.replace(/\/+$/, "");
  const url = baseUrl + "/chat/completions";
  const responsesUrl = baseUrl + "/responses";
  const imagesUrl = baseUrl + "/images/generations";
  const headers = spec.apiKey ? jsonHeaders({ authorization: `Bearer ${spec.apiKey}` }) : undefined;
  return {
    ...deploymentBase(spec),
    endpoint(ctx: GatewayContext, route: UpstreamRoute) {
      if (!headers) throw missingKeyError(ctx.request.model, provider, spec.apiKeyEnv);
      const target = route.codec === openaiResponses ? responsesUrl : route.codec === openaiImages ? imagesUrl : url;
      return { url: target, headers };
    },
  };
}
