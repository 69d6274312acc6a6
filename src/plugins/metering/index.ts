import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import type { GatewayContext, Outcome } from "../../core/context.ts";
import { nanoToUsdString } from "../../core/money.ts";
import { ZERO_USAGE, type Usage } from "../../core/canonical.ts";
import { countPromptTokens, countTextTokens, toolPromptOverhead } from "../token-count/count.ts";
import type { Generation, MeteringStore } from "../storage/repository.ts";
import type { BudgetService } from "../budget/index.ts";
import { chargeWithin, priceUsage, type CostBreakdown } from "./cost.ts";
import { clampUsage } from "./usage.ts";

const COST_HEADER = "x-gateway-cost";

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** The generation record and debit are queued. Writer: metering. */
    metered?: boolean;
    /**
     * Text a stream delivered, for billing a stream cut short without a usage report. Writer: metering.
     * A field, not a WeakMap keyed by the context: ~10k weak entries a second cost the GC more.
     */
    streamedText?: string[];
    /** The billed usage was counted by the gateway, not reported by the upstream. Writer: metering. */
    usageEstimated?: boolean;
    /**
     * What the request is charged: a non-streamed answer's is decided once in onResponse and recorded in onComplete; a
     * stream's is set when it is recorded. Observers (metrics) read it after onComplete. Writer: metering.
     */
    charged?: CostBreakdown;
  }
}

/** A stream cut short: the usage reported so far, its output raised to what was counted as delivered. */
function withCountedOutput(reported: Usage, counted: Usage | undefined): Usage {
  if (!counted || counted.outputTokens <= reported.outputTokens) return reported;
  return { ...reported, outputTokens: counted.outputTokens };
}

/**
 * Prices each request's usage exactly and writes its generation record (its usage debit in the ledger).
 * With the budget plugin, a debit never exceeds the request's hold plus what is still free (see
 * docs/billing.md); the rest is recorded as `unbilledCost`.
 */
export default definePlugin({
  name: "metering",
  requires: ["storage", "auth", "catalog", "token-count"],
  configSchema: Type.Object({}),
  setup(_config, host) {
    const store: MeteringStore = host.service("storage"); // the slices of the store it uses
    const catalog = host.service("catalog");
    const budget: BudgetService | undefined = host.has("budget") ? host.service("budget") : undefined;

    /**
     * What the gateway counts (o200k) when the upstream reported nothing: the prompt (never above its
     * admission bound) and the text delivered (never above the output cap sent upstream).
     */
    function countedUsage(ctx: GatewayContext, text: string | undefined): Usage {
      const cap = ctx.upstreamOutputCap ?? ctx.request.maxOutputTokens ?? ctx.model!.max_output_tokens;
      const outputTokens = text ? Math.min(countTextTokens(text, true), cap) : 0;
      const inputTokens = Math.min(countPromptTokens(ctx.body, true) + toolPromptOverhead(ctx.body), ctx.promptTokenBound ?? Number.MAX_SAFE_INTEGER);
      return { inputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens, reasoningTokens: 0 };
    }

    /**
     * The usage billed. Reported usage is clamped to sane integers (fractions down, cached within the
     * prompt). A successful answer without a usable report (none, null, or counts negative or absurd: the
     * readers return undefined) is billed from the counted prompt and text (`usageEstimated`); a stream
     * cut short for the text it delivered (counted) when that is more than reported; a call that failed
     * before generating, zero.
     */
    function billedUsage(ctx: GatewayContext, outcome: Outcome): Usage | undefined {
      let usage = ctx.usage;
      const streamed = ctx.streamedText;
      if (usage === undefined) {
        if (outcome.status === "success") {
          usage = countedUsage(ctx, streamed ? streamed.join("") : ctx.answerText);
          host.log.warn("the upstream reported no usable usage (none, null, or counts out of range); billed from the counted prompt and answer", logFields(ctx, usage));
        } else if (streamed && streamed.length > 0) {
          usage = countedUsage(ctx, streamed.join(""));
        } else {
          return undefined;
        }
        ctx.usageEstimated = true;
        return usage;
      }
      const clamped = clampUsage(usage);
      if (clamped !== usage) {
        host.log.warn("the upstream reported usage out of range; clamped", { ...logFields(ctx, clamped), reported: usage });
        usage = clamped;
      }
      if (outcome.status !== "success" && streamed && streamed.length > 0) {
        const raised = withCountedOutput(usage, countedUsage(ctx, streamed.join("")));
        if (raised !== usage) ctx.usageEstimated = true;
        usage = raised;
      }
      return usage;
    }

    /**
     * The cost charged: the priced usage, never more than the hold plus what is still free. The normal
     * path (cost within the hold, or no budget plugin) returns at once; only an upstream that billed past
     * its cap waits for the hold's extension.
     */
    function charge(ctx: GatewayContext, outcome: Outcome): CostBreakdown | Promise<CostBreakdown> {
      const usage = (ctx.usage = billedUsage(ctx, outcome)) ?? ZERO_USAGE;
      const prices = catalog.pricesFor(ctx.model!, usage.inputTokens, new Date(ctx.startedAt));
      const cost = priceUsage(usage, prices);
      if (budget === undefined) return cost;
      const held = ctx.heldNano ?? 0;
      if (cost.totalCost <= held) return cost;
      return chargeBeyondHold(ctx, cost, held);
    }

    async function chargeBeyondHold(ctx: GatewayContext, cost: CostBreakdown, held: number): Promise<CostBreakdown> {
      const granted = await budget!.extendHold(ctx, cost.totalCost - held);
      const charged = chargeWithin(cost, held + granted);
      // An upstream billed past the output cap it was sent (or the prompt bound was short): worth a look either way.
      host.log.warn(
        charged.unbilledCost > 0
          ? "the priced usage exceeds the hold and the funds still free; the rest is not charged (unbilled)"
          : "the priced usage exceeds the hold; the hold was extended from free funds",
        {
          ...logFields(ctx, ctx.usage ?? ZERO_USAGE),
          priced_nano: cost.totalCost,
          held_nano: held,
          extended_nano: granted,
          charged_nano: charged.totalCost,
          unbilled_nano: charged.unbilledCost,
        },
      );
      return charged;
    }

    function priced(ctx: GatewayContext, cost: CostBreakdown): void {
      ctx.cost = cost.totalCost;
      ctx.responseHeaders[COST_HEADER] = nanoToUsdString(cost.totalCost);
    }

    function record(ctx: GatewayContext, outcome: Outcome, cost: CostBreakdown): void {
      ctx.cost = cost.totalCost;
      ctx.charged = cost;
      store.recordGeneration(generationRecord(ctx, outcome, cost));
      ctx.metered = true;
    }

    return {
      onStreamEvent(ctx, event) {
        // Counted until the stream ends: some upstreams report usage early (Anthropic's message_start).
        const text = event.type === "text_delta" || event.type === "reasoning_delta" ? event.text : event.type === "tool_call_delta" ? event.arguments : undefined;
        if (!text) return;
        if (ctx.streamedText) ctx.streamedText.push(text);
        else ctx.streamedText = [text];
      },
      // A non-streamed answer: charged here, once, so the cost header shows what onComplete records.
      onResponse(ctx) {
        if (!ctx.model || !ctx.principal) return;
        const cost = charge(ctx, SUCCESS);
        if (cost instanceof Promise) {
          return cost.then(function chargedBeyondHold(settled) {
            ctx.charged = settled;
            priced(ctx, settled);
          });
        }
        ctx.charged = cost;
        priced(ctx, cost);
      },
      onComplete(ctx, outcome) {
        if (!ctx.principal || !ctx.model || !ctx.target) return;
        if (ctx.charged) return record(ctx, outcome, ctx.charged);
        const cost = charge(ctx, outcome);
        if (cost instanceof Promise) return cost.then((settled) => record(ctx, outcome, settled));
        record(ctx, outcome, cost);
      },
    };
  },
});

const SUCCESS: Outcome = { status: "success" };

function logFields(ctx: GatewayContext, usage: Usage): Record<string, unknown> {
  return {
    request_id: ctx.requestId,
    model: ctx.model?.id,
    provider: ctx.target?.provider,
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
  };
}

function generationRecord(ctx: GatewayContext, outcome: Outcome, cost: CostBreakdown): Generation {
  const usage = ctx.usage ?? ZERO_USAGE;
  const now = performance.now();
  return {
    id: ctx.requestId,
    responseId: ctx.responseId ?? null,
    accountId: ctx.principal!.accountId,
    keyId: ctx.principal!.key.id,
    model: ctx.model!.id,
    // The model the client asked for, only when a fallback answered instead (NULL otherwise: the hot path).
    requestedModel: ctx.requestedModel !== undefined && ctx.requestedModel !== ctx.model!.id ? ctx.requestedModel : null,
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
    cacheWrite1hTokens: usage.cacheWrite1hTokens ?? 0,
    reasoningTokens: usage.reasoningTokens,
    ...cost, // the cost parts, unbilledCost and cacheDiscount
    usageEstimated: ctx.usageEstimated === true,
    // Kept as the core left them (the store serialises them once, in its batch write); null when none was made.
    attempts: ctx.attempts !== undefined && ctx.attempts.length > 0 ? ctx.attempts : null,
  };
}
