/**
 * Microbenchmark: encode batches of 512 of our spans (256 requests' request and attempt spans) with the official
 * ProtobufTraceSerializer and with ours; µs per span.   npx bun test/plugins/tracing/bench-encode.ts
 */
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { createProtobufTraceSerializer } from "../../../src/plugins/tracing/otlp-protobuf.ts";
import { makeSpans } from "./spans-fixture.ts";

const { spans } = makeSpans(256, { error: false });
const ours = createProtobufTraceSerializer();
const candidates = { official: ProtobufTraceSerializer, ours } as const;

function time(serialize: (s: typeof spans) => Uint8Array | undefined, iterations: number): number {
  const start = performance.now();
  let bytes = 0;
  for (let i = 0; i < iterations; i++) bytes += serialize(spans)!.length;
  if (bytes === 0) throw new Error("nothing encoded");
  return ((performance.now() - start) * 1000) / (iterations * spans.length);
}

for (const [name, serializer] of Object.entries(candidates)) time((s) => serializer.serializeRequest(s), 200); // warm-up
for (let round = 0; round < 3; round++) {
  const line = Object.entries(candidates).map(([name, serializer]) => `${name} ${time((s) => serializer.serializeRequest(s), 400).toFixed(3)} µs/span`);
  console.log(`round ${round + 1}: ${line.join(", ")}  (${spans.length} spans, ${ours.serializeRequest(spans)!.length} bytes)`);
}
