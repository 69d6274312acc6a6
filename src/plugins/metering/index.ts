import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import type { GatewayContext, Outcome } from "../../core/context.ts";
import { nanoToUsdString } from "../../core/money.ts";
import { ZERO_USAGE } from "../../formats/canonical.ts";
import type { Generation } from "../storage/repository.ts";
import { priceUsage, type CostBreakdown } from "./cost.ts";

const COST_HEADER = "x-gateway-cost";

/** Prices each request's usage exactly and writes its generation record and ledger debit. */
export default definePlugin({
  name: "metering",
  requires: ["storage", "auth", "catalog"],
  configSchema: Type.Object({}),
  setup(_config, host) {
    const store = host.service("storage");
    const catalog = host.service("catalog");

    function costOf(ctx: GatewayContext): CostBreakdown {
      const usage = ctx.usage ?? ZERO_USAGE;
      const prices = catalog.pricesFor(ctx.model!, usage.inputTokens, new Date(ctx.startedAt));
      return priceUsage(usage, prices);
    }

    return {
      onResponse(ctx) {
        if (!ctx.model) return;
        const cost = costOf(ctx);
        ctx.cost = cost.totalCost;
        ctx.responseHeaders[COST_HEADER] = nanoToUsdString(cost.totalCost);
      },
      onComplete(ctx, outcome) {
        if (!ctx.principal || !ctx.model || !ctx.target) return;
        // No usage (a call that failed before generating) prices to zero; a stream cut short bills what it reported.
        const cost = costOf(ctx);
        ctx.cost = cost.totalCost;
        store.recordGeneration(generationRecord(ctx, outcome, cost));
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
