import { definePlugin } from "../../../core/plugin.ts";
import { AnthropicUpstreamSchema } from "./schema.ts";
import { createAnthropicProvider } from "./provider.ts";

/** The Anthropic upstream (Messages API; Messages clients are relayed frame by frame, others translated). */
export default definePlugin({
  name: "anthropic",
  configSchema: AnthropicUpstreamSchema,
  setup(config, host) {
    host.secret(host.env[config.api_key_env]);
    const provider = createAnthropicProvider({
      name: "anthropic",
      baseUrl: config.base_url,
      apiKeyEnv: config.api_key_env,
      apiKey: host.env[config.api_key_env] || undefined,
      version: config.anthropic_version,
      passBetas: config.pass_betas,
    });
    return { providers: { anthropic: provider } };
  },
});
