import { GatewayError, InvalidRequestError, UnavailableError, UpstreamError } from "../../core/errors.ts";
import type { Logger } from "../../core/log.ts";
import { usdToNano, type NanoUsd } from "../../core/money.ts";
import type { AuthService } from "../auth/principal.ts";
import { storeCall } from "../storage/http-errors.ts";
import { TOPUP_METHODS, type KeyStore, type PaymentStore, type Topup, type TopupMethod } from "../storage/repository.ts";
import type { PaymentProcessor, PaymentsService, SubscriptionSeller } from "./processor.ts";
import type { PaymentsConfig } from "./schema.ts";

/**
 * A pending top-up is marked expired this long after its `expires_at`, not at once: a USDT transfer sent just
 * before the deadline is confirmed on chain a minute or more later, and only a pending top-up can be credited.
 * The payer's deadline is unchanged: the poller credits only transfers whose block time is before `expires_at`.
 */
const EXPIRY_GRACE_MS = 30 * 60_000;

/** Top-ups are whole cents up to this many USD. */
export const MAX_TOPUP_USD = 100_000;
/** How the methods are named in messages. */
export const METHOD_LABELS: Record<TopupMethod, string> = { card: "card", usdt: "USDT" };

const AMOUNT = /^\d{1,6}(\.\d{1,2})?$/;
const AMOUNT_RULE = `amount must be a positive number of USD with at most 2 decimals (whole cents), at most ${MAX_TOPUP_USD}`;

/** A top-up amount: a positive number or decimal string, whole cents, at most 100,000 USD; else 400 param amount. */
export function parseTopupAmount(amount: unknown): NanoUsd {
  let text: string;
  if (typeof amount === "number") {
    if (!Number.isFinite(amount)) throw new InvalidRequestError(AMOUNT_RULE, { param: "amount" });
    text = String(amount); // 19.99 → "19.99"; 1e300 and 1e-7 keep their exponent and fail below
  } else if (typeof amount === "string") {
    text = amount.trim();
  } else {
    throw new InvalidRequestError(amount === undefined ? `amount is required: ${AMOUNT_RULE}` : AMOUNT_RULE, { param: "amount" });
  }
  if (!AMOUNT.test(text)) throw new InvalidRequestError(AMOUNT_RULE, { param: "amount" });
  const nano = usdToNano(text);
  if (nano <= 0 || nano > usdToNano(MAX_TOPUP_USD)) throw new InvalidRequestError(AMOUNT_RULE, { param: "amount" });
  return nano;
}

/** A new top-up id: tu_ + 24 hex. */
export function newTopupId(): string {
  return "tu_" + Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString("hex");
}

/** The payments core: processors by method, top-ups created and started, processors' events applied once. */
export function createPaymentsService(deps: {
  config: PaymentsConfig;
  store: PaymentStore & KeyStore;
  auth: AuthService;
  log: Logger;
  now: () => number;
}): PaymentsCore {
  const { config, store, auth, log, now } = deps;
  const processors = new Map<TopupMethod, PaymentProcessor>();
  let seller: SubscriptionSeller | undefined;

  /** The account's keys are read again from the store by every worker of this instance (a block set or cleared); other instances within auth's cache TTL. */
  async function forgetKeys(accountId: string): Promise<void> {
    let before: { before: number; beforeId: string } | undefined;
    for (;;) {
      const keys = await store.listKeys(accountId, { limit: 500, ...before });
      await Promise.all(keys.map((key) => auth.forget(key.keyHash)));
      const last = keys[keys.length - 1];
      if (keys.length < 500 || !last) return;
      before = { before: last.createdAt, beforeId: last.id };
    }
  }

  function available(): string {
    return processors.size === 0
      ? "no payment method is configured on this gateway (ask the operator)"
      : `available: ${[...processors.keys()].join(", ")}`;
  }

  const service: PaymentsCore = {
    register(processor) {
      const taken = processors.get(processor.method);
      if (taken) throw new Error(`payments: two processors for method "${processor.method}" (${taken.name} and ${processor.name}); enable one`);
      if (!(TOPUP_METHODS as readonly string[]).includes(processor.method)) throw new Error(`payments: processor ${processor.name} serves unknown method "${processor.method}"`);
      processors.set(processor.method, processor);
      log.info("payment processor registered", { processor: processor.name, method: processor.method, minimum_usd: processor.minimumUsd });
    },

    methods() {
      return TOPUP_METHODS.filter((method) => processors.has(method)).map((method) => ({ method, minimumUsd: processors.get(method)!.minimumUsd }));
    },

    async createTopup(accountId, method, amountUsd, context) {
      if (typeof method !== "string" || !(TOPUP_METHODS as readonly string[]).includes(method)) {
        throw new InvalidRequestError(`method must be one of ${TOPUP_METHODS.join(", ")}; ${available()}`, { param: "method" });
      }
      const amount = parseTopupAmount(amountUsd);
      const processor = processors.get(method);
      if (!processor) {
        throw new InvalidRequestError(
          processors.size === 0 ? `top-ups are not available: ${available()}` : `${METHOD_LABELS[method]} top-ups are not available on this gateway; ${available()}`,
          { param: "method" },
        );
      }
      if (amount < usdToNano(processor.minimumUsd)) {
        throw new InvalidRequestError(`the minimum ${METHOD_LABELS[method]} top-up is ${processor.minimumUsd} USD`, { param: "amount" });
      }
      const at = now();
      const proposed = method === "usdt" ? at + config.usdt_invoice_minutes * 60_000 : null;
      const prepared = processor.prepare ? await started(processor, () => processor.prepare!({ accountId, amount, expiresAt: proposed })) : undefined;
      let topup = await storeCall(
        store.createTopup({
          id: newTopupId(),
          accountId,
          method,
          amount,
          network: prepared?.network ?? null,
          payTo: prepared?.payTo ?? null,
          payAmountMicro: prepared?.payAmountMicro ?? null,
          expiresAt: prepared?.expiresAt ?? proposed,
        }),
      );
      const start = await started(processor, () => processor.start(topup, context), topup);
      if (start.kind === "checkout") {
        topup = await storeCall(store.attachCheckout(topup.id, { processorRef: start.processorRef, checkoutUrl: start.checkoutUrl, expiresAt: start.expiresAt }));
      }
      log.info("top-up created", { topup_id: topup.id, account_id: accountId, method, amount_nano: amount });
      return topup;
    },

    registerSubscriptions(next) {
      if (seller) throw new Error("payments: a second subscription seller registered");
      seller = next;
    },
    subscriptions: () => seller,

    async apply(event, effect) {
      const result = await store.applyPaymentEvent(event, effect);
      if (result.applied && effect.kind === "take-back" && effect.takeBack === "dispute" && result.topup) {
        // The block holds from now on in this instance; a failure here only leaves auth's short cache to expire.
        await forgetKeys(result.topup.accountId).catch((error) => log.warn("could not clear the key cache after a dispute", { error: String(error) }));
      }
      return result;
    },

    context(request) {
      return { origin: config.public_url ? config.public_url.replace(/\/+$/, "") : new URL(request.url).origin };
    },

    async expireDue(at = now()) {
      let expired = 0;
      // A full batch: more may be due (each one expired is no longer pending, so the next read moves on). Bounded:
      // a round that expires nothing (another instance got there first) ends the sweep until the next one.
      for (let round = 0; round < 100; round++) {
        const due = await store.expiredPendingTopups(at - EXPIRY_GRACE_MS, 100);
        let expiredNow = 0;
        for (const topup of due) {
          const result = await service.apply({ id: "expiry:" + topup.id, processor: "gateway", type: "topup.expired", receivedAt: at }, { kind: "expire", topupId: topup.id });
          if (result.applied) expiredNow++;
        }
        expired += expiredNow;
        if (due.length < 100 || expiredNow === 0) break;
      }
      return expired;
    },

    forgetKeys,
    processors: () => [...processors.values()],
  };

  /** A processor's call: its GatewayErrors of 5xx pass; anything else is a 502 that says the top-up stays pending. */
  async function started<T>(processor: PaymentProcessor, call: () => Promise<T>, topup?: Topup): Promise<T> {
    try {
      return await call();
    } catch (error) {
      log.error("payment processor failed", { processor: processor.name, topup_id: topup?.id, error: String(error) });
      const what = `the ${METHOD_LABELS[processor.method]} processor (${processor.name}) could not start this top-up`;
      const after = topup ? `; top-up ${topup.id} stays pending without a payment and expires. Try again in a moment` : "; try again in a moment";
      if (error instanceof GatewayError && error.status === 503) {
        throw new UnavailableError(`${what}: ${error.message}${after}`, { headers: error.headers ?? { "retry-after": "5" }, cause: error });
      }
      throw new UpstreamError(`${what}${error instanceof GatewayError ? `: ${error.message}` : ""}${after}`, { cause: error });
    }
  }

  return service;
}

export type PaymentsCore = PaymentsService & {
  /** Auth's cached keys of the account are dropped in this instance (after a block is set or cleared). */
  forgetKeys(accountId: string): Promise<void>;
  /** The registered processors (reconciliation reads each one's records). */
  processors(): PaymentProcessor[];
};
