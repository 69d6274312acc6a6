/**
 * Run by origin-limiter.test.ts in a fresh process: one answer is dropped unread, then a second call to the same
 * origin (cap 1) must reach the upstream once the garbage collector has taken the first. Exits 0 when it does, 1
 * after 10 s. A child of its own because the test suite's large heap, scanned conservatively, can keep a dropped
 * object alive for a long time.
 */
import { createFetchTransport } from "../../src/transport/fetch.ts";
import { jsonHeaders } from "../../src/transport/index.ts";
import { RequestSignal } from "../../src/core/request-signals.ts";

let arrived = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch() {
    arrived++;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("data: {}\n\n"));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  },
});
const transport = createFetchTransport({ maxConnectionsPerOrigin: 1 });
const call = () => transport({ url: server.url.href, headers: jsonHeaders({}), body: {}, signal: new RequestSignal() });

await (async () => {
  await call(); // answered, then dropped: its body is never read
})();
void call();
const deadline = performance.now() + 10_000;
while (arrived < 2 && performance.now() < deadline) {
  Bun.gc(true);
  await Bun.sleep(20);
}
server.stop(true);
console.log(`arrived: ${arrived}`);
process.exit(arrived === 2 ? 0 : 1);
