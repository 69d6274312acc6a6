import type Stripe from "stripe";
import { GatewayError, InvalidRequestError } from "../../core/errors.ts";
import { usdToNano, type NanoUsd } from "../../core/money.ts";
import type { Topup } from "../storage/repository.ts";
import type { TopupContext, TopupStart } from "../payments/processor.ts";
import { PLAN_CYCLE_DAYS } from "./events.ts";
import type { StripeConfig } from "./schema.ts";

const NANO_PER_CENT = 10_000_000;

/** The processor could not be reached or refused: the payer may try again shortly. */
export class CardPaymentsUnavailableError extends GatewayError {
  override readonly status = 502;
  override readonly type = "upstream_error";
  override readonly code = "upstream_error";
}

/** Whole cents of a nano-USD amount (top-ups and plan prices are whole cents); anything finer is refused. */
export function centsOf(amount: NanoUsd): number {
  if (!Number.isSafeInteger(amount) || amount <= 0 || amount % NANO_PER_CENT !== 0) {
    throw new InvalidRequestError(`a card payment is a positive number of whole cents`, { param: "amount" });
  }
  return amount / NANO_PER_CENT;
}

/** The pages Checkout returns to: the configured ones, else the dashboard's Billing page of the gateway the payer came from. */
function returnUrls(config: StripeConfig, context: TopupContext): { success_url: string; cancel_url: string } {
  const billing = `${context.origin.replace(/\/+$/, "")}/dashboard/billing`;
  return { success_url: config.success_url || billing, cancel_url: config.cancel_url || billing };
}

/** Turns what the Stripe client throws into the one answer the payer gets (the cause is kept for the log). */
function unavailable(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  return new CardPaymentsUnavailableError("card payments are briefly unavailable; try again in a minute", { cause: error });
}

/** A Checkout Session (mode payment) for our top-up: our amount in USD, our ids in the metadata; idempotent per top-up. */
export async function startCheckout(stripe: Stripe, config: StripeConfig, topup: Topup, context: TopupContext): Promise<TopupStart> {
  const ids = { topup_id: topup.id, account_id: topup.accountId };
  let session: Stripe.Checkout.Session;
  try {
    session = await stripe.checkout.sessions.create(
      {
        mode: "payment",
        line_items: [{ quantity: 1, price_data: { currency: "usd", unit_amount: centsOf(topup.amount), product_data: { name: "Gateway credit" } } }],
        client_reference_id: topup.id,
        metadata: ids,
        payment_intent_data: { metadata: ids },
        ...returnUrls(config, context),
      },
      { idempotencyKey: topup.id },
    );
  } catch (error) {
    throw unavailable(error);
  }
  if (!session.url) throw new CardPaymentsUnavailableError("card payments are briefly unavailable: Stripe answered a Checkout Session without a URL");
  return { kind: "checkout", processorRef: session.id, checkoutUrl: session.url, expiresAt: session.expires_at ? session.expires_at * 1000 : null };
}

/** A Checkout Session (mode subscription) for a plan: the plan's price every 30 days, the account and plan in the subscription's metadata. */
export async function startSubscriptionCheckout(
  stripe: Stripe,
  config: StripeConfig,
  accountId: string,
  planName: string,
  plan: { price: number | string },
  context: TopupContext,
): Promise<{ processorRef: string; checkoutUrl: string }> {
  const ids = { account_id: accountId, plan: planName };
  let session: Stripe.Checkout.Session;
  try {
    session = await stripe.checkout.sessions.create({
      mode: "subscription",
      line_items: [
        {
          quantity: 1,
          price_data: {
            currency: "usd",
            unit_amount: centsOf(usdToNano(plan.price)),
            recurring: { interval: "day", interval_count: PLAN_CYCLE_DAYS },
            product_data: { name: `Plan ${planName}` },
          },
        },
      ],
      client_reference_id: accountId,
      metadata: ids,
      subscription_data: { metadata: ids },
      ...returnUrls(config, context),
    });
  } catch (error) {
    throw unavailable(error);
  }
  if (!session.url) throw new CardPaymentsUnavailableError("card payments are briefly unavailable: Stripe answered a Checkout Session without a URL");
  return { processorRef: session.id, checkoutUrl: session.url };
}
