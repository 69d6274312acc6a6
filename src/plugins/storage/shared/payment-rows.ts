import { InvalidRecordError } from "../errors.ts";
import {
  TAKE_BACK_KINDS,
  TOPUP_METHODS,
  type NewTopup,
  type PaymentEffect,
  type PaymentEvent,
  type PlanPurchase,
  type TakeBackKind,
  type Topup,
  type TopupMethod,
  type TopupStatus,
  type UnmatchedTransfer,
} from "../repository.ts";

/**
 * The payments domain's rows and decisions, the same in both dialects (sqlite/payments.ts,
 * postgres/payments.ts): what a stored row reads back as, what a new top-up is stored as, and what each
 * effect may do to a top-up in a given state. The dialects only read, lock and write.
 */

/** A `topups` row as either driver returns it raw (SQLite: numbers; Postgres: int8 as strings). */
export interface TopupRaw {
  id: string;
  account_id: string;
  method: string;
  amount_nano: number | string;
  status: string;
  processor_ref: string | null;
  checkout_url: string | null;
  payment_ref: string | null;
  network: string | null;
  pay_to: string | null;
  pay_amount_micro: number | string | null;
  flag: string | null;
  taken_back_nano: number | string;
  expires_at: number | string | null;
  created_at: number | string;
  updated_at: number | string;
}

const numOrNull = (value: number | string | null): number | null => (value === null ? null : Number(value));

export function topupFromRaw(row: TopupRaw): Topup {
  return {
    id: row.id,
    accountId: row.account_id,
    method: row.method as TopupMethod,
    amount: Number(row.amount_nano),
    status: row.status as TopupStatus,
    processorRef: row.processor_ref,
    checkoutUrl: row.checkout_url,
    paymentRef: row.payment_ref,
    network: row.network,
    payTo: row.pay_to,
    payAmountMicro: numOrNull(row.pay_amount_micro),
    flag: row.flag,
    takenBack: Number(row.taken_back_nano),
    expiresAt: numOrNull(row.expires_at),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** The columns of a `topups` row in insert order (what `newTopupValues` gives). */
export const TOPUP_COLUMNS =
  "id, account_id, method, amount_nano, status, processor_ref, checkout_url, payment_ref, network, pay_to, pay_amount_micro, flag, taken_back_nano, expires_at, created_at, updated_at";

/** A new top-up as stored: checked, `pending`, nothing paid or taken back. */
export function newTopup(topup: NewTopup, now: number): Topup {
  if (!topup.id) throw new InvalidRecordError("top-up id is required", { field: "id" });
  if (!(TOPUP_METHODS as readonly string[]).includes(topup.method)) {
    throw new InvalidRecordError(`unknown top-up method "${topup.method}"`, { field: "method" });
  }
  if (!Number.isSafeInteger(topup.amount) || topup.amount <= 0) {
    throw new InvalidRecordError("top-up amount must be a positive integer of nano-USD", { field: "amount" });
  }
  if (topup.payAmountMicro !== null && (!Number.isSafeInteger(topup.payAmountMicro) || topup.payAmountMicro <= 0)) {
    throw new InvalidRecordError("pay amount must be a positive integer of micro-units", { field: "payAmountMicro" });
  }
  return {
    id: topup.id,
    accountId: topup.accountId,
    method: topup.method,
    amount: topup.amount,
    status: "pending",
    processorRef: null,
    checkoutUrl: null,
    paymentRef: null,
    network: topup.network,
    payTo: topup.payTo,
    payAmountMicro: topup.payAmountMicro,
    flag: null,
    takenBack: 0,
    expiresAt: topup.expiresAt,
    createdAt: now,
    updatedAt: now,
  };
}

/** A top-up's values in TOPUP_COLUMNS order. */
export function topupValues(t: Topup): (string | number | null)[] {
  return [t.id, t.accountId, t.method, t.amount, t.status, t.processorRef, t.checkoutUrl, t.paymentRef, t.network, t.payTo, t.payAmountMicro, t.flag, t.takenBack, t.expiresAt, t.createdAt, t.updatedAt];
}

/** Refuses an event or effect that could never be applied as given (a bug of the caller), before any I/O. */
export function checkPaymentEvent(event: PaymentEvent, effect: PaymentEffect): void {
  if (!event.id) throw new InvalidRecordError("payment event id is required", { field: "id" });
  if (!event.processor) throw new InvalidRecordError("payment event processor is required", { field: "processor" });
  if (!Number.isFinite(event.receivedAt)) throw new InvalidRecordError("payment event receivedAt must be epoch ms", { field: "receivedAt" });
  switch (effect.kind) {
    case "credit":
      if (!effect.paymentRef) throw new InvalidRecordError("a credit needs the payment's reference", { field: "paymentRef" });
      break;
    case "take-back":
      if (!(TAKE_BACK_KINDS as readonly string[]).includes(effect.takeBack)) {
        throw new InvalidRecordError(`unknown take-back kind "${effect.takeBack}"`, { field: "takeBack" });
      }
      if (!effect.reference) throw new InvalidRecordError("a take-back needs its reference (refund or dispute id)", { field: "reference" });
      if (!Number.isSafeInteger(effect.amount) || effect.amount <= 0) {
        throw new InvalidRecordError("take-back amount must be a positive integer of nano-USD", { field: "amount" });
      }
      break;
    case "plan-cycle":
      if (effect.purchase.funding !== "card") throw new InvalidRecordError("a subscription pays card-funded cycles only", { field: "funding" });
      if (!effect.subscriptionRef) throw new InvalidRecordError("a plan cycle needs its subscription", { field: "subscriptionRef" });
      if (!(effect.purchase.endsAt > effect.purchase.startedAt)) throw new InvalidRecordError("a plan cycle must end after it starts", { field: "endsAt" });
      break;
    case "plan-stop":
      if (!effect.subscriptionRef) throw new InvalidRecordError("plan-stop needs the subscription", { field: "subscriptionRef" });
      break;
  }
}

/** The top-up an effect names, if any. */
export function effectTopupId(effect: PaymentEffect): string | null {
  return "topupId" in effect ? effect.topupId : null;
}

/**
 * A credit is made only from these states: a flagged `paid` top-up may still be credited, and an `expired` one whose
 * payment the processor confirms after our sweep marked it (the money arrived: the record's amount is credited).
 */
export const CREDITABLE: ReadonlySet<string> = new Set<TopupStatus>(["pending", "paid", "expired"]);
/** Money is taken back only from a top-up that credited it. */
export const TAKEABLE: ReadonlySet<string> = new Set<TopupStatus>(["credited", "refunded", "disputed"]);

/** What a take-back may still take: the request, bounded by what the top-up credited and has not given back. */
export function takeBackBound(topup: Pick<Topup, "amount" | "takenBack">, requested: number): number {
  return Math.max(0, Math.min(requested, topup.amount - topup.takenBack));
}

/** The state after a take-back: a dispute marks it `disputed` for good; a refund marks it `refunded` unless disputed. */
export function takeBackStatus(current: TopupStatus, kind: TakeBackKind): TopupStatus {
  if (kind === "dispute" || current === "disputed") return "disputed";
  return "refunded";
}

/** An account's block reason for a dispute. */
export const disputeBlockReason = (reference: string) => `payment dispute ${reference}`;

/** The flag of a credit that could not be made because its payment was already used by another record. */
export const paymentReusedFlag = (paymentRef: string, by: string) => `payment ${paymentRef} was already credited as ${by}; not credited again`;

/**
 * A subscription's new cycle: from `purchase.startedAt`, or, when the account's current cycle of the same
 * subscription has not ended by then, from that cycle's end (a renewal paid before the end), same length.
 */
export function renewalCycle(purchase: PlanPurchase, current: { endsAt: number } | null): PlanPurchase {
  if (current === null || current.endsAt <= purchase.startedAt) return purchase;
  const length = purchase.endsAt - purchase.startedAt;
  return { ...purchase, startedAt: current.endsAt, endsAt: current.endsAt + length };
}

/** An `unmatched_transfers` row as either driver returns it raw. */
export interface UnmatchedRaw {
  id: string;
  network: string;
  token: string;
  from_address: string;
  to_address: string;
  amount_micro: number | string;
  at: number | string;
  reason: string;
  recorded_at: number | string;
}

export function unmatchedFromRaw(row: UnmatchedRaw): UnmatchedTransfer {
  return {
    id: row.id,
    network: row.network,
    token: row.token,
    from: row.from_address,
    to: row.to_address,
    amountMicro: Number(row.amount_micro),
    at: Number(row.at),
    reason: row.reason,
    recordedAt: Number(row.recorded_at),
  };
}

export function checkUnmatched(t: UnmatchedTransfer): void {
  if (!t.id) throw new InvalidRecordError("transfer id is required", { field: "id" });
  if (!Number.isSafeInteger(t.amountMicro) || t.amountMicro < 0) {
    throw new InvalidRecordError("transfer amount must be a non-negative integer of micro-units", { field: "amountMicro" });
  }
}

/** A `payment_events` row read back. */
export interface PaymentEventRaw {
  id: string;
  processor: string;
  type: string;
  topup_id: string | null;
  amount_nano: number | string;
  received_at: number | string;
}

export function paymentEventFromRaw(row: PaymentEventRaw): PaymentEvent & { topupId: string | null; amount: number } {
  return { id: row.id, processor: row.processor, type: row.type, receivedAt: Number(row.received_at), topupId: row.topup_id, amount: Number(row.amount_nano) };
}

/** The raw SQL of a newest-first keyset cursor over (`time`, id): `before` then the id at that time. */
export function olderThanRaw(time: string, page: { before?: number; beforeId?: string }, param: (value: string | number) => string): string {
  if (page.before === undefined) return "";
  const before = param(page.before);
  const beforeSame = param(page.before);
  const id = param(page.beforeId ?? "");
  // The plain `<=` bounds the index range (shared/cursor.ts).
  return ` and ${time} <= ${before} and (${time} < ${beforeSame} or id < ${id})`;
}
