import type { Span } from "@opentelemetry/api";
import { definePlugin } from "../../core/plugin.ts";
import { tracingConfigSchema } from "./schema.ts";
import { readTracingSettings, TracingSettingsError, type TracingSettings } from "./settings.ts";

/** What the plugin offers: the queued spans exported now (tests, an operator's flush before a snapshot). */
export interface TracingService {
  /** Whether spans are exported (an OTLP endpoint is set). */
  readonly enabled: boolean;
  flush(): Promise<void>;
}

declare module "../../core/plugin.ts" {
  interface Services {
    tracing: TracingService;
  }
}

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** The request's span, from onRequestStart to onRequestEnd. Writer: tracing. */
    traceSpan?: Span;
    /** The GenAI operation when it is not the ingress's own (count_tokens). Writer: tracing. */
    traceOperation?: string;
  }
}

/**
 * OpenTelemetry traces (OTLP over HTTP) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set: a
 * SERVER span per request, named by the GenAI convention (`chat {model}`), continuing the client's `traceparent`,
 * ending at the answer's last byte; a CLIENT span per upstream attempt, whose context goes upstream as its
 * `traceparent`. Without an endpoint it registers no hook at all and the SDK is not even loaded.
 */
export default definePlugin({
  name: "tracing",
  configSchema: tracingConfigSchema,
  async setup(config, host) {
    let settings: TracingSettings | undefined;
    try {
      settings = readTracingSettings(host.env);
    } catch (error) {
      if (error instanceof TracingSettingsError) throw new Error(`tracing: ${error.message}`);
      throw error;
    }
    if (!settings) {
      const off: TracingService = { enabled: false, flush: async () => {} };
      return { provides: off };
    }
    // A collector's token (OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer …) is masked like a provider key.
    for (const value of Object.values(settings.headers)) host.secret(value);
    const { createTracing } = await import("./spans.ts");
    return createTracing(settings, config, host);
  },
});
