import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import type { GatewayContext, Outcome } from "../../core/context.ts";
import { nanoToUsdString } from "../../core/money.ts";
import { ZERO_USAGE, type Usage } from "../../formats/canonical.ts";
import { countPromptTokens, countTextTokens } from "../token-count/count.ts";
import type { Generation } from "../storage/repository.ts";
import { priceUsage, type CostBreakdown } from "./cost.ts";

const COST_HEADER = "x-gateway-cost";

/** A stream cut short: the usage reported so far, its output raised to what was counted as delivered. */
function withCountedOutput(reported: Usage | undefined, counted: Usage | undefined): Usage | undefined {
  if (!reported || !counted) return reported ?? counted;
  if (counted.outputTokens <= reported.outputTokens) return reported;
  return { ...reported, outputTokens: counted.outputTokens };
}

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** The generation record and debit are queued. Writer: metering. */
    metered?: boolean;
    /**
     * Text a stream delivered, for billing a stream cut short without a usage report. Writer: metering.
     * A field, not a WeakMap keyed by the context: ~10k weak entries a second cost the GC more.
     */
    streamedText?: string[];
  }
}

/** Prices each request's usage exactly and writes its generation record (its usage debit in the ledger). */
export default definePlugin({
  name: "metering",
  requires: ["storage", "auth", "catalog", "token-count"],
  configSchema: Type.Object({}),
  setup(_config, host) {
    const store = host.service("storage");
    const catalog = host.service("catalog");

    function costOf(ctx: GatewayContext): CostBreakdown {
      const usage = ctx.usage ?? ZERO_USAGE;
      const prices = catalog.pricesFor(ctx.model!, usage.inputTokens, new Date(ctx.startedAt));
      return priceUsage(usage, prices);
    }

    /**
     * A stream cut short without a usage report: bill the prompt and the delivered text as the o200k
     * tokenizer counts them (an estimate, not the reservation's upper bound), the output never above the
     * request's own output cap.
     */
    function estimateUsage(ctx: GatewayContext): Usage | undefined {
      const parts = ctx.streamedText;
      if (!parts || parts.length === 0) return undefined;
      const cap = ctx.request.maxOutputTokens ?? ctx.upstreamOutputCap ?? ctx.model!.max_output_tokens;
      const outputTokens = Math.min(countTextTokens(parts.join(""), true), cap);
      const inputTokens = Math.min(countPromptTokens(ctx.body, true), ctx.promptTokenBound ?? Number.MAX_SAFE_INTEGER);
      return { inputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens, reasoningTokens: 0 };
    }

    return {
      onStreamEvent(ctx, event) {
        // Counted until the stream ends: some upstreams report usage early (Anthropic's message_start).
        const text = event.type === "text_delta" || event.type === "reasoning_delta" ? event.text : event.type === "tool_call_delta" ? event.arguments : undefined;
        if (!text) return;
        if (ctx.streamedText) ctx.streamedText.push(text);
        else ctx.streamedText = [text];
      },
      onResponse(ctx) {
        if (!ctx.model) return;
        const cost = costOf(ctx);
        ctx.cost = cost.totalCost;
        ctx.responseHeaders[COST_HEADER] = nanoToUsdString(cost.totalCost);
      },
      onComplete(ctx, outcome) {
        if (!ctx.principal || !ctx.model || !ctx.target) return;
        // No usage: a call that failed before generating prices to zero; a stream cut short without a
        // usage report is billed for the text it delivered (counted) and the prompt (its bound).
        if (outcome.status !== "success") ctx.usage = withCountedOutput(ctx.usage, estimateUsage(ctx));
        const cost = costOf(ctx);
        ctx.cost = cost.totalCost;
        store.recordGeneration(generationRecord(ctx, outcome, cost));
        ctx.metered = true;
      },
    };
  },
});

function generationRecord(ctx: GatewayContext, outcome: Outcome, cost: CostBreakdown): Generation {
  const usage = ctx.usage ?? ZERO_USAGE;
  const now = performance.now();
  return {
    id: ctx.requestId,
    responseId: ctx.responseId ?? null,
    accountId: ctx.principal!.accountId,
    keyId: ctx.principal!.key.id,
    model: ctx.model!.id,
    provider: ctx.target!.provider,
    ingress: ctx.ingress.name,
    stream: ctx.request.stream,
    status: outcome.status,
    errorCode: outcome.status === "failed" ? outcome.error.code : null,
    createdAt: ctx.startedAt,
    latencyMs: Math.round(now - ctx.startedMono),
    timeToFirstTokenMs: ctx.firstTokenMono === undefined ? null : Math.round(ctx.firstTokenMono - ctx.startedMono),
    promptTokens: usage.inputTokens,
    completionTokens: usage.outputTokens,
    cachedTokens: usage.cacheReadTokens,
    cacheWriteTokens: usage.cacheWriteTokens,
    reasoningTokens: usage.reasoningTokens,
    ...cost,
  };
}
