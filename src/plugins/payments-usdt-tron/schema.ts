import { Type, type Static } from "@sinclair/typebox";

/** The payments-usdt-tron plugin's configuration (plugins-config.yaml `payments-usdt-tron.config`). */
export const UsdtTronConfig = Type.Object({
  /** The receiving address (base58, `T…`) the gateway watches; it never holds its key. Empty: USDT top-ups are off. */
  address: Type.String({ default: "" }),
  /** A TronGrid-compatible API (its `/v1/accounts/:address/transactions/trc20`). */
  api_url: Type.String({ minLength: 1, default: "https://api.trongrid.io" }),
  /** TronGrid's `TRON-PRO-API-KEY`; empty: anonymous calls (rate-limited by TronGrid). A secret: masked in logs. */
  api_key: Type.String({ default: "" }),
  /** How often the address is polled for confirmed transfers. */
  poll_ms: Type.Integer({ minimum: 1_000, default: 15_000 }),
  /** A USDT top-up's exact amount is reserved this long; a transfer after it is not credited automatically. */
  invoice_minutes: Type.Integer({ minimum: 5, maximum: 7 * 24 * 60, default: 60 }),
});

export type UsdtTronConfig = Static<typeof UsdtTronConfig>;

/** A TRON address in base58 (what TronGrid answers in `from` / `to`): "T" and 33 base58 characters. */
export const TRON_ADDRESS = /^T[1-9A-HJ-NP-Za-km-z]{33}$/;

/** What the schema cannot say: the address's form and the API's URL. */
export function checkUsdtTronConfig(config: UsdtTronConfig): string | undefined {
  if (config.address !== "" && !TRON_ADDRESS.test(config.address)) {
    return `/address: "${config.address.slice(0, 60)}" is not a TRON base58 address (T followed by 33 base58 characters)`;
  }
  let url: URL;
  try {
    url = new URL(config.api_url);
  } catch {
    return `/api_url: "${config.api_url.slice(0, 100)}" is not a URL`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return `/api_url: must be http:// or https://`;
  return undefined;
}
