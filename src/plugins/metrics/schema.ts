import { Type, type Static } from "@sinclair/typebox";

/** The metrics plugin's config (plugins-config.yaml `metrics.config`). */
export const metricsConfigSchema = Type.Object(
  {
    /** When set, GET /metrics answers only `Authorization: Bearer <token>` (401 otherwise). Empty: open. */
    token: Type.String({ default: "" }),
  },
  { additionalProperties: false },
);

export type MetricsConfig = Static<typeof metricsConfigSchema>;
