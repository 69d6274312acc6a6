import { definePlugin } from "../../core/plugin.ts";
import type { PaymentProcessor, SubscriptionSeller } from "../payments/processor.ts";
import { startCheckout, startSubscriptionCheckout } from "./checkout.ts";
import { createStripeClient } from "./client.ts";
import { stripeWebhookDocs } from "./openapi.ts";
import { stripeRecords } from "./records.ts";
import { StripeConfigSchema, checkStripeConfig } from "./schema.ts";
import { createWebhook } from "./webhook.ts";

/**
 * Card top-ups and card-funded plans through Stripe Checkout: the `card` processor of the payments plugin, the
 * subscription seller of the budget's plans, and POST /webhooks/stripe, which credits, flags, expires, takes back
 * and renews, each event once. Off (nothing registered, no route) while STRIPE_SECRET_KEY is empty.
 */
export default definePlugin({
  name: "payments-stripe",
  requires: ["storage", "payments", "budget"],
  configSchema: StripeConfigSchema,
  checkConfig: checkStripeConfig,
  async setup(config, host) {
    if (config.secret_key === "") {
      host.log.info("card payments off: STRIPE_SECRET_KEY is not set");
      return {};
    }
    host.secret(config.secret_key);
    host.secret(config.webhook_secret);
    const store = host.service("storage");
    const payments = host.service("payments");
    const budget = host.service("budget");
    const stripe = await createStripeClient(config);

    const processor: PaymentProcessor = {
      name: "stripe",
      method: "card",
      minimumUsd: 5,
      start: (topup, context) => startCheckout(stripe, config, topup, context),
      records: (since) => stripeRecords(stripe, since),
    };
    const seller: SubscriptionSeller = {
      checkout: (accountId, planName, plan, context) => startSubscriptionCheckout(stripe, config, accountId, planName, plan, context),
    };
    payments.register(processor);
    payments.registerSubscriptions(seller);

    const webhook = createWebhook({
      stripe,
      webhookSecret: config.webhook_secret,
      store,
      payments,
      plans: () => budget.plans,
      log: host.log,
      now: host.now,
    });

    return {
      routes(app) {
        // parse: "none": the signature is over the exact bytes Stripe sent; the handler reads them itself.
        app.post("/webhooks/stripe", ({ request }) => webhook(request), { parse: "none", detail: stripeWebhookDocs });
      },
    };
  },
});
