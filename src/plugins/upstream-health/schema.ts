import { Type, type Static } from "@sinclair/typebox";

export const DEFAULT_REDIS_KEY_PREFIX = "gateway:upstream-health:";

/** The `upstream-health` block of plugins-config.yaml. */
export const upstreamHealthConfigSchema = Type.Object(
  {
    /** How requests are spread over a provider's healthy deployments. */
    strategy: Type.Union([Type.Literal("priority"), Type.Literal("round_robin"), Type.Literal("least_in_flight"), Type.Literal("weighted")], {
      default: "priority",
    }),
    breaker: Type.Object(
      {
        /** Failures (connection, timeout, 5xx, overloaded, auth) that open a deployment's breaker. */
        failures: Type.Integer({ minimum: 1, default: 5 }),
        /** Counted within this window instead of consecutively (a success no longer resets the count). */
        window_ms: Type.Optional(Type.Integer({ minimum: 1 })),
        /** With window_ms: the breaker opens only when failures are also at least this share of the window's attempts. */
        failure_rate: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1 })),
        /** How long an open breaker skips its deployment before one probe request is let through. */
        cooldown_ms: Type.Integer({ minimum: 1, default: 30_000 }),
      },
      { default: {}, additionalProperties: false },
    ),
    /** A Retry-After longer than this is cut to it. */
    max_retry_after_ms: Type.Integer({ minimum: 0, default: 60_000 }),
    /** Empty: health is kept in this process. `redis://…`: breaker transitions and Retry-After waits are shared by every instance. */
    redis_url: Type.String({ default: "", pattern: "^(|rediss?://.+)$" }),
    redis_key_prefix: Type.String({ default: DEFAULT_REDIS_KEY_PREFIX, minLength: 1 }),
  },
  { additionalProperties: false },
);

export type UpstreamHealthConfig = Static<typeof upstreamHealthConfigSchema>;
export type BreakerConfig = UpstreamHealthConfig["breaker"];
export type Strategy = UpstreamHealthConfig["strategy"];
