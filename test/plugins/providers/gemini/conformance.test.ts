import { providerConformance } from "../../../providers/conformance.ts";

/** Gemini's conformance declaration: the shared suite behind the fake Gemini upstream, cache usage in Gemini's keys. */
providerConformance({
  provider: "gemini",
  model: "gemini-2.5-flash-lite",
  cacheUsage: {
    usage: { promptTokenCount: 1000, cachedContentTokenCount: 400, candidatesTokenCount: 50 },
    canonical: { inputTokens: 1000, cacheReadTokens: 400, cacheWriteTokens: 0, outputTokens: 50, reasoningTokens: 0 },
  },
  env: { GEMINI_BASE_URL: "{fake}", GEMINI_API_KEY: "gm-conformance" },
});
