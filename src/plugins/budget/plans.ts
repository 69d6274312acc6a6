import { Type, type Static } from "@sinclair/typebox";
import { GatewayError } from "../../core/errors.ts";
import { nanoToUsdString, usdToNano, type NanoUsd } from "../../core/money.ts";
import type { Funds, PlanCycle } from "../storage/repository.ts";

const Usd = Type.Union([Type.Number({ minimum: 0 }), Type.String({ pattern: "^\\d+(\\.\\d{1,9})?$" })]);

/** A monthly plan: price, bonus credit, account-wide spend windows (USD; absent = no cap). */
export const PlanSchema = Type.Object({
  price: Usd,
  bonus_credit: Type.Optional(Usd),
  windows: Type.Object({
    four_hours: Type.Optional(Usd),
    week: Type.Optional(Usd),
    month: Type.Optional(Usd),
  }),
  /** The month window: the calendar month (UTC) or the 30 days before the request. */
  month: Type.Union([Type.Literal("calendar"), Type.Literal("rolling")], { default: "calendar" }),
});
export type PlanConfig = Static<typeof PlanSchema>;

export class SpendWindowExceededError extends GatewayError {
  override readonly status = 429;
  override readonly type = "rate_limit_error";
  override readonly code = "spend_window_exceeded";
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
export const PLAN_CYCLE_MS = 30 * DAY;

export interface PlanLimits {
  /** Window name -> cap (nano-USD) and start (epoch ms) for a request at `now`. */
  windows: Record<string, { cap: NanoUsd; start: number; length: number | "calendar-month" }>;
}

const WINDOW_LABEL: Record<string, string> = { four_hours: "4-hour", week: "weekly", month: "monthly" };

/** The windows a plan enforces at `now`. */
export function planLimits(plan: PlanConfig, now: number): PlanLimits {
  const windows: PlanLimits["windows"] = {};
  if (plan.windows.four_hours !== undefined) windows.four_hours = { cap: usdToNano(plan.windows.four_hours), start: now - 4 * HOUR, length: 4 * HOUR };
  if (plan.windows.week !== undefined) windows.week = { cap: usdToNano(plan.windows.week), start: now - 7 * DAY, length: 7 * DAY };
  if (plan.windows.month !== undefined) {
    const date = new Date(now);
    windows.month =
      plan.month === "calendar"
        ? { cap: usdToNano(plan.windows.month), start: Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1), length: "calendar-month" }
        : { cap: usdToNano(plan.windows.month), start: now - 30 * DAY, length: 30 * DAY };
  }
  return { windows };
}

/** Refuses an amount that would cross any window, naming the window and when it frees up. */
export function checkWindows(limits: PlanLimits, funds: Funds, amount: NanoUsd, now: number): void {
  for (const [name, window] of Object.entries(limits.windows)) {
    const spent = funds.windows[name]?.spent ?? 0;
    if (spent + amount <= window.cap) continue;
    const oldest = funds.windows[name]?.oldestAt ?? now;
    const freesAt =
      window.length === "calendar-month"
        ? Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() + 1, 1)
        : Math.max(now, oldest + window.length);
    const retryAfter = Math.max(1, Math.ceil((freesAt - now) / 1000));
    throw new SpendWindowExceededError(
      `the plan's ${WINDOW_LABEL[name]} spend window ($${nanoToUsdString(window.cap)}) would be crossed: $${nanoToUsdString(spent)} spent or held, this request may cost up to $${nanoToUsdString(amount)}. It frees up from ${new Date(freesAt).toISOString()}.`,
      { headers: { "retry-after": String(retryAfter) } },
    );
  }
}

/** The plan cycle answer of the admin API. */
export function cycleView(cycle: PlanCycle, balance: NanoUsd) {
  return {
    id: cycle.id,
    account_id: cycle.accountId,
    plan: cycle.plan,
    funding: cycle.funding,
    price: Number(nanoToUsdString(cycle.price)),
    started_at: new Date(cycle.startedAt).toISOString(),
    ends_at: new Date(cycle.endsAt).toISOString(),
    renewing: cycle.renewing,
    balance: Number(nanoToUsdString(balance)),
  };
}
