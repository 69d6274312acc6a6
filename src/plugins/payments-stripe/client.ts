import type Stripe from "stripe";
import type { StripeConfig } from "./schema.ts";

/**
 * The official client; `api_base` (tests: a local fake) becomes its host/port/protocol options. The library is
 * loaded here, only when card payments are on (~12 ms and ~10 MB at start otherwise).
 */
export async function createStripeClient(config: Pick<StripeConfig, "secret_key" | "api_base">): Promise<Stripe> {
  const { default: Stripe } = await import("stripe");
  const options: ConstructorParameters<typeof Stripe>[1] = { maxNetworkRetries: 2, timeout: 20_000, telemetry: false };
  if (config.api_base !== "") {
    const base = new URL(config.api_base);
    const protocol = base.protocol === "http:" ? "http" : "https";
    options.host = base.hostname;
    options.port = base.port === "" ? (protocol === "http" ? 80 : 443) : Number(base.port);
    options.protocol = protocol;
  }
  return new Stripe(config.secret_key, options);
}
