import { InvalidRequestError } from "../../core/errors.ts";
import { usdToNano, type NanoUsd } from "../../core/money.ts";
import { PLAN_CYCLE_MS } from "../budget/plans.ts";
import type { PaymentEffect, Topup } from "../storage/repository.ts";

/**
 * What a verified Stripe event means to us, without I/O: `readEvent` reads the event into an action; the
 * effect builders turn an action and the records it names (our top-up, the configured plan) into the
 * PaymentEffect that `payments.apply` records once. webhook.ts does the looking up in between.
 */

export const NANO_PER_CENT = 10_000_000;
/** A card plan's cycle, in the days Stripe bills by (a price with interval "day"). */
export const PLAN_CYCLE_DAYS = PLAN_CYCLE_MS / 86_400_000;

/** One refund of a charge, as Stripe lists it. */
export interface RefundPart {
  id: string;
  amountCents: number;
  status: string | null;
  created: number;
}

export type StripeAction =
  /** Nothing to do: `record` says whether the event is still ours to record (an event type we do not act on) or not ours at all. */
  | { kind: "ignore"; reason: string; record: boolean }
  /** A paid Checkout Session of a top-up. */
  | { kind: "checkout-paid"; topupId: string; sessionId: string; paymentRef: string | null; amountCents: number | null; currency: string | null }
  /** A Checkout Session that ended unpaid. */
  | { kind: "checkout-expired"; topupId: string; sessionId: string }
  /** A charge refunded, in part or whole; `refunds` null: the event does not list them (current API versions), ask the API. */
  | { kind: "refunded"; chargeId: string; paymentIntent: string | null; topupId: string | null; refunds: RefundPart[] | null }
  /** A dispute opened on a charge: the disputed amount is withdrawn from the balance. */
  | { kind: "disputed"; disputeId: string; chargeId: string | null; paymentIntent: string | null; amountCents: number }
  /** A subscription invoice paid: a plan cycle starts or renews. */
  | { kind: "invoice-paid"; invoiceId: string; subscriptionRef: string; accountId: string; plan: string; amountPaidCents: number; currency: string }
  /** A subscription ended: its cycles stop renewing. */
  | { kind: "subscription-ended"; subscriptionRef: string };

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An id-or-expanded-object field (Stripe's `payment_intent: "pi_…" | {id: "pi_…", …}`). */
function idOf(value: unknown): string | null {
  if (typeof value === "string" && value !== "") return value;
  if (isObject(value) && typeof value.id === "string" && value.id !== "") return value.id;
  return null;
}

function text(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

function metadataOf(value: unknown): Json {
  return isObject(value) && isObject(value.metadata) ? value.metadata : {};
}

function malformed(type: string, what: string): InvalidRequestError {
  return new InvalidRequestError(`malformed ${type} event: ${what}`);
}

function wholeCents(value: unknown, type: string, field: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw malformed(type, `${field} is not a whole number of cents`);
  return value;
}

/** Reads a verified event into what it asks of us. Throws InvalidRequestError for an event that is not Stripe's shape. */
export function readEvent(event: unknown): StripeAction {
  if (!isObject(event) || typeof event.id !== "string" || typeof event.type !== "string" || !isObject(event.data) || !isObject(event.data.object)) {
    throw new InvalidRequestError("malformed Stripe event: it needs an id, a type and data.object");
  }
  const type = event.type;
  const object = event.data.object;
  switch (type) {
    case "checkout.session.completed":
    case "checkout.session.async_payment_succeeded":
      return readPaidSession(type, object);
    case "checkout.session.expired": {
      const session = readSession(type, object);
      if (!session.topupId) return { kind: "ignore", reason: "a Checkout Session that is not a gateway top-up", record: false };
      if (session.mode !== "payment") return { kind: "ignore", reason: `a ${session.mode} Checkout Session expired`, record: true };
      return { kind: "checkout-expired", topupId: session.topupId, sessionId: session.id };
    }
    case "charge.refunded": {
      const chargeId = text(object.id);
      if (!chargeId) throw malformed(type, "the charge has no id");
      const listed = isObject(object.refunds) && Array.isArray(object.refunds.data) && object.refunds.has_more !== true ? object.refunds.data : null;
      return {
        kind: "refunded",
        chargeId,
        paymentIntent: idOf(object.payment_intent),
        topupId: text(metadataOf(object).topup_id),
        refunds: listed === null ? null : listed.map((refund) => readRefund(type, refund)),
      };
    }
    case "charge.dispute.created": {
      const disputeId = text(object.id);
      if (!disputeId) throw malformed(type, "the dispute has no id");
      return {
        kind: "disputed",
        disputeId,
        chargeId: idOf(object.charge),
        paymentIntent: idOf(object.payment_intent),
        amountCents: wholeCents(object.amount, type, "amount"),
      };
    }
    case "invoice.paid":
    case "invoice.payment_succeeded":
      return readPaidInvoice(type, object);
    case "customer.subscription.deleted": {
      const subscriptionRef = text(object.id);
      if (!subscriptionRef) throw malformed(type, "the subscription has no id");
      return { kind: "subscription-ended", subscriptionRef };
    }
    default:
      return { kind: "ignore", reason: `${type} is not acted on`, record: true };
  }
}

function readSession(type: string, object: Json) {
  const id = text(object.id);
  if (!id) throw malformed(type, "the Checkout Session has no id");
  return {
    id,
    mode: text(object.mode) ?? "payment",
    topupId: text(metadataOf(object).topup_id) ?? (text(object.client_reference_id)?.startsWith("tu_") ? text(object.client_reference_id) : null),
  };
}

function readPaidSession(type: string, object: Json): StripeAction {
  const session = readSession(type, object);
  // A subscription's checkout: its cycles start with invoice.paid, which carries the subscription's metadata.
  if (session.mode !== "payment") return { kind: "ignore", reason: `a ${session.mode} Checkout Session (its invoice.paid starts the cycle)`, record: true };
  if (!session.topupId) return { kind: "ignore", reason: "a Checkout Session that is not a gateway top-up", record: false };
  // Asynchronous methods (bank debits) complete unpaid; async_payment_succeeded follows when the money arrives.
  if (object.payment_status !== "paid") return { kind: "ignore", reason: `the session completed ${String(object.payment_status)}: waiting for the payment`, record: true };
  return {
    kind: "checkout-paid",
    topupId: session.topupId,
    sessionId: session.id,
    paymentRef: idOf(object.payment_intent),
    amountCents: typeof object.amount_total === "number" ? object.amount_total : null,
    currency: typeof object.currency === "string" ? object.currency.toLowerCase() : null,
  };
}

function readRefund(type: string, refund: unknown): RefundPart {
  if (!isObject(refund) || !text(refund.id)) throw malformed(type, "a refund without an id");
  return {
    id: refund.id as string,
    amountCents: wholeCents(refund.amount, type, "refund amount"),
    status: text(refund.status),
    created: typeof refund.created === "number" ? refund.created : 0,
  };
}

/** Where current and older API versions put a subscription invoice's subscription and its metadata. */
function readPaidInvoice(type: string, object: Json): StripeAction {
  const invoiceId = text(object.id);
  if (!invoiceId) throw malformed(type, "the invoice has no id");
  const parent = isObject(object.parent) && isObject(object.parent.subscription_details) ? object.parent.subscription_details : null;
  const legacy = isObject(object.subscription_details) ? object.subscription_details : null;
  const firstLine = isObject(object.lines) && Array.isArray(object.lines.data) && isObject(object.lines.data[0]) ? object.lines.data[0] : null;
  const lineParent = firstLine && isObject(firstLine.parent) && isObject(firstLine.parent.subscription_item_details) ? firstLine.parent.subscription_item_details : null;
  const candidates = [metadataOf(parent), metadataOf(legacy), metadataOf(firstLine)];
  const metadata = candidates.find((entry) => text(entry.account_id) && text(entry.plan));
  const subscriptionRef = idOf(parent?.subscription) ?? idOf(object.subscription) ?? idOf(lineParent?.subscription) ?? idOf(firstLine?.subscription);
  if (!metadata || !subscriptionRef) return { kind: "ignore", reason: "an invoice that is not a gateway plan's", record: false };
  return {
    kind: "invoice-paid",
    invoiceId,
    subscriptionRef,
    accountId: metadata.account_id as string,
    plan: metadata.plan as string,
    amountPaidCents: wholeCents(object.amount_paid, type, "amount_paid"),
    currency: typeof object.currency === "string" ? object.currency.toLowerCase() : "",
  };
}

const usd = (cents: number) => `${(cents / 100).toFixed(2)} USD`;

/** A paid session of `topup`: credit our own amount, or flag it when what was paid differs from the record. */
export function checkoutEffect(topup: Topup, paid: Extract<StripeAction, { kind: "checkout-paid" }>): PaymentEffect {
  const ours = topup.amount / NANO_PER_CENT;
  let reason: string | null = null;
  if (paid.currency !== "usd") reason = `paid in ${paid.currency?.toUpperCase() ?? "an unknown currency"}, the top-up is in USD`;
  else if (paid.amountCents !== ours) reason = `amount paid ${paid.amountCents === null ? "unknown" : usd(paid.amountCents)} differs from ${usd(ours)}`;
  else if (topup.method !== "card") reason = `a card payment for a ${topup.method} top-up`;
  else if (topup.processorRef !== null && topup.processorRef !== paid.sessionId) reason = `paid through Checkout Session ${paid.sessionId}, the top-up's is ${topup.processorRef}`;
  else if (paid.paymentRef === null) reason = "the paid session names no PaymentIntent";
  if (reason !== null) return { kind: "flag", topupId: topup.id, paymentRef: paid.paymentRef, reason };
  return { kind: "credit", topupId: topup.id, paymentRef: paid.paymentRef! };
}

/** Refunds that moved money (a failed or canceled refund gave nothing back), oldest first. */
export function effectiveRefunds(refunds: readonly RefundPart[]): RefundPart[] {
  return refunds
    .filter((refund) => refund.status !== "failed" && refund.status !== "canceled" && refund.amountCents > 0)
    .sort((a, b) => a.created - b.created || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * One take-back per refund of the charge, each under its own event id: the first refund under the event's id, the
 * others under "<event id>:<refund id>". Every refund takes back once (its id is the ledger reference), so a later
 * event that lists earlier refunds again takes back only the new one, and a replay changes nothing.
 */
export function refundEffects(eventId: string, topup: Topup, refunds: readonly RefundPart[]): { eventId: string; effect: PaymentEffect }[] {
  return effectiveRefunds(refunds).map((refund, index) => ({
    eventId: index === 0 ? eventId : `${eventId}:${refund.id}`,
    effect: { kind: "take-back", topupId: topup.id, takeBack: "refund", reference: refund.id, amount: refund.amountCents * NANO_PER_CENT },
  }));
}

/** A dispute takes back the disputed amount (the store blocks the account until an operator clears it). */
export function disputeEffect(topup: Topup, dispute: Extract<StripeAction, { kind: "disputed" }>): PaymentEffect {
  return { kind: "take-back", topupId: topup.id, takeBack: "dispute", reference: dispute.disputeId, amount: dispute.amountCents * NANO_PER_CENT };
}

/** The plan purchase id of an invoice: one cycle per invoice, whatever event (paid, payment_succeeded) brings it. */
export function purchaseIdOf(invoiceId: string): string {
  return "plan_" + invoiceId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 100);
}

/**
 * A paid plan invoice: the cycle at our price and bonus (the store starts it now, or at the end of the cycle of the
 * same subscription that runs). Null with the reason when the invoice does not pay for the plan as configured.
 */
export function planCycleEffect(
  paid: Extract<StripeAction, { kind: "invoice-paid" }>,
  plan: { price: number | string; bonus_credit?: number | string } | undefined,
  now: number,
): { effect: PaymentEffect; problem?: undefined } | { effect?: undefined; problem: string } {
  if (!plan) return { problem: `plan "${paid.plan}" is not configured` };
  const price: NanoUsd = usdToNano(plan.price);
  if (paid.currency !== "usd") return { problem: `invoice ${paid.invoiceId} was paid in ${paid.currency.toUpperCase() || "an unknown currency"}, plans are in USD` };
  if (paid.amountPaidCents * NANO_PER_CENT < price) {
    return { problem: `invoice ${paid.invoiceId} paid ${usd(paid.amountPaidCents)}, less than plan "${paid.plan}" costs (${usd(price / NANO_PER_CENT)})` };
  }
  return {
    effect: {
      kind: "plan-cycle",
      subscriptionRef: paid.subscriptionRef,
      purchase: {
        id: purchaseIdOf(paid.invoiceId),
        accountId: paid.accountId,
        plan: paid.plan,
        funding: "card",
        price,
        bonus: usdToNano(plan.bonus_credit ?? 0),
        startedAt: now,
        endsAt: now + PLAN_CYCLE_MS,
        renewing: true,
      },
    },
  };
}
