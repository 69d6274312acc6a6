import { Type } from "@sinclair/typebox";
import { definePlugin, type Provider } from "../../../core/plugin.ts";
import { OpenAIUpstreamSchema } from "../openai/schema.ts";
import { createOpenAIWireProvider } from "../openai/provider.ts";
import { deploymentSpecs, deploymentsConfigProblem } from "../deployments.ts";

/** Every other family that speaks OpenAI chat completions (DeepSeek, xAI, Mistral, ...): one provider per upstream. */
export default definePlugin({
  name: "openai-compatible",
  configSchema: Type.Object({
    upstreams: Type.Record(Type.String({ pattern: "^[a-z0-9][a-z0-9-]*$" }), OpenAIUpstreamSchema, { default: {} }),
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
      });
    }
    return { providers };
  },
});
