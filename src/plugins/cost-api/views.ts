import { nanoToUsd } from "../../core/money.ts";
import { answeringDeployment } from "../storage/rows.ts";
import type { AccountTotals, ApiKey, Generation, UsageCounters, UsageRow } from "../storage/repository.ts";
import { isoWithOffset } from "./dates.ts";

/** The spec's generation record. */
export function generationView(g: Generation, callerKeyId: string) {
  const input = g.inputCost + g.cacheReadCost + g.cacheWriteCost;
  return {
    id: g.responseId ?? g.id,
    gateway_request_id: g.id,
    /** The model that answered (and is billed). */
    model: g.model,
    /** The model the client asked for: another than `model` when the request fell back (catalog fallbacks). */
    requested_model: g.requestedModel ?? g.model,
    status: g.status,
    created_at: isoWithOffset(g.createdAt),
    latency_ms: g.latencyMs,
    time_to_first_token_ms: g.timeToFirstTokenMs ?? g.latencyMs,
    made_with_this_key: g.keyId === callerKeyId,
    streamed: g.stream,
    usage: {
      prompt_tokens: g.promptTokens,
      completion_tokens: g.completionTokens,
      total_tokens: g.promptTokens + g.completionTokens,
      cached_tokens: g.cachedTokens,
      cache_write_tokens: g.cacheWriteTokens,
      /** The writes by cache lifetime, each billed at its own price (they sum to cache_write_tokens). */
      cache_write_tokens_details: {
        ephemeral_5m: g.cacheWriteTokens - (g.cacheWrite1hTokens ?? 0),
        ephemeral_1h: g.cacheWrite1hTokens ?? 0,
      },
      reasoning_tokens: g.reasoningTokens,
    },
    total_cost: nanoToUsd(g.totalCost),
    /** Not a charge, signed: what caching saved against billing every cached and written token as input (docs/billing.md). */
    cache_discount: nanoToUsd(g.cacheDiscount ?? 0),
    /** Priced but not charged: the hold and the funds still free ran out (docs/billing.md). */
    unbilled_cost: nanoToUsd(g.unbilledCost ?? 0),
    /** The usage was counted by the gateway: the upstream reported none. */
    usage_estimated: g.usageEstimated === true,
    /** The deployment that answered (and is billed); null when none did. */
    deployment: answeringDeployment(g.attempts),
    /** Every upstream attempt, in order; empty when none was made. */
    attempts: g.attempts ?? [],
    cost_breakdown: {
      input: nanoToUsd(input),
      cache_read: nanoToUsd(g.cacheReadCost),
      cache_write: nanoToUsd(g.cacheWriteCost),
      output: nanoToUsd(g.outputCost),
    },
    currency: "USD",
  };
}

function emptyCounters(): UsageCounters {
  return { cost: 0, requests: 0, successfulRequests: 0, failedRequests: 0, promptTokens: 0, completionTokens: 0, cachedTokens: 0, cacheWriteTokens: 0 };
}

function add(into: UsageCounters, row: UsageCounters) {
  into.cost += row.cost;
  into.requests += row.requests;
  into.successfulRequests += row.successfulRequests;
  into.failedRequests += row.failedRequests;
  into.promptTokens += row.promptTokens;
  into.completionTokens += row.completionTokens;
  into.cachedTokens += row.cachedTokens;
  into.cacheWriteTokens += row.cacheWriteTokens;
}

/** Integer sums first; USD conversion once per figure at the end (no float drift). */
function countersView(c: UsageCounters) {
  return {
    cost: nanoToUsd(c.cost),
    requests: c.requests,
    successful_requests: c.successfulRequests,
    failed_requests: c.failedRequests,
    prompt_tokens: c.promptTokens,
    completion_tokens: c.completionTokens,
    cached_tokens: c.cachedTokens,
    cache_write_tokens: c.cacheWriteTokens,
  };
}

/** The spec's usage report from daily per-model roll-ups (ascending days). */
export function usageReportView(scope: "account" | "key", startDay: string, endDay: string, rows: UsageRow[]) {
  const total = emptyCounters();
  const days = new Map<string, { counters: UsageCounters; models: Map<string, UsageCounters> }>();
  for (const row of rows) {
    add(total, row);
    let day = days.get(row.day);
    if (!day) days.set(row.day, (day = { counters: emptyCounters(), models: new Map() }));
    add(day.counters, row);
    const model = day.models.get(row.model) ?? emptyCounters();
    add(model, row);
    day.models.set(row.model, model);
  }
  return {
    scope,
    start_date: startDay,
    end_date: endDay,
    currency: "USD",
    total: countersView(total),
    days: [...days.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([date, day]) => ({
        date,
        ...countersView(day.counters),
        models: Object.fromEntries([...day.models.entries()].map(([model, counters]) => [model, countersView(counters)])),
      })),
  };
}

export function creditsView(totals: AccountTotals) {
  return {
    total_credits: nanoToUsd(totals.credits),
    total_usage: nanoToUsd(totals.debits),
    balance: nanoToUsd(totals.balance),
    currency: "USD",
  };
}

export function keyView(key: ApiKey, usage: number, rateLimit: { requests_per_minute: number | null; tokens_per_minute: number | null }) {
  return {
    name: key.name,
    label: key.label,
    usage: nanoToUsd(usage),
    limit: key.limit === null ? null : nanoToUsd(key.limit),
    limit_remaining: key.limit === null ? null : nanoToUsd(Math.max(0, key.limit - usage)),
    rate_limit: rateLimit,
    models: key.models,
    blocked: key.blocked,
    created_at: isoWithOffset(key.createdAt),
    expires_at: key.expiresAt === null ? null : isoWithOffset(key.expiresAt),
  };
}
