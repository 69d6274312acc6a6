import { Type, type Static } from "@sinclair/typebox";

/** The Stripe processor's config (plugins-config.yaml `payments-stripe`, from the STRIPE_* variables). */
export const StripeConfigSchema = Type.Object({
  /** STRIPE_SECRET_KEY (sk_live_… / sk_test_… / a restricted rk_…). Empty: the plugin does nothing. */
  secret_key: Type.String({ default: "" }),
  /** STRIPE_WEBHOOK_SECRET (whsec_…): the signing secret of the webhook endpoint /webhooks/stripe. */
  webhook_secret: Type.String({ default: "" }),
  /** STRIPE_SUCCESS_URL: where Checkout sends the payer after paying; empty: <origin>/dashboard/billing. */
  success_url: Type.String({ default: "" }),
  /** STRIPE_CANCEL_URL: where Checkout sends a payer who goes back; empty: <origin>/dashboard/billing. */
  cancel_url: Type.String({ default: "" }),
  /** STRIPE_API_BASE: another API base (tests: a fake, http://127.0.0.1:PORT); empty: https://api.stripe.com. */
  api_base: Type.String({ default: "" }),
});
export type StripeConfig = Static<typeof StripeConfigSchema>;

/** The rules the schema cannot say: a webhook secret with the key (else payments are taken and never credited), URLs that parse. */
export function checkStripeConfig(config: StripeConfig): string | undefined {
  if (config.secret_key === "") return undefined;
  if (config.webhook_secret === "") return "/webhook_secret: STRIPE_WEBHOOK_SECRET must be set when STRIPE_SECRET_KEY is (without it no payment is ever credited)";
  for (const field of ["success_url", "cancel_url", "api_base"] as const) {
    const value = config[field];
    if (value === "") continue;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return `/${field}: not a URL: "${value}"`;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return `/${field}: must be an http(s) URL, got "${value}"`;
  }
  return undefined;
}
