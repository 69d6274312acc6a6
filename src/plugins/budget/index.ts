import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { planReservation, type ReservationPlan, type WorstCase } from "./reservation.ts";
import { t } from "elysia";
import { GatewayError, InvalidRequestError, NotFoundError, UnavailableError, UpstreamError } from "../../core/errors.ts";
import { nanoToUsd, usdToNano, type NanoUsd } from "../../core/money.ts";
import type { GatewayContext } from "../../core/context.ts";
import type { AccountStore, Funds, InstanceStore, KeyStore, LedgerStore, MeteringStore, PlanCycle, PlanStore, ReservationInput, ReservationStore } from "../storage/repository.ts";
import { storeCall } from "../storage/http-errors.ts";
import { PLAN_CYCLE_MS, PlanSchema, checkWindows, cycleView, planLimits, type PlanConfig, type PlanLimits } from "./plans.ts";
import { fundsDocs, listPlansDocs } from "../../openapi/admin.ts";
import { buyPlanWithCheckoutDocs } from "../../openapi/payments.ts";

/** What the budget offers metering (`host.service("budget")`). */
export interface BudgetService {
  /**
   * A request whose priced cost exceeds its hold (an upstream that billed past the cap it was sent):
   * extends the hold by up to `extra` from what the account, the key and the plan windows still have
   * free, atomically like the hold itself; resolves with what was granted (0 when nothing is free or the
   * store cannot answer) and adds it to `ctx.heldNano`.
   */
  extendHold(ctx: GatewayContext, extra: NanoUsd): Promise<NanoUsd>;
  /**
   * The funds of an account as a reservation sees them now (and of one of its keys, when given): the answer of
   * `GET /admin/v1/accounts/:id/funds`, plan windows with their cap, start and what is spent or held in them.
   * Does not check that the account or the key exists (the admin route does).
   */
  funds(accountId: string, key?: { id: string; limit: NanoUsd | null } | null): Promise<FundsView>;
  /**
   * Buys a configured plan for an account, as `POST /admin/v1/accounts/:id/plan` does (that route calls this):
   * an unknown plan is an InvalidRequestError naming the configured ones; the store's refusals (no such account,
   * a balance short of the price) come as the matching HTTP errors (404, 402).
   */
  buyPlan(accountId: string, planName: string, funding: "balance" | "card"): Promise<{ cycle: PlanCycle; balance: NanoUsd }>;
  /** The configured plans by name (the budget's `plans` config). */
  readonly plans: Readonly<Record<string, PlanConfig>>;
}

/** The funds answer (`GET /admin/v1/accounts/:id/funds`); amounts in USD as numbers, like the admin API's. */
export interface FundsView {
  account_id: string;
  balance: number;
  available: number;
  held: number;
  key: { id: string; limit: number | null; usage: number; available: number | null; held: number | null } | null;
  /** Window name (four_hours, week, month) -> cap (USD), start (ISO time) and what is spent or held in it (USD). */
  windows: Record<string, { cap: number; start: string; spent_or_held: number }>;
}

declare module "../../core/plugin.ts" {
  interface Services {
    budget: BudgetService;
  }
}

/**
 * Holds each request's worst-case cost before it goes upstream, atomically against the account
 * balance and the key budget, and lets the metering transaction release it with the exact debit.
 */
export default definePlugin({
  name: "budget",
  requires: ["storage", "auth", "catalog", "token-count"],
  configSchema: Type.Object({
    /** How often this process says it is alive. */
    heartbeat_ms: Type.Integer({ minimum: 100, default: 5_000 }),
    /** Reservations of a process silent this long are released (crash recovery). */
    stale_after_ms: Type.Integer({ minimum: 200, default: 30_000 }),
    /** Monthly plans by name. */
    plans: Type.Record(Type.String({ pattern: "^[a-z0-9][a-z0-9-]*$" }), PlanSchema, { default: {} }),
  }),
  async setup(config, host) {
    if (config.stale_after_ms < 2 * config.heartbeat_ms) {
      // Otherwise a live process that is one beat late looks dead, and its peers free the funds it holds.
      throw new Error(`stale_after_ms (${config.stale_after_ms}) must be at least twice heartbeat_ms (${config.heartbeat_ms})`);
    }
    const store: AccountStore & LedgerStore & KeyStore & MeteringStore & ReservationStore & PlanStore & InstanceStore = host.service("storage"); // the slices of the store it uses
    const catalog = host.service("catalog");
    // payments (before budget in the pipeline): card plans sell through its subscription seller when one is registered.
    const payments = host.has("payments") ? host.service("payments") : undefined;
    const instanceId = "gw_" + crypto.randomUUID().replaceAll("-", "").slice(0, 20);

    async function beat() {
      const now = host.now();
      await store.heartbeat(instanceId, now);
      const released = await store.releaseStaleReservations(now - config.stale_after_ms);
      if (released > 0) host.log.warn("released reservations of a stopped gateway process", { released });
    }
    await beat();
    const timer = setInterval(() => beat().catch((error) => host.log.error("heartbeat failed", { error: String(error) })), config.heartbeat_ms);
    timer.unref?.();

    const plansConfigured = Object.keys(config.plans).length > 0;
    /** The plan cycle in force per account, cached a second (a purchase through this process clears it). */
    const planCache = new Map<string, { cycle: PlanCycle | null; until: number }>();
    /** The cached cycle at once (the hot path: no promise, no await); a miss reads the store. */
    function activePlan(accountId: string, now: number): PlanCycle | null | Promise<PlanCycle | null> {
      const cached = planCache.get(accountId);
      if (cached && cached.until > now) return cached.cycle;
      return store.activePlan(accountId, now).then((cycle) => {
        planCache.set(accountId, { cycle, until: now + 1000 });
        return cycle;
      });
    }

    /** The plan windows in force for a request started at `startedAt` (undefined: no plan). */
    async function windowsOf(accountId: string, startedAt: number): Promise<PlanLimits | undefined> {
      if (!plansConfigured) return undefined;
      const cycle = await activePlan(accountId, host.now());
      const plan = cycle ? config.plans[cycle.plan] : undefined;
      return plan ? planLimits(plan, startedAt) : undefined;
    }

    /**
     * The funds as a reservation sees them now, read through the reservation machinery itself (a
     * decision that holds nothing), beside the stored figures: what `held` says is live holds.
     */
    async function fundsView(accountId: string, key: { id: string; limit: NanoUsd | null } | null): Promise<FundsView> {
      const now = host.now();
      const limits = await windowsOf(accountId, now);
      let seen: Funds | undefined;
      await store.reserve(
        {
          id: "probe_" + crypto.randomUUID(),
          accountId,
          keyId: key?.id ?? "",
          keyLimited: key !== null && key.limit !== null,
          instanceId,
          createdAt: now,
          windows: limits ? windowStarts(limits) : undefined,
        },
        function holdNothing(funds) {
          seen = funds;
          return 0;
        },
      );
      const totals = await store.accountTotals(accountId);
      const keyUsage = key ? await store.keyUsage(key.id) : 0;
      return {
        account_id: accountId,
        balance: nanoToUsd(totals.balance),
        available: nanoToUsd(seen!.account),
        held: nanoToUsd(totals.balance - seen!.account),
        key:
          key === null
            ? null
            : {
                id: key.id,
                limit: key.limit === null ? null : nanoToUsd(key.limit),
                usage: nanoToUsd(keyUsage),
                available: seen!.key === null ? null : nanoToUsd(seen!.key),
                held: key.limit === null || seen!.key === null ? null : nanoToUsd(key.limit - keyUsage - seen!.key),
              },
        windows: limits
          ? Object.fromEntries(
              Object.entries(limits.windows).map(([name, window]) => [
                name,
                { cap: nanoToUsd(window.cap), start: new Date(window.start).toISOString(), spent_or_held: nanoToUsd(seen!.windows[name]?.spent ?? 0) },
              ]),
            )
          : {},
      };
    }

    /** What the store needs to hold funds for this request (the first hold and its extension alike). */
    function reservationInput(ctx: GatewayContext, limits: PlanLimits | undefined): ReservationInput {
      const key = ctx.principal!.key;
      return {
        id: ctx.requestId,
        accountId: key.accountId,
        keyId: key.id,
        keyLimited: key.limit !== null,
        instanceId,
        createdAt: ctx.startedAt,
        windows: limits ? windowStarts(limits) : undefined,
      };
    }

    const service: BudgetService = {
      async extendHold(ctx, extra) {
        const key = ctx.principal!.key;
        let granted = 0;
        try {
          const limits = await windowsOf(key.accountId, ctx.startedAt);
          granted = await store.reserve(
            { ...reservationInput(ctx, limits), extension: true },
            function grantWithinFunds(funds) {
              // The funds exclude every hold, this request's included: what is left is free for anyone.
              let grant = Math.min(extra, funds.account);
              if (funds.key !== null) grant = Math.min(grant, funds.key);
              if (limits) {
                for (const [name, window] of Object.entries(limits.windows)) grant = Math.min(grant, window.cap - (funds.windows[name]?.spent ?? 0));
              }
              return Math.max(0, Math.floor(grant));
            },
          );
        } catch (error) {
          host.log.warn("could not extend a hold; the debit stays within the hold", { request_id: ctx.requestId, error: String(error) });
        }
        ctx.heldNano = (ctx.heldNano ?? 0) + granted;
        return granted;
      },
      funds: (accountId, key = null) => fundsView(accountId, key),
      async buyPlan(accountId, planName, funding) {
        const plan = Object.hasOwn(config.plans, planName) ? config.plans[planName] : undefined;
        if (!plan) throw new InvalidRequestError(`unknown plan "${planName}"; configured: ${Object.keys(config.plans).join(", ") || "none"}`, { param: "plan" });
        const now = host.now();
        const bought = await storeCall(
          store.purchasePlan({
            id: "plan_" + crypto.randomUUID().replaceAll("-", "").slice(0, 24),
            accountId,
            plan: planName,
            funding,
            price: usdToNano(plan.price),
            bonus: usdToNano(plan.bonus_credit ?? 0),
            startedAt: now,
            endsAt: now + PLAN_CYCLE_MS,
            renewing: funding === "card",
          }),
        );
        planCache.delete(accountId);
        return bought;
      },
      plans: config.plans,
    };

    return {
      provides: service,
      async onRequest(ctx) {
        const model = ctx.model!;
        const key = ctx.principal!.key;
        const promptTokens = ctx.promptTokenBound ?? 0;
        const clientMaxOutput = ctx.request.maxOutputTokens;
        if (clientMaxOutput !== undefined && model.kind === "chat" && clientMaxOutput > model.max_output_tokens) {
          throw new InvalidRequestError(
            `${outputCapParam(ctx)}=${clientMaxOutput} is above the maximum output of model "${model.id}": ${model.max_output_tokens} tokens; send ${model.max_output_tokens} or less`,
            { param: outputCapParam(ctx) },
          );
        }
        const worst = {
          promptTokens,
          prices: catalog.pricesFor(model, promptTokens, new Date(ctx.startedAt)),
          clientMaxOutput,
          modelMaxOutput: model.max_output_tokens,
          contextLength: model.context_length,
        };
        const now = host.now();
        let cycle = plansConfigured ? activePlan(key.accountId, now) : null;
        if (cycle instanceof Promise) cycle = await cycle.catch(storeDown);
        const plan = cycle ? config.plans[cycle.plan] : undefined;
        const limits = plan ? planLimits(plan, now) : undefined;
        let outputCap = 0;
        const input = reservationInput(ctx, limits);
        const holding = store.reserve(input, (funds) => {
          let reservation = planReservation(worst, funds);
          if (limits) {
            // All windows together, in the same transaction: the tightest one caps the output or refuses.
            const room = Math.min(...Object.entries(limits.windows).map(([name, w]) => w.cap - (funds.windows[name]?.spent ?? 0)));
            if (reservation.amount > room) {
              const fitted = worst.clientMaxOutput === undefined ? fitWithin(worst, { ...funds, account: Math.min(funds.account, room) }) : undefined;
              if (!fitted) checkWindows(limits, funds, reservation.amount, now); // throws, naming the window
              reservation = fitted!;
            }
          }
          outputCap = reservation.outputCap;
          return reservation.amount;
        });
        let held: number;
        try {
          held = await holding; // no `.catch` promise per request
        } catch (error) {
          storeDown(error);
        }
        ctx.upstreamOutputCap = outputCap;
        ctx.heldNano = held;
        ctx.log.reserved_nano = held;
      },
      /**
       * A fallback model (the catalog pointed ctx.model at it): its worst case, with the output cap already sent
       * (never above its own maximum), must fit the hold; the hold is extended from free funds when it does not,
       * and the fallback is skipped (a throw) when they cannot cover it.
       */
      async onFallback(ctx) {
        const model = ctx.model!;
        const clientMaxOutput = ctx.request.maxOutputTokens;
        if (clientMaxOutput !== undefined && model.kind === "chat" && clientMaxOutput > model.max_output_tokens) {
          throw new InvalidRequestError(`${outputCapParam(ctx)}=${clientMaxOutput} is above the maximum output of fallback model "${model.id}"`);
        }
        const promptTokens = ctx.promptTokenBound ?? 0;
        const prices = catalog.pricesFor(model, promptTokens, new Date(ctx.startedAt));
        const outputCap = Math.min(ctx.upstreamOutputCap ?? model.max_output_tokens, model.max_output_tokens);
        const worst = promptTokens * Math.max(prices.input, prices.cacheRead, prices.cacheWrite, prices.cacheWrite1h) + outputCap * prices.output;
        const held = ctx.heldNano ?? 0;
        if (worst > held) {
          const extra = worst - held;
          const granted = await service.extendHold(ctx, extra);
          if (granted < extra) throw new InvalidRequestError(`the funds free do not cover fallback model "${model.id}"'s worst case`);
        }
        ctx.upstreamOutputCap = outputCap;
        ctx.log.reserved_nano = ctx.heldNano;
      },
      routes(app) {
        // Under /admin/: the admin plugin's token check guards it before parsing.
        app.get("/admin/v1/plans", () => ({ data: config.plans }), { detail: listPlansDocs });
        app.post(
          "/admin/v1/accounts/:id/plan",
          async ({ request, params, body, set }) => {
            // Card plans with card payments on (payments-stripe registered its seller): a subscription checkout to pay;
            // the cycle starts when its first invoice is paid. Without it, as before: the cycle starts now.
            const seller = body.funding === "card" ? payments?.subscriptions() : undefined;
            if (seller && payments) {
              const plan = Object.hasOwn(config.plans, body.plan) ? config.plans[body.plan] : undefined;
              if (!plan) throw new InvalidRequestError(`unknown plan "${body.plan}"; configured: ${Object.keys(config.plans).join(", ") || "none"}`, { param: "plan" });
              const account = await store.getAccount(params.id);
              if (!account) throw new NotFoundError(`account ${params.id} not found`);
              let checkout: { processorRef: string; checkoutUrl: string };
              try {
                // The config's prices may be decimal strings: the seller gets USD numbers.
                const priced = { price: nanoToUsd(usdToNano(plan.price)), bonus_credit: nanoToUsd(usdToNano(plan.bonus_credit ?? 0)) };
                checkout = await seller.checkout(params.id, body.plan, priced, payments.context(request));
              } catch (error) {
                if (error instanceof GatewayError && error.status >= 500) throw error;
                host.log.error("plan checkout failed", { account_id: params.id, plan: body.plan, error: String(error) });
                throw new UpstreamError(`the card processor could not make the plan's checkout${error instanceof GatewayError ? `: ${error.message}` : ""}; try again in a moment`, {
                  cause: error,
                });
              }
              set.status = 201;
              return { data: { plan: body.plan, funding: "card" as const, status: "pending" as const, checkout_url: checkout.checkoutUrl } };
            }
            const { cycle, balance } = await service.buyPlan(params.id, body.plan, body.funding);
            set.status = 201;
            return { data: cycleView(cycle, balance) };
          },
          {
            body: t.Object({
              plan: t.String({ minLength: 1 }),
              funding: t.Union([t.Literal("balance"), t.Literal("card")], { error: "funding must be balance or card" }),
            }),
            detail: buyPlanWithCheckoutDocs,
          },
        );
        app.get(
          "/admin/v1/accounts/:id/funds",
          async ({ params, query }) => {
            const account = await store.getAccount(params.id);
            if (!account) throw new NotFoundError(`account ${params.id} not found`);
            const key = query.key_id === undefined ? null : await store.getKey(query.key_id);
            if (query.key_id !== undefined && (!key || key.accountId !== params.id)) throw new NotFoundError(`key ${query.key_id} not found on account ${params.id}`);
            return { data: await fundsView(params.id, key) };
          },
          {
            query: t.Object({ key_id: t.Optional(t.String({ minLength: 1 })) }),
            detail: fundsDocs,
          },
        );
      },
      onComplete(ctx) {
        // Metered requests release their hold in the transaction that writes their debit.
        if (!ctx.metered) return store.releaseReservation(ctx.requestId);
      },
      async close() {
        clearInterval(timer);
        // Debits still queued in the group commit go first: each deletes its hold in its own transaction.
        // Dropping the holds before that would show other processes the funds as free in between.
        try {
          await store.flush();
        } catch (error) {
          // The storage's final flush retries them; the holds left here go with their debits, or as stale.
          host.log.warn("metering flush failed at stop; keeping this process's reservations", { error: String(error) });
          return;
        }
        await store.removeInstance(instanceId);
      },
    };
  },
});

/**
 * No reservation without the store: the request fails closed with a 503 that says so and when to
 * retry (the store's own error says only "storage unavailable"). Refusals of the decision pass as they are.
 */
function storeDown(error: unknown): never {
  if (error instanceof UnavailableError) {
    throw new UnavailableError(
      "the balance cannot be checked: the account store is briefly unavailable, so the request was not sent and nothing was charged; retry in a few seconds",
      { headers: { "retry-after": "2" }, cause: error },
    );
  }
  throw error;
}

function windowStarts(limits: PlanLimits): Record<string, number> {
  return Object.fromEntries(Object.entries(limits.windows).map(([name, window]) => [name, window.start]));
}

/** The client's name for its output cap, for the 400 that names it. */
function outputCapParam(ctx: GatewayContext): string {
  if (ctx.ingress.name === "openai-responses") return "max_output_tokens";
  return ctx.body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
}

/** A smaller output cap that fits the funds given, or undefined when even one token does not. */
function fitWithin(worst: WorstCase, funds: Funds): ReservationPlan | undefined {
  try {
    return planReservation(worst, funds);
  } catch {
    return undefined;
  }
}
