import { Type, type Static } from "@sinclair/typebox";
import { DeploymentFields } from "../deployments.ts";

export const AnthropicUpstreamSchema = Type.Object({
  /** base_url (without /v1, Anthropic's own: https://api.anthropic.com) and api_key_env, or deployments (providers/deployments.ts). */
  ...DeploymentFields,
  /** The `anthropic-version` header sent upstream. */
  anthropic_version: Type.String({ minLength: 1, default: "2023-06-01" }),
  /**
   * Which of a Messages client's `anthropic-beta` flags go upstream: "all", or a list (others are dropped).
   * Only relayed (Messages-client) requests carry them: a translated body uses no beta feature.
   */
  pass_betas: Type.Union([Type.Literal("all"), Type.Array(Type.String({ minLength: 1 }))], { default: "all" }),
  /**
   * Automatic prompt caching on translated routes (chat and Responses clients): when the client set no breakpoint,
   * one at the end of the tools + system prefix and one on the last user turn, past the model's minimum cacheable
   * length. Relayed Messages clients (Claude Code) place their own and are never touched. A catalog model's
   * `auto_cache: false` turns it off for that model.
   */
  auto_cache: Type.Optional(Type.Boolean({ default: true })),
});
export type AnthropicUpstreamConfig = Static<typeof AnthropicUpstreamSchema>;
