import { definePlugin } from "../../../core/plugin.ts";
import { GeminiConfigSchema } from "./schema.ts";
import { createGeminiProvider } from "./provider.ts";

/** The Google Gemini API upstream (generateContent; requests in any client format are translated). */
export default definePlugin({
  name: "gemini",
  configSchema: GeminiConfigSchema,
  setup(config, host) {
    host.secret(host.env[config.api_key_env]);
    const provider = createGeminiProvider({
      baseUrl: config.base_url,
      apiKeyEnv: config.api_key_env,
      apiKey: host.env[config.api_key_env] || undefined,
    });
    return { providers: { gemini: provider } };
  },
});
