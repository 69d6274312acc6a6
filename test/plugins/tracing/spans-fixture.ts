import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";

/**
 * Spans made by the real SDK, shaped like the tracing plugin's (spans.ts): a SERVER request span continuing a remote
 * parent (with a tracestate) and about twenty attributes of every scalar type, and its CLIENT attempt span.
 */
export function makeSpans(requests: number, options: { error?: boolean; unicode?: boolean } = {}): { spans: ReadableSpan[]; provider: BasicTracerProvider; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ "deployment.environment.name": "bench", "service.name": "ai-gateway" })),
    sampler: new AlwaysOnSampler(),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("ai-gateway");
  const propagator = new W3CTraceContextPropagator();
  for (let i = 0; i < requests; i++) {
    const headers: Record<string, string> = {
      traceparent: `00-${(0x1000 + i).toString(16).padStart(32, "a")}-${(0x77 + i).toString(16).padStart(16, "b")}-01`,
      tracestate: "vendor=opaque,other=x1",
    };
    const parent = propagator.extract(ROOT_CONTEXT, headers, { keys: (c) => Object.keys(c), get: (c, k) => c[k] });
    const requestId = `req_${i.toString(36).padStart(24, "0")}`;
    const span = tracer.startSpan(
      "chat",
      { kind: SpanKind.SERVER, attributes: { "gen_ai.operation.name": "chat", "gateway.request_id": requestId, "gateway.ingress": "openai-chat" } },
      parent,
    );
    const attempt: Attributes = {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gateway.provider": "openai",
      "gateway.deployment": "openai-main",
      "gen_ai.request.model": "gpt-6-luna",
    };
    const child = tracer.startSpan("chat gpt-6-luna", { kind: SpanKind.CLIENT, attributes: attempt }, trace.setSpan(ROOT_CONTEXT, span));
    child.setAttribute("http.response.status_code", options.error ? 502 : 200);
    if (options.error) {
      child.setAttribute("error.type", "upstream_5xx");
      child.setStatus({ code: SpanStatusCode.ERROR });
    }
    child.end();
    const attributes: Attributes = {
      "gen_ai.request.model": options.unicode ? "modèle-ü" : "gpt-6-luna",
      "gen_ai.request.stream": i % 2 === 0,
      "gen_ai.request.max_tokens": 1024,
      "gen_ai.provider.name": "openai",
      "gateway.provider": "openai",
      "gen_ai.response.model": "gpt-6-luna",
      "gen_ai.response.id": `chatcmpl-${requestId}`,
      "gen_ai.response.time_to_first_chunk": 0.012345 + i / 1e6,
      "gen_ai.usage.input_tokens": 1200 + i,
      "gen_ai.usage.output_tokens": 300,
      "gen_ai.usage.cache_read.input_tokens": 1000,
      "gen_ai.usage.cache_creation.input_tokens": 2 ** 40 + i,
      "gen_ai.usage.reasoning.output_tokens": 0,
      "gateway.cost_usd": 0.000123 * (i + 1),
      "gateway.negative": -5 - i,
      "gateway.big_negative": -(2 ** 40),
      "gateway.flag": false,
    };
    if (options.error) {
      attributes["error.type"] = "upstream_error";
      attributes["http.response.status_code"] = 502;
      span.setStatus({ code: SpanStatusCode.ERROR, message: options.unicode ? "échec" : "upstream failed" });
    } else {
      attributes["http.response.status_code"] = 200;
    }
    span.setAttributes(attributes);
    span.updateName("chat gpt-6-luna");
    span.end();
  }
  return { spans: exporter.getFinishedSpans(), provider, exporter };
}
