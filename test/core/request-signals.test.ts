import { describe, expect, it } from "bun:test";
import { RequestSignals } from "../../src/core/request-signals.ts";

function clientRequest() {
  const client = new AbortController();
  return { client, request: new Request("http://gateway.test/v1/chat/completions", { signal: client.signal }) };
}

describe("request signals", () => {
  it("a request past its deadline is aborted with a TimeoutError", async () => {
    const signals = new RequestSignals(60, 10);
    const signal = signals.open(clientRequest().request);
    expect(signal.aborted).toBe(false);
    await Bun.sleep(120);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe("TimeoutError");
    expect(signals.size).toBe(0);
  });

  it("a client that goes away aborts its request's signal, and no other", async () => {
    const signals = new RequestSignals(10_000, 10);
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
    const signals = new RequestSignals(10_000, 10);
    const earlier = clientRequest();
    signals.release(signals.open(earlier.request));
    const later = signals.open(clientRequest().request);
    earlier.client.abort(new Error("earlier client gone"));
    await Bun.sleep(50);
    expect(later.aborted).toBe(false);
    expect(signals.size).toBe(1);
    signals.release(later);
  });

  it("a released request is no longer aborted by its deadline", async () => {
    const signals = new RequestSignals(40, 10);
    const signal = signals.open(clientRequest().request);
    signals.release(signal);
    await Bun.sleep(100);
    expect(signal.aborted).toBe(false);
  });
});
