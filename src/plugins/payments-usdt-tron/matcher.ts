import type { Topup } from "../storage/repository.ts";

/**
 * Which top-up a transfer seen on chain pays, if any. Pure and network-agnostic: a sibling network (ERC-20 through
 * `eth_getLogs`) turns its own log entries into a SeenTransfer and uses this as it is.
 */

/** A token transfer to a receiving address, confirmed on its chain. */
export interface SeenTransfer {
  /** The payment event id: "<network>:<transaction id>" ("tron:…"). Also the credit's ledger reference. */
  id: string;
  network: string;
  /** The token's contract address. */
  contract: string;
  symbol: string;
  /** The token's decimals (USDT: 6). */
  decimals: number;
  from: string;
  to: string;
  /** The amount in the token's smallest unit: a string of digits (no float ever). */
  value: string;
  /** The block's time, epoch ms. */
  at: number;
}

/** What is accepted on this network. */
export interface MatchRules {
  /** The one token credited: its contract and decimals (USDT on TRON: TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t, 6). */
  token: { contract: string; symbol: string; decimals: number };
  /** The smallest transfer credited, USD (spec: 12); the token counts 1:1 with USD. */
  minimumUsd: number;
  /**
   * How far a block's time may precede the top-up's creation by our clock (the two clocks differ a little): a
   * transfer older than that was sent before its amount was given to anyone, so it pays no top-up.
   */
  clockSkewMs: number;
}

export type Match =
  /** Pays this top-up: credit it (its own amount) once. */
  | { kind: "credit"; topupId: string; amountMicro: number }
  /** Pays nothing automatically: recorded for the operator with why. */
  | { kind: "unmatched"; reason: string; amountMicro: number };

/** Micro-units per token unit for a 6-decimal token. */
const MICRO = 1_000_000;

/**
 * The match of one transfer against the pending top-ups to its address (`PaymentStore.openTopupsTo` read far
 * enough back to include the ones that expired during the window, so that a late payment says "after expiry").
 */
export function matchTransfer(transfer: SeenTransfer, topups: readonly Topup[], rules: MatchRules): Match {
  if (transfer.contract !== rules.token.contract) {
    return {
      kind: "unmatched",
      reason: `token ${transfer.symbol} ${transfer.contract} is not ${rules.token.symbol}`,
      amountMicro: smallestUnits(transfer.value),
    };
  }
  const amountMicro = toMicro(transfer.value, transfer.decimals);
  const shown = microToDecimal(amountMicro);
  if (amountMicro < rules.minimumUsd * MICRO) {
    return { kind: "unmatched", reason: `${shown} ${rules.token.symbol} is below the ${rules.minimumUsd} USD minimum`, amountMicro };
  }
  const sameAmount = topups.filter(
    (topup) => topup.status === "pending" && topup.payAmountMicro === amountMicro && topup.network === transfer.network && topup.payTo === transfer.to,
  );
  const open = sameAmount.filter((topup) => topup.createdAt - rules.clockSkewMs <= transfer.at && (topup.expiresAt === null || transfer.at < topup.expiresAt));
  if (open.length === 1) return { kind: "credit", topupId: open[0]!.id, amountMicro };
  if (open.length > 1) {
    // Amounts are unique among open top-ups; two instances picking the same random offset at once could break that.
    return {
      kind: "unmatched",
      reason: `${shown} ${rules.token.symbol} matches ${open.length} open top-ups (${open.map((topup) => topup.id).join(", ")}): credit the right one by hand`,
      amountMicro,
    };
  }
  const expired = sameAmount.filter((topup) => topup.expiresAt !== null && transfer.at >= topup.expiresAt);
  if (expired.length > 0) {
    const last = expired.reduce((a, b) => ((a.expiresAt ?? 0) >= (b.expiresAt ?? 0) ? a : b));
    return {
      kind: "unmatched",
      reason: `${shown} ${rules.token.symbol} arrived after expiry of top-up ${last.id} (expired ${new Date(last.expiresAt!).toISOString()})`,
      amountMicro,
    };
  }
  return { kind: "unmatched", reason: `no open top-up for ${shown} ${rules.token.symbol}`, amountMicro };
}

/** A 6-decimal token's value in micro-units (another number of decimals is scaled; past 2^53: the largest safe integer). */
export function toMicro(value: string, decimals: number): number {
  const units = BigInt(value);
  const micro = decimals >= 6 ? units / 10n ** BigInt(decimals - 6) : units * 10n ** BigInt(6 - decimals);
  return micro > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(micro);
}

/** The raw amount in the token's smallest unit, as a safe number (capped: the reason keeps the exact figure). */
function smallestUnits(value: string): number {
  const units = BigInt(value);
  return units > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(units);
}

/** 20004217 → "20.004217": six decimals, always. */
export function microToDecimal(micro: number): string {
  const whole = Math.floor(micro / MICRO);
  const fraction = String(micro % MICRO).padStart(6, "0");
  return `${whole}.${fraction}`;
}
