import { Type } from "@sinclair/typebox";
import { DeploymentFields } from "../deployments.ts";
import { definePlugin, type Provider } from "../../../core/plugin.ts";
import { createOpenAIWireProvider } from "../openai/provider.ts";
import { deploymentSpecs, deploymentsConfigProblem } from "../deployments.ts";

/** One OpenAI-compatible upstream: its deployments (providers/deployments.ts) and what it takes beyond OpenAI's fields. */
const CompatibleUpstreamSchema = Type.Object({
  ...DeploymentFields,
  /**
   * Whether it takes prompt-cache breakpoints (`cache_control: {type: "ephemeral"}` on content blocks, e.g. Qwen's
   * DashScope): true keeps a relayed client's; false (default) removes them, as vendors that cache automatically
   * (DeepSeek, xAI, ...) may refuse the unknown field.
   */
  cache_control: Type.Optional(Type.Boolean()),
});

/** Every other family that speaks OpenAI chat completions (DeepSeek, xAI, Mistral, ...): one provider per upstream. */
export default definePlugin({
  name: "openai-compatible",
  configSchema: Type.Object({
    upstreams: Type.Record(Type.String({ pattern: "^[a-z0-9][a-z0-9-]*$" }), CompatibleUpstreamSchema, { default: {} }),
  }),
  checkConfig(config) {
    for (const [name, upstream] of Object.entries(config.upstreams)) {
      const problem = deploymentsConfigProblem(upstream, `/upstreams/${name}`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  },
  setup(config, host) {
    const providers: Record<string, Provider> = {};
    for (const [name, upstream] of Object.entries(config.upstreams)) {
      providers[name] = createOpenAIWireProvider({
        name,
        deployments: deploymentSpecs(name, upstream, host),
        retryOn: upstream.retry_on,
        outputCapField: "max_tokens",
        cacheControl: upstream.cache_control ? "breakpoints" : "none",
      });
    }
    return { providers };
  },
});
