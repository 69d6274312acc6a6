import { definePlugin } from "../../../core/plugin.ts";
import { OpenAIUpstreamSchema } from "./schema.ts";
import { createOpenAIWireProvider } from "./provider.ts";

/** The OpenAI upstream (chat completions, the Responses API and image generation; same-format requests are relayed frame by frame). */
export default definePlugin({
  name: "openai",
  configSchema: OpenAIUpstreamSchema,
  setup(config, host) {
    host.secret(host.env[config.api_key_env]);
    const provider = createOpenAIWireProvider({
      name: "openai",
      baseUrl: config.base_url,
      apiKeyEnv: config.api_key_env,
      apiKey: host.env[config.api_key_env] || undefined,
      outputCapField: "max_completion_tokens",
      responses: true,
      images: true,
    });
    return { providers: { openai: provider } };
  },
});
