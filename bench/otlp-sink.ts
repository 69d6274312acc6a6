/**
 * A tiny OTLP/HTTP receiver for benchmarks: answers 200 to every POST /v1/traces (http/protobuf or http/json) and
 * counts what came, so the tracing plugin can be measured against a collector that costs nothing.
 *
 *   bun bench/otlp-sink.ts --port 4318
 *   → prints "otlp sink listening on http://127.0.0.1:4318"; on SIGINT / SIGTERM, the exports and bytes received
 *   bun bench/compare.ts . .::OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 --rounds 6 --seconds 3
 */
const portArg = process.argv.indexOf("--port");
const port = portArg >= 0 ? Number(process.argv[portArg + 1]) : 4318;

let exportCount = 0;
let bytes = 0;
const EMPTY = new Uint8Array(0);

const server = Bun.serve({
  port,
  hostname: "127.0.0.1",
  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (request.method !== "POST" || path !== "/v1/traces") return new Response("not found", { status: 404 });
    bytes += (await request.arrayBuffer()).byteLength;
    exportCount++;
    // An empty ExportTraceServiceResponse: no partial success to report.
    if ((request.headers.get("content-type") ?? "").includes("json")) return Response.json({});
    return new Response(EMPTY, { headers: { "content-type": "application/x-protobuf" } });
  },
});

console.log(`otlp sink listening on http://127.0.0.1:${server.port}`);

function summary(): void {
  console.log(`otlp sink: ${exportCount} exports, ${(bytes / 1e6).toFixed(1)} MB`);
  server.stop(true);
  process.exit(0);
}
process.on("SIGINT", summary);
process.on("SIGTERM", summary);
