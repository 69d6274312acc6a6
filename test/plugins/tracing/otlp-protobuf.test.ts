import { describe, expect, it } from "bun:test";
import { SpanKind, trace, ROOT_CONTEXT } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { createProtobufTraceSerializer, OtlpProtobufEncoder } from "../../../src/plugins/tracing/otlp-protobuf.ts";
import { makeSpans } from "./spans-fixture.ts";
import { protobufFields } from "./protobuf-walk.ts";

/**
 * Our OTLP protobuf encoder writes what the official ProtobufTraceSerializer writes, byte for byte (the same fields
 * in the same order), for spans the real SDK made in our shapes; what it does not encode goes to the official one.
 */

const hex = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString("hex");

function expectSameBytes(spans: ReadableSpan[]): Uint8Array {
  const official = ProtobufTraceSerializer.serializeRequest(spans)!;
  const ours = new OtlpProtobufEncoder().encode(spans);
  expect(ours).toBeDefined();
  expect(hex(ours)).toBe(hex(official));
  return ours!;
}

const fields = protobufFields;

describe("OTLP protobuf encoder", () => {
  it("writes the official serializer's bytes for our request and attempt spans (remote parent, tracestate, every scalar type)", () => {
    const { spans } = makeSpans(3);
    expect(spans.length).toBe(6);
    expect(spans.some((span) => span.parentSpanContext?.isRemote && span.spanContext().traceState)).toBe(true);
    const bytes = expectSameBytes(spans);

    // And the message is the one expected: one resource, one scope, six spans with their attributes.
    const [resourceSpans, ...rest] = fields(bytes);
    expect(rest).toEqual([]);
    const inner = fields(resourceSpans!.value as Uint8Array);
    expect(inner.map((f) => f.field)).toEqual([1, 2]);
    const scopeSpans = fields(inner[1]!.value as Uint8Array);
    expect(new TextDecoder().decode(fields(scopeSpans[0]!.value as Uint8Array)[0]!.value as Uint8Array)).toBe("ai-gateway");
    const encodedSpans = scopeSpans.filter((f) => f.field === 2).map((f) => fields(f.value as Uint8Array));
    expect(encodedSpans.length).toBe(6);
    const server = encodedSpans.find((span) => span.find((f) => f.field === 6)!.value === SpanKind.SERVER + 1)!;
    expect(hex(server.find((f) => f.field === 1)!.value as Uint8Array)).toBe(spans.find((s) => s.kind === SpanKind.SERVER)!.spanContext().traceId);
    expect(new TextDecoder().decode(server.find((f) => f.field === 3)!.value as Uint8Array)).toBe("vendor=opaque,other=x1");
    expect(server.filter((f) => f.field === 9).length).toBe(Object.keys(spans.find((s) => s.kind === SpanKind.SERVER)!.attributes).length);
  });

  it("writes the same bytes for error statuses with a message, a non-ASCII attribute and status message", () => {
    expectSameBytes(makeSpans(2, { error: true }).spans);
    expectSameBytes(makeSpans(2, { error: true, unicode: true }).spans);
  });

  it("writes the same bytes for a batch of 512 spans (lengths past two varint bytes), reusing its buffer between batches", () => {
    const { spans } = makeSpans(256);
    const encoder = new OtlpProtobufEncoder();
    const first = encoder.encode(spans)!;
    const kept = hex(first);
    const second = encoder.encode(spans.slice(0, 10))!;
    expect(hex(second)).toBe(hex(ProtobufTraceSerializer.serializeRequest(spans.slice(0, 10))));
    // The first batch's bytes are its own: the next batch did not write over them.
    expect(hex(first)).toBe(kept);
    expect(kept).toBe(hex(ProtobufTraceSerializer.serializeRequest(spans)));
  });

  it("groups spans by resource and by scope as the official serializer does", () => {
    const exporter = new InMemorySpanExporter();
    const make = (service: string) =>
      new BasicTracerProvider({ resource: resourceFromAttributes({ "service.name": service, answer: 42 }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const a = make("a");
    const b = make("b");
    for (const [provider, scope] of [
      [a, "one"],
      [b, "one"],
      [a, "two"],
      [a, "one"],
    ] as const) {
      const tracer = provider.getTracer(scope, "1.2.3");
      // Short spans (a length of one byte), a long attribute (two), a very long one (a span past 16 KiB: three).
      const span = tracer.startSpan("s", { kind: SpanKind.INTERNAL, attributes: { n: 1.5, big: 2 ** 60, s: "x".repeat(300), huge: "y".repeat(scope === "two" ? 20_000 : 1) } });
      tracer.startSpan("child", {}, trace.setSpan(ROOT_CONTEXT, span)).end();
      span.end();
    }
    expectSameBytes(exporter.getFinishedSpans());
  });

  it("leaves a batch with an event, a link, or an array attribute to the official serializer", () => {
    for (const mutate of ["event", "link", "array"] as const) {
      const { spans: made, provider, exporter } = makeSpans(2);
      const spans = [...made];
      const tracer = provider.getTracer("ai-gateway");
      const other = tracer.startSpan("other");
      if (mutate === "event") other.addEvent("retry", { attempt: 2 });
      if (mutate === "link") other.addLink({ context: spans[0]!.spanContext() });
      if (mutate === "array") other.setAttribute("list", ["a", "b"]);
      other.end();
      const all = exporter.getFinishedSpans();
      expect(all.length).toBe(spans.length + 1);
      expect(new OtlpProtobufEncoder().encode(spans)).toBeDefined();
      expect(new OtlpProtobufEncoder().encode(all)).toBeUndefined();
      const serializer = createProtobufTraceSerializer();
      expect(hex(serializer.serializeRequest(all))).toBe(hex(ProtobufTraceSerializer.serializeRequest(all)));
    }
  });

  it("delegates the response to the official deserializer", () => {
    const serializer = createProtobufTraceSerializer();
    expect(serializer.deserializeResponse(new Uint8Array(0))).toEqual(ProtobufTraceSerializer.deserializeResponse(new Uint8Array(0)));
  });
});
