import { Type } from "@sinclair/typebox";
import { definePlugin, type Provider } from "../../../core/plugin.ts";
import { OpenAIUpstreamSchema } from "../openai/schema.ts";
import { createOpenAIWireProvider } from "../openai/provider.ts";

/** Every other family that speaks OpenAI chat completions (DeepSeek, xAI, Mistral, ...): one provider per upstream. */
export default definePlugin({
  name: "openai-compatible",
  configSchema: Type.Object({
    upstreams: Type.Record(Type.String({ pattern: "^[a-z0-9][a-z0-9-]*$" }), OpenAIUpstreamSchema, { default: {} }),
  }),
  setup(config, host) {
    const providers: Record<string, Provider> = {};
    for (const [name, upstream] of Object.entries(config.upstreams)) {
      host.secret(host.env[upstream.api_key_env]);
      providers[name] = createOpenAIWireProvider({
        name,
        baseUrl: upstream.base_url,
        apiKeyEnv: upstream.api_key_env,
        apiKey: host.env[upstream.api_key_env] || undefined,
      outputCapField: "max_tokens",
      });
    }
    return { providers };
  },
});
