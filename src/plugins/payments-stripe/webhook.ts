import type Stripe from "stripe";
import { GatewayError, InvalidRequestError, PayloadTooLargeError, UnavailableError } from "../../core/errors.ts";
import type { Logger } from "../../core/log.ts";
import type { PaymentsService } from "../payments/processor.ts";
import type { PaymentEffect, PaymentStore, Topup } from "../storage/repository.ts";
import type { PlanConfig } from "../budget/plans.ts";
import { checkoutEffect, disputeEffect, planCycleEffect, readEvent, refundEffects, type RefundPart, type StripeAction } from "./events.ts";

/** Stripe's events are a few kB; a body past this is not one. */
const MAX_EVENT_BYTES = 1024 * 1024;

export interface WebhookDeps {
  stripe: Stripe;
  webhookSecret: string;
  store: Pick<PaymentStore, "getTopup" | "findTopupByPaymentRef">;
  payments: Pick<PaymentsService, "apply">;
  plans: () => Readonly<Record<string, PlanConfig>>;
  log: Logger;
  now: () => number;
}

/** The answer Stripe gets: 2xx only once the event is applied (or is nothing of ours), so any failure is retried. */
export interface WebhookAnswer {
  received: true;
  /** What the event did: the effects applied by this call ("credit", "take-back", …), [] for none. */
  applied: string[];
}

/** Stripe retries a 5xx for days: the processor or the store was briefly unavailable, or a refund came before its payment. */
class RetryLaterError extends UnavailableError {}

/** An answer of Stripe's API while resolving an event (a charge's refunds, a payment's metadata): 503, Stripe retries. */
async function askStripe<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw new RetryLaterError(`could not read ${what} from Stripe; retry later`, { headers: { "retry-after": "30" }, cause: error });
  }
}

/** A store read or write that failed for a reason other than the event itself: 500, Stripe retries. */
function storeFailure(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  return new GatewayError("the payment event could not be recorded; it will be retried", { cause: error });
}

export function createWebhook(deps: WebhookDeps) {
  const { stripe, store, payments, log } = deps;

  async function read<T>(call: Promise<T>): Promise<T> {
    try {
      return await call;
    } catch (error) {
      throw storeFailure(error);
    }
  }

  /**
   * The top-up a payment (PaymentIntent) paid: by our record of the payment, else by the top-up id Stripe carries
   * (the charge's or the PaymentIntent's metadata). "not-ours": no top-up of ours. "too-early": ours but not paid
   * yet here (the completed event has not arrived): Stripe must retry.
   */
  async function topupOfPayment(paymentIntent: string | null, topupId: string | null): Promise<Topup | "not-ours" | "too-early"> {
    if (paymentIntent) {
      const paid = await read(store.findTopupByPaymentRef(paymentIntent));
      if (paid) return paid;
    }
    let id = topupId;
    if (!id && paymentIntent) {
      const intent = await askStripe(`PaymentIntent ${paymentIntent}`, () => stripe.paymentIntents.retrieve(paymentIntent));
      id = intent.metadata?.topup_id || null;
    }
    const topup = id ? await read(store.getTopup(id)) : null;
    if (!topup) return "not-ours";
    if (topup.status === "pending") return "too-early";
    return topup;
  }

  /** What a verified event does: the effects to apply, each under its own event id. */
  async function effectsOf(eventId: string, action: StripeAction): Promise<{ eventId: string; effect: PaymentEffect }[] | "not-ours"> {
    switch (action.kind) {
      case "ignore":
        if (!action.record) return "not-ours";
        return [{ eventId, effect: { kind: "none" } }];
      case "checkout-paid": {
        const topup = await read(store.getTopup(action.topupId));
        if (!topup) return "not-ours";
        return [{ eventId, effect: checkoutEffect(topup, action) }];
      }
      case "checkout-expired": {
        const topup = await read(store.getTopup(action.topupId));
        if (!topup) return "not-ours";
        return [{ eventId, effect: { kind: "expire", topupId: topup.id } }];
      }
      case "refunded": {
        const topup = await topupOfPayment(action.paymentIntent, action.topupId);
        if (topup === "not-ours") return "not-ours";
        if (topup === "too-early") throw new RetryLaterError(`charge ${action.chargeId} was refunded before its payment was recorded here; retry later`, { headers: { "retry-after": "60" } });
        const refunds =
          action.refunds ??
          (await askStripe(`the refunds of charge ${action.chargeId}`, async () => {
            const listed: RefundPart[] = [];
            for await (const refund of stripe.refunds.list({ charge: action.chargeId, limit: 100 })) {
              listed.push({ id: refund.id, amountCents: refund.amount, status: refund.status, created: refund.created });
            }
            return listed;
          }));
        const effects = refundEffects(eventId, topup, refunds);
        return effects.length > 0 ? effects : [{ eventId, effect: { kind: "none" } }];
      }
      case "disputed": {
        let paymentIntent = action.paymentIntent;
        if (!paymentIntent && action.chargeId) {
          const chargeId = action.chargeId;
          const charge = await askStripe(`charge ${chargeId}`, () => stripe.charges.retrieve(chargeId));
          paymentIntent = typeof charge.payment_intent === "string" ? charge.payment_intent : (charge.payment_intent?.id ?? null);
        }
        const topup = await topupOfPayment(paymentIntent, null);
        if (topup === "not-ours") return "not-ours";
        if (topup === "too-early") throw new RetryLaterError(`dispute ${action.disputeId} came before its payment was recorded here; retry later`, { headers: { "retry-after": "60" } });
        return [{ eventId, effect: disputeEffect(topup, action) }];
      }
      case "invoice-paid": {
        const planned = planCycleEffect(action, Object.hasOwn(deps.plans(), action.plan) ? deps.plans()[action.plan] : undefined, deps.now());
        if (planned.problem !== undefined) {
          // Money arrived for a plan we cannot give as paid for: recorded, shown in the log for the operator.
          log.error("stripe: a paid plan invoice starts no cycle", { event: eventId, account: action.accountId, problem: planned.problem });
          return [{ eventId, effect: { kind: "none" } }];
        }
        return [{ eventId, effect: planned.effect }];
      }
      case "subscription-ended":
        return [{ eventId, effect: { kind: "plan-stop", subscriptionRef: action.subscriptionRef } }];
    }
  }

  /** POST /webhooks/stripe: verify the signature over the raw body, then apply the event once. */
  return async function handle(request: Request): Promise<WebhookAnswer> {
    const signature = request.headers.get("stripe-signature");
    if (!signature) throw new InvalidRequestError("missing Stripe-Signature header", { param: "stripe-signature" });
    const raw = await request.text();
    if (raw.length > MAX_EVENT_BYTES) throw new PayloadTooLargeError(`a Stripe event is at most ${MAX_EVENT_BYTES} bytes`);
    let event: Stripe.Event;
    try {
      event = await stripe.webhooks.constructEventAsync(raw, signature, deps.webhookSecret);
    } catch (error) {
      log.warn("stripe: a webhook whose signature does not verify", { error: String((error as Error)?.message ?? error).slice(0, 200) });
      throw new InvalidRequestError("the Stripe-Signature does not verify for this body and the endpoint's signing secret", { param: "stripe-signature" });
    }
    const action = readEvent(event);
    const eventId = `stripe:${event.id}`;
    const effects = await effectsOf(eventId, action);
    if (effects === "not-ours") {
      log.info("stripe: an event about nothing of the gateway's, left alone", { event: event.id, type: event.type, reason: action.kind === "ignore" ? action.reason : action.kind });
      return { received: true, applied: [] };
    }
    if (action.kind === "ignore") log.info("stripe: event recorded, nothing to do", { event: event.id, type: event.type, reason: action.reason });
    const applied: string[] = [];
    for (const { eventId: id, effect } of effects) {
      let result;
      try {
        result = await payments.apply({ id, processor: "stripe", type: event.type, receivedAt: deps.now() }, effect);
      } catch (error) {
        if (error instanceof GatewayError && error.status < 500) throw error;
        log.error("stripe: applying a payment event failed; Stripe will retry", { event: id, effect: effect.kind, error: String(error) });
        throw storeFailure(error);
      }
      // What this call changed: money moved (a credit, a take-back), or a newly recorded effect of another kind.
      const moved = effect.kind === "credit" || effect.kind === "take-back" ? result.amount !== 0 : effect.kind !== "none";
      if (result.applied && moved) applied.push(effect.kind);
      if (effect.kind === "flag" && result.applied) log.warn("stripe: a payment differs from its top-up: flagged, not credited", { event: id, topup: effect.topupId, reason: effect.reason });
    }
    return { received: true, applied };
  };
}
