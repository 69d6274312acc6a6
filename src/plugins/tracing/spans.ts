import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type TextMapGetter } from "@opentelemetry/api";
import { W3CTraceContextPropagator, setGlobalErrorHandler } from "@opentelemetry/core";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter as OTLPJsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base";
import { createLegacyOtlpBrowserExportDelegate } from "@opentelemetry/otlp-exporter-base/browser-http";
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from "@opentelemetry/otlp-exporter-base/node-http";
import { JsonTraceSerializer, TraceExporterMetricsHelper } from "@opentelemetry/otlp-transformer";
import { ATTR_ERROR_TYPE, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import type { PluginHost, PluginInstance } from "../../core/plugin.ts";
import type { GatewayContext, Outcome } from "../../core/context.ts";
import type { Logger } from "../../core/log.ts";
import { nanoToUsd } from "../../core/money.ts";
import type { TracingConfig } from "./schema.ts";
import type { SamplerSetting, TracingSettings } from "./settings.ts";
import type { TracingService } from "./index.ts";
import { createProtobufTraceSerializer } from "./otlp-protobuf.ts";

/**
 * The tracing plugin once an OTLP endpoint is set (loaded only then): the SDK's tracer provider with a batch span
 * processor and the OTLP/HTTP exporter of the configured protocol, and the hooks that make the spans.
 */

/*
 * The GenAI semantic conventions' attribute names (development status): the span conventions
 * https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and the registry
 * https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/, as @opentelemetry/semantic-conventions
 * 1.45.0 names them in its incubating entry (ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS =
 * "gen_ai.usage.cache_read.input_tokens", ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS =
 * "gen_ai.usage.cache_creation.input_tokens", ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, …). Copied here, as that
 * package advises for incubating names (they may move or change in a minor release).
 */
const GEN_AI_OPERATION_NAME = "gen_ai.operation.name";
const GEN_AI_PROVIDER_NAME = "gen_ai.provider.name";
const GEN_AI_REQUEST_MODEL = "gen_ai.request.model";
const GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens";
const GEN_AI_REQUEST_STREAM = "gen_ai.request.stream";
const GEN_AI_RESPONSE_MODEL = "gen_ai.response.model";
const GEN_AI_RESPONSE_ID = "gen_ai.response.id";
/** Seconds from the request to the first chunk of a stream. */
const GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk";
/** Every input token, cache reads and writes included (the convention's rule, and our Usage.inputTokens). */
const GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens";
const GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens";
const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens";
const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens";
const GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens";

/** The gateway's own attributes. Never the key, the account or the prompt. */
const GATEWAY_REQUEST_ID = "gateway.request_id";
const GATEWAY_INGRESS = "gateway.ingress";
const GATEWAY_COST_USD = "gateway.cost_usd";
/** The configured provider name (gen_ai.provider.name is the convention's value for it) and deployment of an attempt. */
const GATEWAY_PROVIDER = "gateway.provider";
const GATEWAY_DEPLOYMENT = "gateway.deployment";

/** The convention's well-known gen_ai.provider.name values for our providers' configured names; others go as configured. */
const PROVIDER_NAMES: Readonly<Record<string, string>> = {
  openai: "openai",
  anthropic: "anthropic",
  gemini: "gcp.gemini",
  deepseek: "deepseek",
  xai: "x_ai",
  mistral: "mistral_ai",
  groq: "groq",
  perplexity: "perplexity",
  cohere: "cohere",
};

/** gen_ai.operation.name by ingress format: the chat formats are `chat`; image generation is multimodal content. */
const OPERATIONS: Readonly<Record<string, string>> = {
  "openai-chat": "chat",
  "anthropic-messages": "chat",
  "openai-responses": "chat",
  "openai-images": "generate_content",
};

const headersGetter: TextMapGetter<Headers> = {
  keys: (carrier) => [...carrier.keys()],
  get: (carrier, key) => carrier.get(key) ?? undefined,
};

/** The hooks, the flush service and the bounded shutdown of a gateway whose requests are traced. */
export function createTracing(settings: TracingSettings, config: TracingConfig, host: PluginHost): PluginInstance<TracingService> {
  const processor = new BatchSpanProcessor(createExporter(settings), settings.batch);
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ ...settings.resourceAttributes, [ATTR_SERVICE_NAME]: settings.serviceName })),
    sampler: createSampler(settings.sampler),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer("ai-gateway");
  const propagator = new W3CTraceContextPropagator();
  reportExportErrors(host.log);
  host.log.info("tracing", { endpoint: settings.url, protocol: settings.protocol, service: settings.serviceName, sampler: settings.sampler.kind });

  return {
    provides: { enabled: true, flush: () => provider.forceFlush() },

    onRequestStart(ctx) {
      // A malformed traceparent is ignored by the propagator: the request starts a new trace.
      const parent = ctx.headers.has("traceparent") ? propagator.extract(ROOT_CONTEXT, ctx.headers, headersGetter) : ROOT_CONTEXT;
      const operation = OPERATIONS[ctx.ingress.name] ?? "chat";
      const span = tracer.startSpan(
        operation,
        { kind: SpanKind.SERVER, attributes: { [GEN_AI_OPERATION_NAME]: operation, [GATEWAY_REQUEST_ID]: ctx.requestId, [GATEWAY_INGRESS]: ctx.ingress.name } },
        parent,
      );
      ctx.traceSpan = span;
      ctx.log.trace_id = span.spanContext().traceId;
    },

    onLocalRequest(ctx) {
      // The only request the gateway answers itself (Gateway.answerLocally) is Messages' count_tokens.
      ctx.traceOperation = "count_tokens";
    },

    onUpstreamAttempt(ctx, attempt) {
      const parent = ctx.traceSpan;
      if (!parent) return undefined;
      const operation = OPERATIONS[ctx.ingress.name] ?? "chat";
      const upstreamModel = ctx.target?.upstreamModel;
      const attributes: Attributes = {
        [GEN_AI_OPERATION_NAME]: operation,
        [GEN_AI_PROVIDER_NAME]: PROVIDER_NAMES[attempt.provider] ?? attempt.provider,
        [GATEWAY_PROVIDER]: attempt.provider,
        [GATEWAY_DEPLOYMENT]: attempt.deployment,
      };
      if (upstreamModel) attributes[GEN_AI_REQUEST_MODEL] = upstreamModel;
      const name = upstreamModel ? `${operation} ${upstreamModel}` : `upstream ${attempt.deployment}`;
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, trace.setSpan(ROOT_CONTEXT, parent));
      const context = span.spanContext();
      // What the W3C propagator's inject writes, without its context objects: this attempt's span is the upstream's parent.
      const headers: Record<string, string> = { traceparent: `00-${context.traceId}-${context.spanId}-0${context.traceFlags & 1}` };
      const state = context.traceState?.serialize();
      if (state) headers.tracestate = state;
      return {
        headers,
        end(record) {
          if (record === null) {
            // Ended for a reason not the deployment's (the client left): no record, no error of the upstream's.
            span.setAttribute(ATTR_ERROR_TYPE, "cancelled");
          } else {
            if (record.status !== null) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, record.status);
            if (record.error_class !== null) {
              span.setAttribute(ATTR_ERROR_TYPE, record.error_class);
              span.setStatus({ code: SpanStatusCode.ERROR });
            }
          }
          span.end();
        },
      };
    },

    onRequestEnd(ctx, outcome) {
      const span = ctx.traceSpan;
      if (!span) return;
      ctx.traceSpan = undefined;
      endRequestSpan(span, ctx, outcome);
    },

    async close() {
      // Bounded: an unreachable collector must not hold the shutdown.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, config.shutdown_timeout_ms)));
      try {
        await Promise.race([provider.shutdown().catch((error) => host.log.warn("tracing: flush on shutdown failed", { error: String(error) })), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** The request span's GenAI attributes, its outcome, its final name (`{operation} {model}`), and its end. */
function endRequestSpan(span: Span, ctx: GatewayContext, outcome: Outcome): void {
  const operation = ctx.traceOperation ?? OPERATIONS[ctx.ingress.name] ?? "chat";
  const attributes: Attributes = {};
  if (ctx.traceOperation) attributes[GEN_AI_OPERATION_NAME] = operation;
  const requested = ctx.requestedModel ?? ctx.request.model;
  if (requested) {
    // The body was decoded: what the client asked for.
    attributes[GEN_AI_REQUEST_MODEL] = requested;
    attributes[GEN_AI_REQUEST_STREAM] = ctx.request.stream;
    if (ctx.request.maxOutputTokens !== undefined) attributes[GEN_AI_REQUEST_MAX_TOKENS] = ctx.request.maxOutputTokens;
  }
  const target = ctx.target;
  if (target) {
    attributes[GEN_AI_PROVIDER_NAME] = PROVIDER_NAMES[target.provider] ?? target.provider;
    attributes[GATEWAY_PROVIDER] = target.provider;
  }
  const answered = ctx.attempts.at(-1);
  if (answered && answered.status !== null && answered.status >= 200 && answered.status < 300) {
    // The model that answered: its catalog id (a fallback's when one answered), else the upstream's name for it.
    const served = ctx.model?.id ?? target?.upstreamModel;
    if (served) attributes[GEN_AI_RESPONSE_MODEL] = served;
    attributes[GEN_AI_RESPONSE_ID] = ctx.responseId ?? ctx.requestId;
    if (ctx.request.stream && ctx.firstTokenMono !== undefined) attributes[GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (ctx.firstTokenMono - ctx.startedMono) / 1000;
  }
  const usage = ctx.usage;
  if (usage) {
    attributes[GEN_AI_USAGE_INPUT_TOKENS] = usage.inputTokens;
    attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = usage.outputTokens;
    if (usage.cacheReadTokens > 0) attributes[GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cacheReadTokens;
    if (usage.cacheWriteTokens > 0) attributes[GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cacheWriteTokens;
    if (usage.reasoningTokens > 0) attributes[GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoningTokens;
  }
  if (ctx.cost !== undefined) attributes[GATEWAY_COST_USD] = nanoToUsd(ctx.cost);
  if (outcome.status === "failed") {
    attributes[ATTR_ERROR_TYPE] = outcome.error.code;
    attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = outcome.error.status;
    // Not the message: an upstream's may quote the request.
    span.setStatus({ code: SpanStatusCode.ERROR });
  } else if (outcome.status === "cancelled") {
    // The client left: not the gateway's failure (the status stays unset), but not a success either.
    attributes[ATTR_ERROR_TYPE] = "cancelled";
    attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = 499;
  } else {
    attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = 200;
  }
  span.setAttributes(attributes);
  if (requested) span.updateName(`${operation} ${requested}`);
  else if (ctx.traceOperation) span.updateName(operation);
  span.end();
}

/**
 * The SDK's OTLP/HTTP exporter of the protocol, every setting from the gateway's environment passed explicitly. Sent
 * with `fetch` (the SDK's fetch transport, with its retries and timeout: what its browser exporters use) rather than
 * its node:http transport, which costs Bun's JS thread about 6 µs more per request (measured: bench/compare.ts). The
 * fetch transport does not compress: with OTEL_EXPORTER_OTLP_COMPRESSION=gzip, the node:http transport (what the SDK's
 * node exporters use). http/protobuf is encoded by our lean serializer (otlp-protobuf.ts: the official one's bytes at
 * about a quarter of its cost, falling back to it for what ours does not encode); http/json by the official one.
 */
function createExporter(settings: TracingSettings): SpanExporter {
  const options = {
    url: settings.url,
    headers: settings.headers,
    ...(settings.timeoutMillis === undefined ? {} : { timeoutMillis: settings.timeoutMillis }),
  };
  const json = settings.protocol === "http/json";
  const serializer = json ? JsonTraceSerializer : createProtobufTraceSerializer();
  const contentType = { "Content-Type": json ? "application/json" : "application/x-protobuf" };
  if (settings.compression === "gzip") {
    // What OTLPTraceExporter of exporter-trace-otlp-http / -proto builds for node, with our serializer.
    const delegate = createOtlpHttpExportDelegate(
      convertLegacyHttpOptions({ ...options, compression: "gzip" as never }, "TRACES", "v1/traces", contentType),
      serializer,
      "otlp_http_span_exporter",
      TraceExporterMetricsHelper,
      undefined,
    );
    return new OTLPExporterBase(delegate);
  }
  const delegate = createLegacyOtlpBrowserExportDelegate(
    options,
    serializer,
    "otlp_http_span_exporter",
    TraceExporterMetricsHelper,
    undefined,
    "v1/traces",
    contentType,
  );
  return new OTLPExporterBase(delegate);
}

function createSampler(setting: SamplerSetting): Sampler {
  switch (setting.kind) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(setting.ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(setting.ratio) });
  }
}

/** An export that failed (collector down, refused) is a warning in the gateway's log, at most one a minute. */
function reportExportErrors(log: Logger): void {
  let lastMs = -Infinity;
  let dropped = 0;
  setGlobalErrorHandler((error) => {
    const now = performance.now();
    if (now - lastMs < 60_000) {
      dropped++;
      return;
    }
    lastMs = now;
    log.warn("tracing: span export failed", { error: String((error as Error)?.message ?? error), ...(dropped > 0 ? { similar_since_last: dropped } : {}) });
    dropped = 0;
  });
}
