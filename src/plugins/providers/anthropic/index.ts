import { definePlugin } from "../../../core/plugin.ts";
import { AnthropicUpstreamSchema } from "./schema.ts";
import { createAnthropicProvider } from "./provider.ts";
import { deploymentSpecs, deploymentsConfigProblem } from "../deployments.ts";

/** The Anthropic upstream (Messages API; Messages clients are relayed frame by frame, others translated). */
export default definePlugin({
  name: "anthropic",
  configSchema: AnthropicUpstreamSchema,
  checkConfig: (config) => deploymentsConfigProblem(config),
  setup(config, host) {
    const provider = createAnthropicProvider({
      name: "anthropic",
      deployments: deploymentSpecs("anthropic", config, host),
      retryOn: config.retry_on,
      version: config.anthropic_version,
      passBetas: config.pass_betas,
      autoCache: config.auto_cache,
    });
    return { providers: { anthropic: provider } };
  },
});
