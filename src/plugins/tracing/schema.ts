import { Type, type Static } from "@sinclair/typebox";

/**
 * The `tracing` block of plugins-config.yaml. Everything else comes from the standard `OTEL_*` variables of the
 * environment the gateway started with (README.md): tracing is on when an OTLP endpoint is set there.
 */
export const tracingConfigSchema = Type.Object(
  {
    /** On shutdown, the queued spans are flushed for at most this long. */
    shutdown_timeout_ms: Type.Integer({ minimum: 0, default: 5_000 }),
  },
  { additionalProperties: false },
);

export type TracingConfig = Static<typeof tracingConfigSchema>;
