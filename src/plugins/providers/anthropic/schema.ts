import { Type, type Static } from "@sinclair/typebox";

export const AnthropicUpstreamSchema = Type.Object({
  /** Base URL without /v1 (Anthropic's own: https://api.anthropic.com). */
  base_url: Type.String({ minLength: 1, pattern: "^https?://" }),
  /** The environment variable holding the key (the key itself never sits in YAML). */
  api_key_env: Type.String({ minLength: 1, pattern: "^[A-Za-z_][A-Za-z0-9_]*$" }),
  /** The `anthropic-version` header sent upstream. */
  anthropic_version: Type.String({ minLength: 1, default: "2023-06-01" }),
  /**
   * Which of a Messages client's `anthropic-beta` flags go upstream: "all", or a list (others are dropped).
   * Only relayed (Messages-client) requests carry them: a translated body uses no beta feature.
   */
  pass_betas: Type.Union([Type.Literal("all"), Type.Array(Type.String({ minLength: 1 }))], { default: "all" }),
});
export type AnthropicUpstreamConfig = Static<typeof AnthropicUpstreamSchema>;
