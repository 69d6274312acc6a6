import type { Principal } from "../auth/principal.ts";

/** A key's limits as enforced now; null = no limit. The shape of `rate_limit` in GET /v1/key. */
export interface EffectiveLimits {
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
}

/** What the rate-limit plugin offers other plugins (`host.service("rate-limit")`). */
export interface RateLimitService {
  /** The key's own limits combined with the promotional caps of its account (the stricter wins). */
  effectiveLimits(principal: Principal): Promise<EffectiveLimits>;
}

/** What a request was charged at admission, for its settle. */
export interface RateLimitCharge {
  /** The tokens-per-minute limit the request was admitted under. */
  tpm: number;
  /** Tokens charged at admission: the prompt's upper bound. */
  tokens: number;
}

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** Set only when a token limit applied and the request was admitted. Writer: rate-limit. */
    rateLimitCharge?: RateLimitCharge;
  }
}

declare module "../../core/plugin.ts" {
  interface Services {
    "rate-limit": RateLimitService;
  }
}
