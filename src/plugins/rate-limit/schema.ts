import { Type, type Static } from "@sinclair/typebox";

export const DEFAULT_REDIS_KEY_PREFIX = "gateway:rate-limit:";

/** The `rate-limit` block of plugins-config.yaml. */
export const rateLimitConfigSchema = Type.Object(
  {
    /** Empty: windows are counted in this process. `redis://…` or `rediss://…`: shared by every instance. */
    redis_url: Type.String({ default: "", pattern: "^(|rediss?://.+)$" }),
    /** Prefix of every Redis key (one hash per API key); lets deployments share one Redis. */
    redis_key_prefix: Type.String({ default: DEFAULT_REDIS_KEY_PREFIX, minLength: 1 }),
    /** A Redis command slower than this fails the request with 503 (fail closed), never hangs it. */
    redis_command_timeout_ms: Type.Integer({ minimum: 1, maximum: 60_000, default: 500 }),
    /**
     * With Redis, or several workers without it (the primary keeps the count): how long a local lease of a key's
     * requests (and tokens) lives. A key whose limits drain at least 2 requests in this time takes that many from the
     * shared count in one admission and admits them here without a round trip (leases.ts); unused ones are given
     * back when it ends. 0 = off (every request goes to the shared count).
     */
    lease_ms: Type.Integer({ minimum: 0, maximum: 10_000, default: 250 }),
    /** Caps per key of accounts that never had a paid top-up (card, usdt); 0 = no cap. */
    promotional: Type.Object(
      {
        requests_per_minute: Type.Integer({ minimum: 0, default: 10 }),
        tokens_per_minute: Type.Integer({ minimum: 0, default: 50_000 }),
      },
      { default: {}, additionalProperties: false },
    ),
    /** How long an account's promotional status is cached; a paid top-up lifts the caps within this time. */
    promotional_cache_ms: Type.Integer({ minimum: 0, maximum: 1_000, default: 1_000 }),
  },
  { additionalProperties: false },
);

export type RateLimitConfig = Static<typeof rateLimitConfigSchema>;
