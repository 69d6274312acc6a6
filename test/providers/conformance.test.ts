import { providerConformance } from "./conformance.ts";

/** The shared conformance suite, once per provider plugin (each behind the fake upstream). */
providerConformance({ provider: "openai", model: "gpt-6-luna", wire: "openai" });
providerConformance({
  provider: "anthropic",
  model: "claude-haiku-4-5",
  wire: "anthropic",
  env: { ANTHROPIC_BASE_URL: "{fake}", ANTHROPIC_API_KEY: "sk-ant-conformance" },
});
providerConformance({
  provider: "gemini",
  model: "gemini-2.5-flash-lite",
  wire: "gemini",
  env: { GEMINI_BASE_URL: "{fake}", GEMINI_API_KEY: "gm-conformance" },
});
providerConformance({ provider: "openai-compatible (deepseek)", model: "deepseek-flash", wire: "openai" });
