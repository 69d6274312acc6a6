import type { GatewayContext } from "../../../core/context.ts";
import type { Provider } from "../../../core/plugin.ts";
import type { UpstreamRoute } from "../../../core/route.ts";
import type { Deployment } from "../../../core/deployments.ts";
import { missingKeyError } from "../key.ts";
import { deploymentBase, deploymentFields, type DeploymentSpec } from "../deployments.ts";
import { jsonHeaders } from "../../../transport/index.ts";
import { addAutomaticBreakpoints, anthropicMessages, fitThinkingBudget, minimumCacheableTokens } from "../../../formats/anthropic-messages/index.ts";

export interface AnthropicUpstream {
  name: string;
  /** Where it sends, in priority order; each base URL ends before `/v1/messages`. */
  deployments: readonly DeploymentSpec[];
  /** The statuses after which the next deployment is tried (config `retry_on`). */
  retryOn?: readonly number[];
  version: string;
  passBetas: "all" | readonly string[];
  /** Automatic prompt-cache breakpoints on translated routes (config `auto_cache`, default on). */
  autoCache?: boolean;
}

/** Distinct anthropic-beta sets whose headers are kept (more: the cache starts over). */
const MAX_BETA_SETS = 64;

/** A provider for the Anthropic Messages API (and any upstream that speaks it). */
export function createAnthropicProvider(upstream: AnthropicUpstream): Provider {
  const allowed = upstream.passBetas === "all" ? null : new Set(upstream.passBetas);
  const deployments = upstream.deployments.map((spec) => anthropicDeployment(upstream, spec, allowed));
  return {
    codecs: [anthropicMessages],
    ...deploymentFields(deployments, upstream.retryOn),
    cacheControl: "breakpoints",
    adjustBody(body: Record<string, unknown>, ctx: GatewayContext, route: UpstreamRoute) {
      // Agents on chat / Responses cannot place breakpoints: the gateway does, unless the client placed its own
      // (docs/wire-formats.md#prompt-caching). A relayed Messages client (Claude Code) places its own.
      if (!route.relayed && upstream.autoCache !== false && ctx.model?.auto_cache !== false) {
        addAutomaticBreakpoints(body, ctx.model?.cache_min_tokens ?? minimumCacheableTokens(String(body.model)));
      }
      // A translated client that set no cap gets what its funds allow (budget) or the model's maximum.
      if (!route.relayed && ctx.request.maxOutputTokens === undefined) {
        const cap = ctx.upstreamOutputCap ?? ctx.model?.max_output_tokens;
        if (cap !== undefined) body.max_tokens = cap;
        fitThinkingBudget(body);
      } else if (ctx.upstreamOutputCap !== undefined && !(typeof body.max_tokens === "number" && body.max_tokens <= ctx.upstreamOutputCap)) {
        // The cap the budget's hold assumed, always (the client's own max_tokens is that cap already).
        body.max_tokens = ctx.upstreamOutputCap;
        fitThinkingBudget(body);
      }
    },
  };
}

/** One base URL with its key; headers per anthropic-beta set built once. */
function anthropicDeployment(upstream: AnthropicUpstream, spec: DeploymentSpec, allowed: ReadonlySet<string> | null): Deployment {
  const url = spec.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "") + "/v1/messages";
  const keyHeaders = { "x-api-key": spec.apiKey ?? "", "anthropic-version": upstream.version };
  const baseHeaders = spec.apiKey ? jsonHeaders(keyHeaders) : undefined;
  // Headers per beta set, built once: clients (Claude Code) send the same few sets on every request, and the
  // upstream client prepares each header set's request text once.
  const withBetas = new Map<string, Headers>();
  const headersFor = (betas: string): Headers => {
    let headers = withBetas.get(betas);
    if (headers === undefined) {
      if (withBetas.size >= MAX_BETA_SETS) withBetas.clear();
      withBetas.set(betas, (headers = jsonHeaders({ ...keyHeaders, "anthropic-beta": betas })));
    }
    return headers;
  };
  return {
    ...deploymentBase(spec),
    endpoint(ctx: GatewayContext, route: UpstreamRoute) {
      if (!spec.apiKey) throw missingKeyError(ctx.request.model, upstream.name, spec.apiKeyEnv);
      // Only a relayed (Messages) client's betas go upstream: a translated body uses no beta feature.
      const betas = route.relayed ? clientBetas(ctx.headers, allowed) : "";
      return { url, headers: betas ? headersFor(betas) : baseHeaders! };
    },
  };
}

/** The client's anthropic-beta flags that may go upstream (all, or those listed), comma-joined. */
export function clientBetas(headers: Headers, allowed: ReadonlySet<string> | null): string {
  const raw = headers.get("anthropic-beta");
  if (!raw) return "";
  const flags = raw.split(",").map((flag) => flag.trim()).filter((flag) => flag !== "");
  return (allowed ? flags.filter((flag) => allowed.has(flag)) : flags).join(",");
}
