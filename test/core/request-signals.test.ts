import { describe, expect, it } from "bun:test";
import { RequestSignal, RequestSignals } from "../../src/core/request-signals.ts";

function clientRequest() {
  const client = new AbortController();
  return { client, request: new Request("http://gateway.test/v1/chat/completions", { signal: client.signal }) };
}

describe("request signals", () => {
  it("a request past its deadline is aborted with a TimeoutError", async () => {
    const signals = new RequestSignals(60, { sweepMs: 10 });
    const signal = signals.open(clientRequest().request);
    expect(signal.aborted).toBe(false);
    await Bun.sleep(120);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe("TimeoutError");
    expect(signals.size).toBe(0);
  });

  it("a client that goes away aborts its request's signal, and no other", async () => {
    const signals = new RequestSignals(10_000, { sweepMs: 10 });
    const gone = clientRequest();
    const staying = clientRequest();
    const goneSignal = signals.open(gone.request);
    const stayingSignal = signals.open(staying.request);
    gone.client.abort(new Error("client disconnected"));
    await Bun.sleep(50);
    expect(goneSignal.aborted).toBe(true);
    expect((goneSignal.reason as Error).message).toBe("client disconnected");
    expect(stayingSignal.aborted).toBe(false);
    signals.release(stayingSignal);
    expect(signals.size).toBe(0);
  });

  it("a request in the place of a released one is not aborted by the earlier client going away", async () => {
    const signals = new RequestSignals(10_000, { sweepMs: 10 });
    const earlier = clientRequest();
    signals.release(signals.open(earlier.request));
    const later = signals.open(clientRequest().request);
    earlier.client.abort(new Error("earlier client gone"));
    await Bun.sleep(50);
    expect(later.aborted).toBe(false);
    expect(signals.size).toBe(1);
    signals.release(later);
  });

  it("sees a client of a real server that left before the first look at its request's signal", async () => {
    // The sweep reads `request.signal` only when it looks (Bun makes the signal on first access): a client
    // gone before that must still read as gone.
    const signals = new RequestSignals(10_000, { sweepMs: 100 });
    let opened: RequestSignal | undefined;
    const server = Bun.serve({
      port: 0,
      async fetch(request) {
        opened = signals.open(request);
        await Bun.sleep(400);
        return new Response("late");
      },
    });
    try {
      const client = new AbortController();
      fetch(server.url, { signal: client.signal }).catch(() => {});
      while (!opened) await Bun.sleep(5);
      client.abort();
      await Bun.sleep(250);
      expect(opened.aborted).toBe(true);
      expect(signals.size).toBe(0);
    } finally {
      server.stop(true);
    }
  });

  it("an upstream silent longer than the idle limit after its last touch aborts with a TimeoutError naming the silence", async () => {
    const signals = new RequestSignals(10_000, { idleMs: 60, sweepMs: 10 });
    const signal = signals.open(clientRequest().request);
    await Bun.sleep(100);
    expect(signal.aborted).toBe(false); // no idle clock before the upstream has started answering
    signals.touch(signal);
    for (let i = 0; i < 5; i++) {
      await Bun.sleep(30);
      signals.touch(signal); // a chunk every 30 ms keeps it alive
    }
    expect(signal.aborted).toBe(false);
    await Bun.sleep(120);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe("TimeoutError");
    expect((signal.reason as DOMException).message).toContain("sent nothing for 60 ms");
  });

  it("a released request is no longer aborted by its deadline", async () => {
    const signals = new RequestSignals(40, { sweepMs: 10 });
    const signal = signals.open(clientRequest().request);
    signals.release(signal);
    await Bun.sleep(100);
    expect(signal.aborted).toBe(false);
  });
});

describe("request signal", () => {
  it("calls each listener once when it fires, with its reason set first, and none that was removed", () => {
    const signal = new RequestSignal();
    const heard: string[] = [];
    const removed = () => heard.push("removed");
    signal.addEventListener("abort", () => heard.push(`first: ${(signal.reason as Error).message}`));
    signal.addEventListener("abort", removed);
    signal.addEventListener("abort", () => heard.push("third"));
    signal.removeEventListener("abort", removed);
    signal.abort(new Error("client gone"));
    signal.abort(new Error("again"));
    expect(signal.aborted).toBe(true);
    expect(heard).toEqual(["first: client gone", "third"]);
  });

  it("makes a DOM AbortSignal for fetch that fires with it, or is already aborted", () => {
    const signal = new RequestSignal();
    const dom = signal.toAbortSignal();
    expect(dom.aborted).toBe(false);
    signal.abort(new DOMException("late", "TimeoutError"));
    expect(dom.aborted).toBe(true);
    expect((dom.reason as DOMException).name).toBe("TimeoutError");
    expect(signal.toAbortSignal().aborted).toBe(true);
  });
});
