import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { countPromptTokens, loadTokenizer, toolPromptOverhead } from "./count.ts";

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** An upper bound of the prompt's tokens as the upstream bills them (tools' wrapper included), known at admission. Writer: token-count. */
    promptTokenBound?: number;
  }
}

/** Counts the prompt's tokens once at admission, for rate limits and budget reservations. */
export default definePlugin({
  name: "token-count",
  requires: ["catalog"],
  configSchema: Type.Object({
    /** Families counted with the exact o200k tokenizer; others get the UTF-8 byte bound. */
    exact_families: Type.Array(Type.String(), { default: ["openai"] }),
  }),
  setup(config, host) {
    const exact = new Set(config.exact_families);
    loadTokenizer().catch((error) => host.log.error("tokenizer failed to load; counting bytes instead", { error: String(error) }));
    return {
      onRequest(ctx) {
        const limits = ctx.model ? { contextLength: ctx.model.context_length } : undefined;
        ctx.promptTokenBound = countPromptTokens(ctx.body, exact.has(ctx.model?.family ?? ""), limits) + toolPromptOverhead(ctx.body);
      },
    };
  },
});
