import { OPENAI_CACHE_USAGE, providerConformance } from "./conformance.ts";

/**
 * The shared conformance suite, once per provider plugin (each behind the fake upstream). A provider in a folder
 * of its own may declare itself next to its tests instead (test/plugins/providers/<vendor>/conformance.test.ts).
 */
providerConformance({ provider: "openai", model: "gpt-6-luna", cacheUsage: OPENAI_CACHE_USAGE });
providerConformance({
  provider: "anthropic",
  model: "claude-haiku-4-5",
  cacheUsage: {
    usage: { input_tokens: 500, cache_read_input_tokens: 400, cache_creation_input_tokens: 100, output_tokens: 50 },
    canonical: { inputTokens: 1000, cacheReadTokens: 400, cacheWriteTokens: 100, outputTokens: 50, reasoningTokens: 0 },
  },
  env: { ANTHROPIC_BASE_URL: "{fake}", ANTHROPIC_API_KEY: "sk-ant-conformance" },
});
providerConformance({ provider: "openai-compatible (deepseek)", model: "deepseek-flash", cacheUsage: OPENAI_CACHE_USAGE });
