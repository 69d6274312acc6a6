/**
 * Stripe events as Stripe sends them (the Event object around a resource, API version of the library), and
 * their delivery to a gateway's POST /webhooks/stripe signed with the library's own test helper.
 *
 *   const event = checkoutSessionEvent("checkout.session.completed", fake.session(id));
 *   const { status, body } = await deliver(gatewayUrl, event, { secret: "whsec_…" });
 */
import Stripe from "stripe";

type Json = Record<string, any>;

/** The library's API version: what a webhook endpoint created for it receives. */
export const API_VERSION = Stripe.API_VERSION;

let sequence = 0;
const RUN = Math.random().toString(36).slice(2, 10);

/** A fresh Stripe-style id with this prefix ("evt", "pi", "re", …). */
export function stripeId(prefix: string): string {
  return `${prefix}_test_${RUN}${(++sequence).toString(36).padStart(6, "0")}`;
}

/** The Event object around `object`: what every webhook delivers. */
export function stripeEvent(type: string, object: Json, options: { id?: string; previousAttributes?: Json; created?: number } = {}): Json {
  return {
    id: options.id ?? stripeId("evt"),
    object: "event",
    api_version: API_VERSION,
    created: options.created ?? Math.floor(Date.now() / 1000),
    data: { object: structuredClone(object), ...(options.previousAttributes ? { previous_attributes: options.previousAttributes } : {}) },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

export type CheckoutSessionEventType = "checkout.session.completed" | "checkout.session.async_payment_succeeded" | "checkout.session.async_payment_failed" | "checkout.session.expired";

export function checkoutSessionEvent(type: CheckoutSessionEventType, session: Json, options?: { id?: string }): Json {
  return stripeEvent(type, session, options);
}

/**
 * charge.refunded: the charge after the refund. Current API versions do not include `refunds` on a charge (pass
 * `includeRefunds: false` to send it that way: the gateway then lists them through the API); its previous
 * amount_refunded is in previous_attributes.
 */
export function chargeRefundedEvent(charge: Json, options: { id?: string; previousAmountRefunded?: number; includeRefunds?: boolean } = {}): Json {
  const object = structuredClone(charge);
  if (options.includeRefunds === false) delete object.refunds;
  const previousAttributes = options.previousAmountRefunded === undefined ? undefined : { amount_refunded: options.previousAmountRefunded, refunded: false };
  return stripeEvent("charge.refunded", object, { id: options.id, previousAttributes });
}

export function disputeCreatedEvent(dispute: Json, options?: { id?: string }): Json {
  return stripeEvent("charge.dispute.created", dispute, options);
}

export function invoicePaidEvent(invoice: Json, type: "invoice.paid" | "invoice.payment_succeeded" = "invoice.paid", options?: { id?: string }): Json {
  return stripeEvent(type, invoice, options);
}

export function subscriptionDeletedEvent(subscription: Json, options?: { id?: string }): Json {
  return stripeEvent("customer.subscription.deleted", subscription, options);
}

/** Signs like Stripe: "t=<unix seconds>,v1=<HMAC-SHA256 of t.payload>" with the endpoint's signing secret. */
const signer = new Stripe("sk_test_signer_only");
export async function signature(payload: string, secret: string, timestamp?: number): Promise<string> {
  return signer.webhooks.generateTestHeaderStringAsync({ payload, secret, ...(timestamp === undefined ? {} : { timestamp }) });
}

/** POSTs the event to `<gatewayUrl>/webhooks/stripe` as Stripe does: the JSON body and its Stripe-Signature. */
export async function deliver(
  gatewayUrl: string,
  event: Json,
  options: { secret: string; header?: string | null; payload?: string },
): Promise<{ status: number; body: any }> {
  const payload = options.payload ?? JSON.stringify(event, null, 2);
  const header = options.header === undefined ? await signature(payload, options.secret) : options.header;
  const response = await fetch(`${gatewayUrl}/webhooks/stripe`, {
    method: "POST",
    headers: { "content-type": "application/json; charset=utf-8", "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)", ...(header === null ? {} : { "stripe-signature": header }) },
    body: payload,
  });
  const text = await response.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, body };
}
