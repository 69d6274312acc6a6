import type Stripe from "stripe";
import type { ProcessorRecord } from "../payments/processor.ts";
import { NANO_PER_CENT } from "./events.ts";

/**
 * Stripe's own record of the top-ups paid since `since` (epoch ms), for `payments reconcile`: the paid Checkout
 * Sessions of mode payment (each a PaymentIntent, our top-up id in its metadata), with what refunds and disputes
 * created since then gave back of each.
 */
export async function stripeRecords(stripe: Stripe, since: number): Promise<ProcessorRecord[]> {
  const created = { gte: Math.floor(since / 1000) };
  const records = new Map<string, ProcessorRecord>();
  for await (const session of stripe.checkout.sessions.list({ created, limit: 100 })) {
    if (session.mode !== "payment" || session.payment_status !== "paid") continue;
    const paymentRef = typeof session.payment_intent === "string" ? session.payment_intent : session.payment_intent?.id;
    if (!paymentRef) continue;
    records.set(paymentRef, {
      paymentRef,
      topupId: session.metadata?.topup_id || session.client_reference_id || null,
      amount: (session.amount_total ?? 0) * NANO_PER_CENT,
      returned: 0,
      at: session.created * 1000,
    });
  }
  const giveBack = (paymentIntent: unknown, cents: number) => {
    const ref = typeof paymentIntent === "string" ? paymentIntent : (paymentIntent as { id?: string } | null)?.id;
    const record = ref ? records.get(ref) : undefined;
    if (record) record.returned += cents * NANO_PER_CENT;
  };
  for await (const refund of stripe.refunds.list({ created, limit: 100 })) {
    if (refund.status === "failed" || refund.status === "canceled") continue;
    giveBack(refund.payment_intent, refund.amount);
  }
  for await (const dispute of stripe.disputes.list({ created, limit: 100 })) giveBack(dispute.payment_intent, dispute.amount);
  return [...records.values()].sort((a, b) => a.at - b.at);
}
