import type { DocumentDecoration } from "elysia";
import { ErrorBody } from "../../openapi/operation.ts";

const error = (description: string) => ({ description, content: { "application/json": { schema: ErrorBody } } });

/** POST /webhooks/stripe: called by Stripe, authenticated by the Stripe-Signature header (no gateway key). */
export const stripeWebhookDocs = {
  summary: "Stripe webhook (payments)",
  description:
    "Where Stripe sends the events of card top-ups and plans: checkout.session.completed, checkout.session.async_payment_succeeded, " +
    "checkout.session.expired, charge.refunded, charge.dispute.created, invoice.paid, customer.subscription.deleted. The raw body is " +
    "verified against the Stripe-Signature header with STRIPE_WEBHOOK_SECRET; each event is applied once (a replay changes nothing). " +
    "Any answer but 2xx makes Stripe retry: 5xx when the event could not be applied yet (store unavailable, a refund before its payment).",
  tags: ["payments"],
  security: [],
  parameters: [{ name: "stripe-signature", in: "header", required: true, description: "Stripe's signature of the raw body (t=…,v1=…)", schema: { type: "string" } }],
  requestBody: {
    required: true,
    content: { "application/json": { schema: { type: "object", description: "A Stripe event object", properties: { id: { type: "string" }, type: { type: "string" }, data: { type: "object" } } } } },
  },
  responses: {
    "200": {
      description: "Applied, or not the gateway's (left alone)",
      content: {
        "application/json": {
          schema: {
            type: "object",
            required: ["received", "applied"],
            properties: {
              received: { type: "boolean", enum: [true] },
              applied: { type: "array", items: { type: "string" }, description: "The effects this call applied (credit, flag, expire, take-back, plan-cycle, plan-stop); empty for a replay or an event with nothing to do" },
            },
          },
        },
      },
    },
    "400": error("The signature does not verify (forged, another endpoint's secret, stale), or the body is no Stripe event"),
    "413": error("The body is larger than a Stripe event"),
    "500": error("The event could not be recorded (store failure): Stripe retries"),
    "503": error("Not yet: Stripe could not be asked, or a refund or dispute came before its payment was recorded; Stripe retries"),
  },
} as unknown as DocumentDecoration;
