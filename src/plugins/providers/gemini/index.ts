import { definePlugin } from "../../../core/plugin.ts";
import { GeminiConfigSchema } from "./schema.ts";
import { createGeminiProvider } from "./provider.ts";
import { deploymentSpecs, deploymentsConfigProblem } from "../deployments.ts";

/** The Google Gemini API upstream (generateContent; requests in any client format are translated). */
export default definePlugin({
  name: "gemini",
  configSchema: GeminiConfigSchema,
  checkConfig: (config) => deploymentsConfigProblem(config),
  setup(config, host) {
    const provider = createGeminiProvider({ deployments: deploymentSpecs("gemini", config, host), retryOn: config.retry_on });
    return { providers: { gemini: provider } };
  },
});
