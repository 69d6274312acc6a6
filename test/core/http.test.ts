import { afterAll, describe, expect, it } from "bun:test";
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");

/** An upstream that answers after 3 s. */
const slowUpstream = Bun.serve({
  port: 0,
  async fetch() {
    await Bun.sleep(3_000);
    return Response.json({});
  },
});
afterAll(() => slowUpstream.stop(true));

/**
 * Calls the slow upstream with upstreamFetch in a process of its own (the upstream client is chosen once per
 * process), the request's signal aborted by its deadline after 100 ms: what the call ended with, and when.
 */
async function abortedCall(upstreamClient: "sockets" | "fetch"): Promise<string> {
  const script = `
    import { jsonHeaders, upstreamFetch } from ${JSON.stringify(`${ROOT}/src/core/http.ts`)};
    import { RequestSignal } from ${JSON.stringify(`${ROOT}/src/core/request-signals.ts`)};
    const signal = new RequestSignal();
    setTimeout(() => signal.abort(new DOMException("past its deadline", "TimeoutError")), 100);
    const started = performance.now();
    const outcome = await upstreamFetch({ url: ${JSON.stringify(slowUpstream.url.href)}, headers: jsonHeaders({}), body: {}, signal }).then(
      () => "answered",
      (error) => error.constructor.name,
    );
    console.log(outcome, performance.now() - started < 1_000 ? "in time" : "late");`;
  const child = Bun.spawn([process.execPath, "-e", script], {
    cwd: ROOT,
    env: { ...process.env, GATEWAY_UPSTREAM_CLIENT: upstreamClient },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return (out.trim() || err).trim();
}

describe("upstream calls", () => {
  it.each(["sockets", "fetch"] as const)("a request's deadline stops its upstream call at once and reads as a timeout (%s)", async (upstreamClient) => {
    expect(await abortedCall(upstreamClient)).toBe("UpstreamTimeoutError in time");
  });
});
