import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { PLAN_CYCLE_MS } from "../../../src/plugins/budget/plans.ts";
import {
  PLAN_CYCLE_DAYS,
  checkoutEffect,
  disputeEffect,
  planCycleEffect,
  purchaseIdOf,
  readEvent,
  refundEffects,
  type StripeAction,
} from "../../../src/plugins/payments-stripe/events.ts";
import type { Topup } from "../../../src/plugins/storage/repository.ts";
import { chargeRefundedEvent, checkoutSessionEvent, disputeCreatedEvent, invoicePaidEvent, stripeEvent, subscriptionDeletedEvent } from "../../fake-stripe/events.ts";

const USD = 1_000_000_000;

function topup(overrides: Partial<Topup> = {}): Topup {
  return {
    id: "tu_1",
    accountId: "acc_1",
    method: "card",
    amount: 25 * USD,
    status: "pending",
    processorRef: "cs_test_1",
    checkoutUrl: "https://checkout.stripe.com/c/pay/cs_test_1",
    paymentRef: null,
    network: null,
    payTo: null,
    payAmountMicro: null,
    flag: null,
    takenBack: 0,
    expiresAt: null,
    createdAt: 1,
    updatedAt: 1,
    ...overrides,
  };
}

const session = (overrides: Record<string, unknown> = {}) => ({
  id: "cs_test_1",
  object: "checkout.session",
  mode: "payment",
  amount_total: 2500,
  currency: "usd",
  client_reference_id: "tu_1",
  metadata: { topup_id: "tu_1", account_id: "acc_1" },
  payment_intent: "pi_1",
  payment_status: "paid",
  status: "complete",
  ...overrides,
});

function paid(action: StripeAction) {
  if (action.kind !== "checkout-paid") throw new Error(`expected checkout-paid, got ${action.kind}`);
  return action;
}

describe("checkout sessions", () => {
  it("a paid session of our amount in USD credits the top-up, referenced by its PaymentIntent", () => {
    for (const type of ["checkout.session.completed", "checkout.session.async_payment_succeeded"] as const) {
      const action = paid(readEvent(checkoutSessionEvent(type, session())));
      expect(action).toEqual({ kind: "checkout-paid", topupId: "tu_1", sessionId: "cs_test_1", paymentRef: "pi_1", amountCents: 2500, currency: "usd" });
      expect(checkoutEffect(topup(), action)).toEqual({ kind: "credit", topupId: "tu_1", paymentRef: "pi_1" });
    }
  });

  it("finds the top-up by client_reference_id when the metadata is gone, and accepts an expanded PaymentIntent", () => {
    const action = paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ metadata: {}, payment_intent: { id: "pi_9", object: "payment_intent" } }))));
    expect(action.topupId).toBe("tu_1");
    expect(action.paymentRef).toBe("pi_9");
  });

  it("flags, never credits, a paid amount or currency that differs from the record", () => {
    const lower = checkoutEffect(topup(), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ amount_total: 2499 })))));
    expect(lower).toEqual({ kind: "flag", topupId: "tu_1", paymentRef: "pi_1", reason: "amount paid 24.99 USD differs from 25.00 USD" });
    const higher = checkoutEffect(topup(), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ amount_total: 250000 })))));
    expect(higher.kind).toBe("flag");
    const euro = checkoutEffect(topup(), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ currency: "EUR" })))));
    expect(euro).toEqual({ kind: "flag", topupId: "tu_1", paymentRef: "pi_1", reason: "paid in EUR, the top-up is in USD" });
    const noAmount = checkoutEffect(topup(), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ amount_total: null })))));
    expect(noAmount.kind).toBe("flag");
  });

  it("flags a payment through another session than the top-up's, or one without a PaymentIntent", () => {
    const other = checkoutEffect(topup(), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ id: "cs_test_other" })))));
    expect(other.kind).toBe("flag");
    // A top-up whose checkout was never attached (the answer was lost) is still credited by its own session.
    expect(checkoutEffect(topup({ processorRef: null }), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ id: "cs_test_other" }))))).kind).toBe("credit");
    const noIntent = checkoutEffect(topup(), paid(readEvent(checkoutSessionEvent("checkout.session.completed", session({ payment_intent: null })))));
    expect(noIntent).toMatchObject({ kind: "flag", paymentRef: null });
  });

  it("waits for an async payment (completed unpaid), and leaves subscriptions' and others' sessions to their own events", () => {
    expect(readEvent(checkoutSessionEvent("checkout.session.completed", session({ payment_status: "unpaid", payment_intent: null })))).toMatchObject({ kind: "ignore", record: true });
    expect(readEvent(checkoutSessionEvent("checkout.session.completed", session({ mode: "subscription", metadata: { account_id: "acc_1", plan: "pro" }, client_reference_id: "acc_1" })))).toMatchObject({
      kind: "ignore",
      record: true,
    });
    expect(readEvent(checkoutSessionEvent("checkout.session.completed", session({ metadata: {}, client_reference_id: null })))).toMatchObject({ kind: "ignore", record: false });
  });

  it("an expired session expires its top-up", () => {
    expect(readEvent(checkoutSessionEvent("checkout.session.expired", session({ status: "expired", payment_status: "unpaid", payment_intent: null })))).toEqual({
      kind: "checkout-expired",
      topupId: "tu_1",
      sessionId: "cs_test_1",
    });
  });
});

describe("refunds and disputes", () => {
  const charge = (refunds: { id: string; amount: number; status?: string; created?: number }[] | undefined, overrides: Record<string, unknown> = {}) => ({
    id: "ch_1",
    object: "charge",
    amount: 2500,
    amount_refunded: (refunds ?? []).reduce((sum, refund) => sum + refund.amount, 0),
    currency: "usd",
    payment_intent: "pi_1",
    metadata: {},
    refunded: false,
    ...(refunds === undefined
      ? {}
      : { refunds: { object: "list", has_more: false, data: refunds.map((refund) => ({ object: "refund", status: "succeeded", created: 1, ...refund })) } }),
    ...overrides,
  });

  it("reads the charge's refunds; without a complete list it asks the API (refunds null)", () => {
    expect(readEvent(chargeRefundedEvent(charge([{ id: "re_1", amount: 500 }])))).toEqual({
      kind: "refunded",
      chargeId: "ch_1",
      paymentIntent: "pi_1",
      topupId: null,
      refunds: [{ id: "re_1", amountCents: 500, status: "succeeded", created: 1 }],
    });
    expect(readEvent(chargeRefundedEvent(charge(undefined)))).toMatchObject({ kind: "refunded", refunds: null });
    expect(readEvent(chargeRefundedEvent({ ...charge([{ id: "re_1", amount: 500 }]), refunds: { object: "list", has_more: true, data: [] } }))).toMatchObject({ refunds: null });
    expect(readEvent(chargeRefundedEvent(charge([], { metadata: { topup_id: "tu_7" } })))).toMatchObject({ topupId: "tu_7" });
  });

  it("takes back each refund once by its id: the first under the event's id, the others under event:refund", () => {
    const action = readEvent(chargeRefundedEvent(charge([
      { id: "re_2", amount: 1000, created: 20 },
      { id: "re_1", amount: 500, created: 10 },
      { id: "re_3", amount: 700, created: 30, status: "failed" },
    ])));
    if (action.kind !== "refunded") throw new Error(action.kind);
    expect(refundEffects("stripe:evt_9", topup({ status: "credited", paymentRef: "pi_1" }), action.refunds!)).toEqual([
      { eventId: "stripe:evt_9", effect: { kind: "take-back", topupId: "tu_1", takeBack: "refund", reference: "re_1", amount: 5 * USD } },
      { eventId: "stripe:evt_9:re_2", effect: { kind: "take-back", topupId: "tu_1", takeBack: "refund", reference: "re_2", amount: 10 * USD } },
    ]);
  });

  it("a dispute takes back the disputed amount under the dispute's id", () => {
    const action = readEvent(disputeCreatedEvent({ id: "dp_1", object: "dispute", amount: 2500, currency: "usd", charge: "ch_1", payment_intent: "pi_1", status: "needs_response" }));
    expect(action).toEqual({ kind: "disputed", disputeId: "dp_1", chargeId: "ch_1", paymentIntent: "pi_1", amountCents: 2500 });
    expect(disputeEffect(topup({ status: "credited" }), action as Extract<StripeAction, { kind: "disputed" }>)).toEqual({
      kind: "take-back",
      topupId: "tu_1",
      takeBack: "dispute",
      reference: "dp_1",
      amount: 25 * USD,
    });
  });
});

describe("plans", () => {
  const plan = { price: 20, bonus_credit: 5 };
  const invoice = (overrides: Record<string, unknown> = {}) => ({
    id: "in_1",
    object: "invoice",
    amount_paid: 2000,
    currency: "usd",
    billing_reason: "subscription_cycle",
    parent: { type: "subscription_details", subscription_details: { subscription: "sub_1", metadata: { account_id: "acc_1", plan: "pro" } } },
    lines: { object: "list", data: [] },
    ...overrides,
  });

  it("a paid invoice of a plan's subscription is a 30-day card cycle at our price and bonus, one per invoice", () => {
    const action = readEvent(invoicePaidEvent(invoice()));
    expect(action).toEqual({ kind: "invoice-paid", invoiceId: "in_1", subscriptionRef: "sub_1", accountId: "acc_1", plan: "pro", amountPaidCents: 2000, currency: "usd" });
    const { effect } = planCycleEffect(action as Extract<StripeAction, { kind: "invoice-paid" }>, plan, 1_000);
    expect(effect).toEqual({
      kind: "plan-cycle",
      subscriptionRef: "sub_1",
      purchase: { id: "plan_in_1", accountId: "acc_1", plan: "pro", funding: "card", price: 20 * USD, bonus: 5 * USD, startedAt: 1_000, endsAt: 1_000 + PLAN_CYCLE_MS, renewing: true },
    });
    expect(PLAN_CYCLE_DAYS).toBe(30);
    expect(readEvent(invoicePaidEvent(invoice(), "invoice.payment_succeeded"))).toEqual(action);
  });

  it("reads older shapes of the subscription's metadata, and leaves invoices that are no plan's alone", () => {
    const legacy = invoice({ parent: null, subscription: "sub_2", subscription_details: { metadata: { account_id: "acc_2", plan: "pro" } } });
    expect(readEvent(invoicePaidEvent(legacy))).toMatchObject({ subscriptionRef: "sub_2", accountId: "acc_2" });
    const onLine = invoice({ parent: null, lines: { data: [{ metadata: { account_id: "acc_3", plan: "pro" }, parent: { subscription_item_details: { subscription: "sub_3" } } }] } });
    expect(readEvent(invoicePaidEvent(onLine))).toMatchObject({ subscriptionRef: "sub_3", accountId: "acc_3" });
    expect(readEvent(invoicePaidEvent(invoice({ parent: null })))).toMatchObject({ kind: "ignore", record: false });
  });

  it("starts no cycle for an unknown plan, another currency or less than the price", () => {
    const action = readEvent(invoicePaidEvent(invoice())) as Extract<StripeAction, { kind: "invoice-paid" }>;
    expect(planCycleEffect(action, undefined, 0).problem).toContain(`plan "pro" is not configured`);
    expect(planCycleEffect({ ...action, currency: "eur" }, plan, 0).problem).toContain("EUR");
    expect(planCycleEffect({ ...action, amountPaidCents: 1999 }, plan, 0).problem).toContain("less than");
  });

  it("a deleted subscription stops renewing; purchase ids are safe", () => {
    expect(readEvent(subscriptionDeletedEvent({ id: "sub_1", object: "subscription", status: "canceled", metadata: {} }))).toEqual({ kind: "subscription-ended", subscriptionRef: "sub_1" });
    expect(purchaseIdOf("in_1a/b c")).toBe("plan_in_1a_b_c");
  });
});

describe("other and malformed events", () => {
  it("an event type not acted on is recorded with no effect", () => {
    expect(readEvent(stripeEvent("payment_intent.created", { id: "pi_1", object: "payment_intent" }))).toEqual({ kind: "ignore", reason: "payment_intent.created is not acted on", record: true });
  });

  it("an event without Stripe's shape is an invalid request", () => {
    for (const bad of [null, {}, { id: "evt_1", type: "charge.refunded" }, { id: "evt_1", type: "x", data: {} }]) expect(() => readEvent(bad)).toThrow(InvalidRequestError);
    expect(() => readEvent(chargeRefundedEvent({ object: "charge" }))).toThrow(InvalidRequestError);
    expect(() => readEvent(disputeCreatedEvent({ id: "dp_1", amount: "12" }))).toThrow(InvalidRequestError);
    expect(() => readEvent(chargeRefundedEvent({ id: "ch_1", refunds: { has_more: false, data: [{ id: "re_1", amount: -5 }] } }))).toThrow(InvalidRequestError);
  });
});
