import type { NanoUsd } from "../../core/money.ts";
import type { NewTopup, PaymentEffect, PaymentEvent, PaymentEventResult, Topup, TopupMethod } from "../storage/repository.ts";

/**
 * A payment processor (one plugin each: payments-stripe, payments-usdt-tron): it makes the processor's side of a
 * top-up from our own record (the amount is ours), and reports payments back through `PaymentsService.apply`
 * (a verified webhook, a transfer seen on chain), which credits through the ledger once per event.
 */
export interface PaymentProcessor {
  /** The processor's name, the prefix of its event ids ("stripe", "tron"). */
  readonly name: string;
  /** The top-up method it serves. One processor per method. */
  readonly method: TopupMethod;
  /** The smallest top-up it takes, USD (spec: card 5, USDT 12). */
  readonly minimumUsd: number;
  /**
   * What the top-up record must hold before it is stored, for processors that identify a payment by it (USDT: the
   * network, the receiving address, the exact amount to send with its unique offset, the expiry). Called before
   * `PaymentStore.createTopup`; the result goes into the record.
   */
  prepare?(draft: {
    accountId: string;
    amount: NanoUsd;
    /** The expiry the core proposes (USDT: now + the payments config's `usdt_invoice_minutes`; card: null); a result's non-null expiresAt wins. */
    expiresAt?: number | null;
  }): Promise<Pick<NewTopup, "network" | "payTo" | "payAmountMicro" | "expiresAt">>;
  /**
   * The processor's side of a new top-up, already stored `pending` (a Stripe Checkout Session; a unique USDT
   * amount to send). Throws a GatewayError when the processor refuses or cannot be reached (the top-up then stays
   * pending without a checkout and expires).
   */
  start(topup: Topup, context: TopupContext): Promise<TopupStart>;
  /** The processor's own record of payments since `since` (epoch ms), for `payments reconcile`. */
  records?(since: number): Promise<ProcessorRecord[]>;
}

/** Where the payer came from: the base URL for the pages a checkout returns to (the dashboard's Billing page by default). */
export interface TopupContext {
  /** e.g. "https://gateway.example.com" (GATEWAY_PUBLIC_URL, else the request's own origin). */
  origin: string;
}

/** Sells recurring plans by card (registered by the card processor): a subscription checkout for a configured plan. */
export interface SubscriptionSeller {
  checkout(accountId: string, planName: string, plan: { price: number; bonus_credit?: number }, context: TopupContext): Promise<{ processorRef: string; checkoutUrl: string }>;
}

/** What a processor adds to a new top-up: the Checkout Session (card), or where and what exactly to pay (USDT). */
export type TopupStart =
  | { kind: "checkout"; processorRef: string; checkoutUrl: string; expiresAt: number | null }
  | { kind: "transfer" };

/** One payment as the processor knows it, for reconciliation against our credits. */
export interface ProcessorRecord {
  /** The payment id our credit uses as its reference (a PaymentIntent, a transaction id). */
  paymentRef: string;
  /** Our top-up id when the processor carries it (metadata); null when it cannot say. */
  topupId: string | null;
  /** What was paid, nano-USD (USDT at 1:1). */
  amount: NanoUsd;
  /** Money given back by the processor for this payment (refunds, lost disputes), nano-USD. */
  returned: NanoUsd;
  at: number;
}

/** What the `payments` plugin offers the processor plugins and the dashboard. */
export interface PaymentsService {
  /** A processor plugin registers itself at setup (it must come after `payments` in the pipeline). */
  register(processor: PaymentProcessor): void;
  /** The methods that have a processor, with their minimums. */
  methods(): { method: TopupMethod; minimumUsd: number }[];
  /**
   * A new top-up of the account: the amount checked against the method's minimum (400 naming it), stored
   * `pending`, then started with the processor. What `POST /v1/credits/topups` and the dashboard's Billing page call.
   */
  createTopup(accountId: string, method: TopupMethod, amountUsd: number | string, context: TopupContext): Promise<Topup>;
  /** The card processor registers its subscription checkout; budget's `POST /admin/v1/accounts/:id/plan {funding: "card"}` uses it when present. */
  registerSubscriptions(seller: SubscriptionSeller): void;
  subscriptions(): SubscriptionSeller | undefined;
  /** Applies a processor's event once (PaymentStore.applyPaymentEvent) and clears what caches the effect changes (a dispute's blocked keys). */
  apply(event: PaymentEvent, effect: PaymentEffect): Promise<PaymentEventResult>;
  /** Where a request's payer came from: the config's `public_url` (GATEWAY_PUBLIC_URL), else the request's own origin. */
  context(request: Request): TopupContext;
  /** Expires the pending top-ups whose expiresAt passed by `now` (what the minute sweep runs); the number expired. */
  expireDue(now?: number): Promise<number>;
}

declare module "../../core/plugin.ts" {
  interface Services {
    payments: PaymentsService;
  }
}
