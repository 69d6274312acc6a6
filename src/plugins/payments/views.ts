import { nanoToUsd } from "../../core/money.ts";
import type { Topup, UnmatchedTransfer } from "../storage/repository.ts";

/** The top-up API's JSON shapes: times as RFC 3339, money as USD numbers, USDT amounts as exact 6-decimal strings. */

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** Micro-units (6 decimals, USDT) as an exact decimal string: 12003417 → "12.003417". */
export function microToDecimal(micro: number): string {
  const negative = micro < 0;
  const abs = Math.abs(micro);
  return (negative ? "-" : "") + String(Math.floor(abs / 1_000_000)) + "." + String(abs % 1_000_000).padStart(6, "0");
}

/** Whether the top-up's amount reached the balance (taken back since, in part or whole, for refunded and disputed). */
export function wasCredited(topup: Topup): boolean {
  return topup.status === "credited" || topup.status === "refunded" || topup.status === "disputed";
}

export function topupView(topup: Topup) {
  return {
    id: topup.id,
    method: topup.method,
    amount: nanoToUsd(topup.amount),
    status: topup.status,
    created_at: iso(topup.createdAt)!,
    updated_at: iso(topup.updatedAt)!,
    expires_at: iso(topup.expiresAt),
    ...(topup.method === "card" ? { checkout_url: topup.checkoutUrl } : {}),
    ...(topup.method === "usdt"
      ? {
          pay_to: topup.payTo,
          pay_amount: topup.payAmountMicro === null ? null : microToDecimal(topup.payAmountMicro),
          network: topup.network,
          token: "USDT",
        }
      : {}),
    flag: topup.flag,
    taken_back: nanoToUsd(topup.takenBack),
    credited: wasCredited(topup),
  };
}

/** A top-up as the operator lists it: the API's view plus the account and the processor's references. */
export function adminTopupView(topup: Topup) {
  return { ...topupView(topup), account_id: topup.accountId, processor_ref: topup.processorRef, payment_ref: topup.paymentRef };
}

export function unmatchedView(transfer: UnmatchedTransfer) {
  return {
    id: transfer.id,
    network: transfer.network,
    token: transfer.token,
    from: transfer.from,
    to: transfer.to,
    amount: microToDecimal(transfer.amountMicro),
    at: iso(transfer.at)!,
    reason: transfer.reason,
    recorded_at: iso(transfer.recordedAt)!,
  };
}
