import { Type, type Static } from "@sinclair/typebox";

/** The dashboard plugin's configuration (plugins-config.yaml `dashboard.config`). */
export const DashboardConfig = Type.Object({
  /** Self-service sign-up: anyone may create an account (zero balance) and its owner. Off: operators create users. */
  signup: Type.Boolean({ default: false }),
  /** A session lasts this long from sign-in, then signs in again. */
  session_hours: Type.Integer({ minimum: 1, maximum: 24 * 90, default: 24 * 7 }),
  /** `auto`: the cookie is Secure when the request came over https (or a proxy said so in X-Forwarded-Proto). */
  secure_cookie: Type.Union([Type.Literal("auto"), Type.Literal("always"), Type.Literal("never")], { default: "auto" }),
  /** Sign-in attempts allowed per 15 minutes: from one client address, and failed ones for one email. */
  sign_in_limits: Type.Object(
    {
      per_ip: Type.Integer({ minimum: 1, default: 30 }),
      failures_per_email: Type.Integer({ minimum: 1, default: 5 }),
    },
    { default: {} },
  ),
  /** The one-off live route proof: a fixed prompt through a model the account picks, paid by the house. */
  route_proof: Type.Object(
    {
      prompt: Type.String({ minLength: 1, default: "Reply with one short sentence that names the model you are." }),
      max_tokens: Type.Integer({ minimum: 1, maximum: 4096, default: 64 }),
      /** The models offered; empty: every chat model of the catalog. */
      models: Type.Array(Type.String(), { default: [] }),
      /** Proofs per hour, all accounts together, per instance: the most the house spends on them. */
      per_hour: Type.Integer({ minimum: 1, default: 60 }),
      /** The house account is topped up to this much before a proof (its ledger shows what proofs cost). */
      house_float_usd: Type.Number({ exclusiveMinimum: 0, maximum: 100, default: 0.05 }),
    },
    { default: {} },
  ),
});

export type DashboardConfig = Static<typeof DashboardConfig>;
