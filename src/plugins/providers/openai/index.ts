import { definePlugin } from "../../../core/plugin.ts";
import { OpenAIUpstreamSchema } from "./schema.ts";
import { createOpenAIWireProvider } from "./provider.ts";
import { deploymentSpecs, deploymentsConfigProblem } from "../deployments.ts";

/** The OpenAI upstream (chat completions, the Responses API and image generation; same-format requests are relayed frame by frame). */
export default definePlugin({
  name: "openai",
  configSchema: OpenAIUpstreamSchema,
  checkConfig: (config) => deploymentsConfigProblem(config),
  setup(config, host) {
    const provider = createOpenAIWireProvider({
      name: "openai",
      deployments: deploymentSpecs("openai", config, host),
      retryOn: config.retry_on,
      outputCapField: "max_completion_tokens",
      responses: true,
      images: true,
    });
    return { providers: { openai: provider } };
  },
});
