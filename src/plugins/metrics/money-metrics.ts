import type { GatewayContext, Outcome } from "../../core/context.ts";
import type { Logger } from "../../core/log.ts";
import type { LedgerStore, ReservationStore } from "../storage/repository.ts";
import { LEDGER_KINDS, OTHER, refusalReason } from "./labels.ts";
import type { Gauge } from "prom-client";
import type { CounterSeries, Family, MetricsRegistry } from "./registry.ts";

/**
 * The gauges read from the store at scrape time: the same for every worker, so with several workers only the
 * scraped one reads them and sends its values along (workers.ts); the others leave them out.
 */
export const STORE_GAUGES: ReadonlySet<string> = new Set(["gateway_credits_nano_usd", "gateway_holds_outstanding", "gateway_holds_outstanding_nano_usd"]);

/** What the money gauges read at scrape time: the storage plugin's slices (absent without it). */
export type MoneyStore = Pick<LedgerStore, "creditTotalsByKind"> & Pick<ReservationStore, "holdsOutstanding">;

/**
 * The money: nano-USD billed and priced-but-unbilled by model, refusals by reason (counted at each request's end),
 * and at scrape time the ledger's credits by kind and the holds outstanding, read from the store itself.
 */
export class MoneyMetrics {
  private readonly billed: Family<CounterSeries>;
  private readonly unbilled: Family<CounterSeries>;
  private readonly refused: Family<CounterSeries>;
  private readonly credits: Gauge<"kind">;
  private readonly holdCount: Gauge;
  private readonly holdAmount: Gauge;

  constructor(
    registry: MetricsRegistry,
    private readonly store: () => MoneyStore | undefined,
    private readonly log: Logger,
  ) {
    this.billed = registry.counter("gateway_billed_nano_usd_total", "Nano-USD charged (the generations' total_cost), by model.", ["model"]);
    this.unbilled = registry.counter(
      "gateway_unbilled_nano_usd_total",
      "Nano-USD priced but not charged: usage beyond the request's hold and the funds still free (docs/billing.md), by model.",
      ["model"],
    );
    this.refused = registry.counter(
      "gateway_refused_requests_total",
      "Requests the gateway refused for money or rate: balance, key_budget, plan_window, rate_limit, other_limit, edge (the per-address edge limit, before the pipeline).",
      ["reason"],
    );
    this.credits = registry.gauge(
      "gateway_credits_nano_usd",
      "The ledger's sum by kind over every account, usage left out: credits (> 0), refunds, disputes and plans bought from the balance (< 0). Read from the store at scrape.",
      ["kind"],
      undefined,
      "first",
    );
    this.holdCount = registry.gauge("gateway_holds_outstanding", "Budget holds of requests in flight (every instance on the store), not yet replaced by a debit.", [], undefined, "first");
    this.holdAmount = registry.gauge("gateway_holds_outstanding_nano_usd", "Nano-USD held by the outstanding budget holds.", [], undefined, "first");
  }

  /** Before a scrape: the ledger's credits by kind and the holds outstanding, read from the store. A failed read keeps the last values. */
  async refresh(): Promise<void> {
    const source = this.store();
    if (!source) return;
    await Promise.all([
      source.creditTotalsByKind().then(
        (totals) => {
          let other = 0;
          for (const [kind, amount] of Object.entries(totals)) if (!LEDGER_KINDS.includes(kind)) other += amount;
          for (const kind of LEDGER_KINDS) this.credits.set({ kind }, totals[kind] ?? 0);
          if (other !== 0) this.credits.set({ kind: OTHER }, other);
        },
        (error) => this.log.warn("metrics: credits by kind unreadable; the last values stay", { error: String(error) }),
      ),
      source.holdsOutstanding().then(
        (holds) => {
          this.holdCount.set(holds.count);
          this.holdAmount.set(holds.amount);
        },
        (error) => this.log.warn("metrics: holds outstanding unreadable; the last values stay", { error: String(error) }),
      ),
    ]);
  }

  /** A request the edge limit refused (before the pipeline: no outcome reaches onRequestEnd). */
  refusedAtEdge(): void {
    this.refused.get1("edge").inc(1);
  }

  record(ctx: GatewayContext, outcome: Outcome, model: string): void {
    const charged = ctx.charged;
    if (charged !== undefined) {
      if (charged.totalCost > 0) this.billed.get1(model).inc(charged.totalCost);
      if (charged.unbilledCost > 0) this.unbilled.get1(model).inc(charged.unbilledCost);
    }
    if (outcome.status === "failed") {
      const reason = refusalReason(outcome);
      if (reason !== undefined) this.refused.get1(reason).inc(1);
    }
  }
}
