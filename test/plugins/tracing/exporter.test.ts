import { describe, expect, it, setDefaultTimeout } from "bun:test";
import { gunzipSync } from "node:zlib";
import { startTestGateway } from "../../helpers/gateway.ts";
import { protobufFieldMap } from "./protobuf-walk.ts";

// Normally a second; the margin is for a loaded machine.
setDefaultTimeout(30_000);

/**
 * The http/protobuf exporter as the gateway builds it (spans.ts), with our encoder as its serializer: over the fetch
 * transport and, with gzip, over node:http; what the collector receives decodes to the request's spans.
 */

const fields = protobufFieldMap;
const text = (value: number | Uint8Array | undefined) => new TextDecoder().decode(value as Uint8Array);

/** The span names and the service.name of an ExportTraceServiceRequest. */
function decode(body: Uint8Array): { service: string | undefined; names: string[] } {
  const names: string[] = [];
  let service: string | undefined;
  for (const resourceSpans of fields(body).get(1) ?? []) {
    const inner = fields(resourceSpans as Uint8Array);
    for (const kv of fields(inner.get(1)![0] as Uint8Array).get(1) ?? []) {
      const pair = fields(kv as Uint8Array);
      if (text(pair.get(1)![0]) === "service.name") service = text(fields(pair.get(2)![0] as Uint8Array).get(1)![0]);
    }
    for (const scopeSpans of inner.get(2) ?? []) {
      for (const span of fields(scopeSpans as Uint8Array).get(2) ?? []) names.push(text(fields(span as Uint8Array).get(5)![0]));
    }
  }
  return { service, names };
}

describe("the http/protobuf exporter with our encoder", () => {
  for (const compression of ["none", "gzip"] as const) {
    it(`delivers the request's spans (compression ${compression})`, async () => {
      const bodies: Uint8Array[] = [];
      const encodings: string[] = [];
      const receiver = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        async fetch(request) {
          encodings.push(request.headers.get("content-encoding") ?? "");
          const body = new Uint8Array(await request.arrayBuffer());
          bodies.push(request.headers.get("content-encoding") === "gzip" ? new Uint8Array(gunzipSync(body)) : body);
          return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
        },
      });
      const t = await startTestGateway({
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}`, OTEL_EXPORTER_OTLP_COMPRESSION: compression, OTEL_SERVICE_NAME: "gw-under-test" },
      });
      try {
        const { key } = await t.newAccountWithKey({ credit: 10 });
        await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] });
      } finally {
        await t.stop();
        receiver.stop(true);
      }
      expect(bodies.length).toBeGreaterThan(0);
      expect(encodings.every((encoding) => encoding === (compression === "gzip" ? "gzip" : ""))).toBe(true);
      const decoded = bodies.map(decode);
      expect(decoded.every((d) => d.service === "gw-under-test")).toBe(true);
      const names = decoded.flatMap((d) => d.names);
      expect(names).toContain("chat gpt-6-luna");
      expect(names.length).toBeGreaterThanOrEqual(2);
    });
  }
});
