import { afterEach, describe, expect, it } from "bun:test";
import { join } from "node:path";
import { createFetchTransport } from "../../src/transport/fetch.ts";
import { OriginLimiter, originOf } from "../../src/transport/origin-limiter.ts";
import { jsonHeaders, type UpstreamResponse } from "../../src/transport/index.ts";
import { RequestSignal } from "../../src/core/request-signals.ts";
import { UpstreamTimeoutError } from "../../src/core/errors.ts";
import { waitFor } from "../helpers/processes.ts";
import { startRawUpstream } from "./raw-upstream.ts";

const headers = jsonHeaders({});
const stops: (() => void)[] = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

/**
 * An upstream whose every answer is a stream the test ends: `arrived` counts the requests it received, and
 * `finish(i)` ends the i-th answer's body.
 */
function heldUpstream() {
  const controllers: ReadableStreamDefaultController<Uint8Array>[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch() {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controllers.push(controller);
          controller.enqueue(new TextEncoder().encode("data: {}\n\n"));
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    },
  });
  stops.push(() => server.stop(true));
  return {
    url: server.url.href,
    get arrived() {
      return controllers.length;
    },
    finish: (i: number) => controllers[i]!.close(),
  };
}

async function readToEnd(response: UpstreamResponse): Promise<void> {
  const reader = response.body!.getReader();
  while (!(await reader.read()).done);
}

/** `n` calls to `url`, started together. */
function calls(transport: ReturnType<typeof createFetchTransport>, url: string, n: number, signal = () => new RequestSignal()) {
  return Array.from({ length: n }, () => transport({ url, headers, body: {}, signal: signal() }));
}

/** Gives a call that should stay queued the time to (wrongly) reach the upstream. */
const settle = () => Bun.sleep(60);

describe("transport/origin-limiter", () => {
  it("holds at most the cap of calls in flight per origin; the next goes out once a body is read to the end", async () => {
    const upstream = heldUpstream();
    const transport = createFetchTransport({ maxConnectionsPerOrigin: 2 });
    const [first, second, third] = calls(transport, upstream.url, 3);
    await waitFor(() => upstream.arrived === 2, 2_000, "two calls at the upstream");
    await settle();
    expect(upstream.arrived).toBe(2);
    const answered = await first!;
    const read = readToEnd(answered);
    upstream.finish(0);
    await read;
    await waitFor(() => upstream.arrived === 3, 2_000, "the third call at the upstream");
    upstream.finish(1);
    upstream.finish(2);
    await Promise.all([second!.then(readToEnd), third!.then(readToEnd)]);
  });

  it("gives the slot back when a body is cancelled", async () => {
    const upstream = heldUpstream();
    const transport = createFetchTransport({ maxConnectionsPerOrigin: 1 });
    const [first, second] = calls(transport, upstream.url, 2);
    const reader = (await first!).body!.getReader();
    await reader.read();
    await settle();
    expect(upstream.arrived).toBe(1);
    await reader.cancel();
    await waitFor(() => upstream.arrived === 2, 2_000, "the second call at the upstream");
    upstream.finish(1);
    await readToEnd(await second!);
  });

  it("gives the slot back when a body fails (the connection reset in the middle of it)", async () => {
    const upstream = await startRawUpstream((socket, _request, nth) => {
      if (nth > 1) return void socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}');
      socket.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"par");
      setTimeout(() => socket.resetAndDestroy(), 20);
    });
    stops.push(() => upstream.stop());
    const transport = createFetchTransport({ maxConnectionsPerOrigin: 1 });
    const [first, second] = calls(transport, upstream.url + "/", 2);
    const reader = (await first!).body!.getReader(); // held to the end: the slot comes back by the failure, not by GC
    const read = async () => {
      while (!(await reader.read()).done);
    };
    expect(await read().then(() => "read", () => "failed")).toBe("failed");
    expect((await second!).status).toBe(200);
    expect(upstream.requests.length).toBe(2);
    expect(reader).toBeDefined();
  });

  it("gives the slot back when an answer is read as text, an error answer included", async () => {
    const upstream = await startRawUpstream((socket) => void socket.write('HTTP/1.1 429 Too Many Requests\r\ncontent-length: 9\r\n\r\n{"e":429}'));
    stops.push(() => upstream.stop());
    const transport = createFetchTransport({ maxConnectionsPerOrigin: 1 });
    for (const call of calls(transport, upstream.url + "/", 3)) {
      const response = await call;
      expect(`${response.status} ${await response.text()}`).toBe('429 {"e":429}');
    }
  });

  it("drops a waiting call whose request's signal fires: a deadline reads as a timeout, and it never goes out", async () => {
    const upstream = heldUpstream();
    const transport = createFetchTransport({ maxConnectionsPerOrigin: 1 });
    const [first] = calls(transport, upstream.url, 1);
    await waitFor(() => upstream.arrived === 1, 2_000, "the first call at the upstream");
    const late = new RequestSignal();
    const gone = new RequestSignal();
    const [timedOut] = calls(transport, upstream.url, 1, () => late);
    const [left] = calls(transport, upstream.url, 1, () => gone);
    late.abort(new DOMException("past its deadline", "TimeoutError"));
    gone.abort(new DOMException("the client went away", "AbortError"));
    expect(await timedOut!.catch((error: unknown) => error)).toBeInstanceOf(UpstreamTimeoutError);
    expect(((await left!.catch((error: unknown) => error)) as Error).name).toBe("AbortError");
    const [next] = calls(transport, upstream.url, 1);
    upstream.finish(0);
    await readToEnd(await first!);
    await waitFor(() => upstream.arrived === 2, 2_000, "the next call at the upstream");
    await settle();
    expect(upstream.arrived).toBe(2); // the two dropped calls never went out
    upstream.finish(1);
    await readToEnd(await next!);
  });

  it("counts each origin apart: a full origin holds no other back", async () => {
    const a = heldUpstream();
    const b = heldUpstream();
    const transport = createFetchTransport({ maxConnectionsPerOrigin: 1 });
    const [onA] = calls(transport, a.url, 1);
    await waitFor(() => a.arrived === 1, 2_000, "the call at upstream a");
    const [onB] = calls(transport, b.url, 1);
    await waitFor(() => b.arrived === 1, 2_000, "the call at upstream b");
    a.finish(0);
    b.finish(0);
    await Promise.all([onA!.then(readToEnd), onB!.then(readToEnd)]);
  });

  it("gives the slot of an answer dropped unread back once the answer is collected", async () => {
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "dropped-answer.child.ts")], { stdout: "pipe", stderr: "pipe" });
    const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
    expect(`${out}${err}`.trim()).toBe("arrived: 2");
    expect(code).toBe(0);
  }, 15_000);

  it("keys origins by scheme, host and port", () => {
    expect(originOf("https://api.example.com/v1/chat/completions")).toBe("https://api.example.com");
    expect(originOf("http://127.0.0.1:8080/v1")).toBe("http://127.0.0.1:8080");
    expect(originOf("https://api.example.com")).toBe("https://api.example.com");
    const limiter = new OriginLimiter(1);
    expect(limiter.tryAcquire("https://a")).toBeDefined();
    expect(limiter.tryAcquire("https://a")).toBeUndefined();
    expect(limiter.tryAcquire("https://a:8443")).toBeDefined();
    expect(() => new OriginLimiter(0)).toThrow(RangeError);
  });
});
