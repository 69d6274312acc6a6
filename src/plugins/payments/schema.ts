import { Type, type Static } from "@sinclair/typebox";

/** The payments plugin's config (plugins-config.yaml `payments.config`). */
export const PaymentsConfig = Type.Object({
  /**
   * The gateway's public base URL ("https://gateway.example.com"): where a checkout sends the payer back (the
   * dashboard's Billing page). Empty: the origin of the request that made the top-up.
   */
  public_url: Type.String({ default: "" }),
  /** How long a USDT invoice (its unique amount) waits for the transfer before it expires. */
  usdt_invoice_minutes: Type.Integer({ minimum: 1, maximum: 1440, default: 60 }),
  /** How often pending top-ups past their expiry are expired. */
  expiry_sweep_ms: Type.Integer({ minimum: 1000, default: 60_000 }),
  /** Top-up API calls (POST and GET /v1/credits/topups) per second per key; 0 = off. */
  requests_per_second: Type.Integer({ minimum: 0, default: 10 }),
});

export type PaymentsConfig = Static<typeof PaymentsConfig>;
