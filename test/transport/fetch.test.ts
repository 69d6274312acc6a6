import { afterAll, afterEach, describe, expect, it } from "bun:test";
import net from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createFetchTransport } from "../../src/transport/fetch.ts";
import { jsonHeaders, maxConnectionsPerOrigin, DEFAULT_MAX_CONNECTIONS_PER_ORIGIN } from "../../src/transport/index.ts";
import { RequestSignal } from "../../src/core/request-signals.ts";
import { UpstreamTimeoutError } from "../../src/core/errors.ts";
import { ConfigError } from "../../src/core/config.ts";
import { makeCertificates } from "../../bench/tls-front.ts";
import { okAnswer, startRawUpstream, type RawUpstream } from "./raw-upstream.ts";

const ROOT = resolve(import.meta.dir, "../..");
const transport = createFetchTransport({ maxConnectionsPerOrigin: 64 });
const headers = jsonHeaders({ authorization: "Bearer sk-up" });
const stops: (() => void)[] = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

async function raw(answer: Parameters<typeof startRawUpstream>[0]): Promise<RawUpstream> {
  const upstream = await startRawUpstream(answer);
  stops.push(() => upstream.stop());
  return upstream;
}

/** What a call ended with: the answer's status and text, or the error's class and code. */
function outcome(call: Promise<{ status: number; text(): Promise<string> }>): Promise<string> {
  return call.then(
    async (response) => `${response.status} ${await response.text()}`,
    (error: Error & { code?: string }) => `${error.constructor.name}${error.code ? ` ${error.code}` : ""}`,
  );
}

/** Runs `script` (ES module text) in a child Bun with exactly `env` (plus PATH and HOME); its stdout, trimmed. */
async function inChild(script: string, env: Record<string, string>): Promise<string> {
  const child = Bun.spawn([process.execPath, "-e", script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (child.exitCode !== 0) throw new Error(`child failed (${child.exitCode}): ${err}`);
  return out.trim();
}

/** A child script that sends one call per URL through the process's transport and prints each outcome, one per line. */
function callsScript(urls: string[]): string {
  return `
    import { jsonHeaders, upstreamFetch } from ${JSON.stringify(`${ROOT}/src/transport/index.ts`)};
    import { RequestSignal } from ${JSON.stringify(`${ROOT}/src/core/request-signals.ts`)};
    for (const url of ${JSON.stringify(urls)}) {
      const line = await upstreamFetch({ url, headers: jsonHeaders({}), body: { hello: 1 }, signal: new RequestSignal() }).then(
        async (response) => response.status + " " + (await response.text()),
        (error) => "error " + (error.code ?? error.name),
      );
      console.log(line);
    }`;
}

describe("transport/fetch", () => {
  it("sends one JSON POST with the provider's headers and the body serialized", async () => {
    const upstream = await raw((socket) => socket.write(okAnswer('{"ok":true}')));
    const body = { model: "m", messages: [{ role: "user", content: "héllo 🌍" }] };
    expect(await outcome(transport({ url: `${upstream.url}/v1/chat/completions`, headers, body, signal: new RequestSignal() }))).toBe('200 {"ok":true}');
    const [request] = upstream.requests;
    expect(request!.head.split("\r\n")[0]).toBe("POST /v1/chat/completions HTTP/1.1");
    expect(request!.head.toLowerCase()).toContain("authorization: bearer sk-up");
    expect(request!.head.toLowerCase()).toContain("content-type: application/json");
    expect(JSON.parse(request!.body)).toEqual(body);
  });

  it("never sends a request twice: a reused keep-alive connection reset after the request arrived fails the call", async () => {
    const upstream = await raw((socket, _request, nth) => {
      if (nth === 1) socket.write(okAnswer());
      else socket.resetAndDestroy(); // the request arrived whole: a resend could cost a second generation
    });
    const call = () => transport({ url: upstream.url + "/v1/chat/completions", headers, body: {}, signal: new RequestSignal() });
    expect(await outcome(call())).toBe("200 {}");
    expect(await outcome(call())).toBe("TypeError ECONNRESET");
    await Bun.sleep(50);
    expect(upstream.requests.length).toBe(2);
    expect(upstream.connections).toBe(1); // the second call did go out on the reused connection
  });

  it("never sends a request twice: a reused connection the upstream closed after reading the request fails the call", async () => {
    const upstream = await raw((socket, _request, nth) => {
      if (nth === 1) socket.write(okAnswer());
      else socket.end();
    });
    const call = () => transport({ url: upstream.url + "/", headers, body: {}, signal: new RequestSignal() });
    expect(await outcome(call())).toBe("200 {}");
    expect(await outcome(call())).toBe("TypeError ECONNRESET");
    await Bun.sleep(50);
    expect(upstream.requests.length).toBe(2);
  });

  it("never sends a request twice: a new connection reset before the answer fails the call", async () => {
    const upstream = await raw((socket) => socket.resetAndDestroy());
    expect(await outcome(transport({ url: upstream.url + "/", headers, body: {}, signal: new RequestSignal() }))).toBe("TypeError ECONNRESET");
    await Bun.sleep(50);
    expect(upstream.requests.length).toBe(1);
    expect(upstream.connections).toBe(1);
  });

  it("a request's deadline stops its upstream call at once and reads as a timeout", async () => {
    const upstream = await raw(() => {}); // never answers
    const signal = new RequestSignal();
    setTimeout(() => signal.abort(new DOMException("past its deadline", "TimeoutError")), 100);
    const started = performance.now();
    const error = await transport({ url: upstream.url + "/", headers, body: {}, signal }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(UpstreamTimeoutError);
    expect((error as UpstreamTimeoutError).status).toBe(504);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("a client that leaves stops the upstream call with the signal's reason, not a timeout", async () => {
    const upstream = await raw(() => {});
    const signal = new RequestSignal();
    setTimeout(() => signal.abort(new DOMException("the client went away", "AbortError")), 50);
    const error = await transport({ url: upstream.url + "/", headers, body: {}, signal }).catch((thrown: unknown) => thrown);
    expect(error).not.toBeInstanceOf(UpstreamTimeoutError);
    expect((error as Error).name).toBe("AbortError");
  });

  it("a body cancelled in the middle of a stream, as when its client leaves, settles quietly", async () => {
    let unhandled = 0;
    const onUnhandled = () => unhandled++;
    process.on("unhandledRejection", onUnhandled);
    try {
      const upstream = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        fetch: () =>
          new Response(
            new ReadableStream({
              async pull(controller) {
                await Bun.sleep(2);
                controller.enqueue(new TextEncoder().encode('data: {"x":1}\n\n'));
              },
            }),
            { headers: { "content-type": "text/event-stream" } },
          ),
      });
      stops.push(() => upstream.stop(true));
      for (let i = 0; i < 20; i++) {
        const response = await transport({ url: upstream.url.href, headers, body: {}, signal: new RequestSignal() });
        const reader = response.body!.getReader();
        if (i % 2) await reader.read();
        await reader.cancel();
      }
      await Bun.sleep(50);
      expect(unhandled).toBe(0);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("reads UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN, refusing a value that is not a whole number of at least 1", () => {
    expect(maxConnectionsPerOrigin({})).toBe(DEFAULT_MAX_CONNECTIONS_PER_ORIGIN);
    expect(maxConnectionsPerOrigin({ UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN: "16" })).toBe(16);
    for (const bad of ["0", "-1", "1.5", "many"]) {
      expect(() => maxConnectionsPerOrigin({ UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN: bad })).toThrow(ConfigError);
    }
  });
});

describe("transport/fetch over the network's edges", () => {
  const tmp = mkdtempSync(join(tmpdir(), "transport-test-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const openssl = Bun.which("openssl") !== null;

  it.skipIf(!openssl)("speaks TLS, trusting a CA given in NODE_EXTRA_CA_CERTS and refusing a certificate it cannot verify", async () => {
    const certificates = makeCertificates(join(tmp, "tls"));
    const upstream = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert: Bun.file(certificates.certPath), key: Bun.file(certificates.keyPath) },
      fetch: () => Response.json({ secure: true }),
    });
    stops.push(() => upstream.stop(true));
    const script = callsScript([`https://localhost:${upstream.port}/v1/chat/completions`]);
    expect(await inChild(script, { NODE_EXTRA_CA_CERTS: certificates.caPath })).toBe('200 {"secure":true}');
    expect(await inChild(script, {})).toMatch(/^error .*(CERT|SIGNER|SELF_SIGNED|VERIFY)/i);
  });

  it("goes through HTTP_PROXY and HTTPS_PROXY from the environment, and around them for NO_PROXY hosts", async () => {
    // A forward proxy that records each request line: it answers plain-HTTP requests itself and refuses tunnels.
    const seen: string[] = [];
    const proxy = net.createServer((socket) => {
      socket.once("data", (data) => {
        const line = data.toString("latin1").split("\r\n")[0]!;
        seen.push(line);
        if (line.startsWith("CONNECT ")) socket.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
        else socket.end("HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nproxied");
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((done) => proxy.listen(0, "127.0.0.1", done));
    stops.push(() => proxy.close());
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const direct = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("direct") });
    stops.push(() => direct.stop(true));
    // An https upstream reached directly sees a TLS hello (first byte 0x16) and hangs up: enough to tell it was reached.
    let helloes = 0;
    const tlsDirect = net.createServer((socket) => {
      socket.once("data", (data) => {
        if (data[0] === 0x16) helloes++;
        socket.destroy();
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((done) => tlsDirect.listen(0, "127.0.0.1", done));
    stops.push(() => tlsDirect.close());
    const tlsPort = (tlsDirect.address() as net.AddressInfo).port;

    const urls = [`http://127.0.0.1:${direct.port}/a`, `http://localhost:${direct.port}/b`, `https://127.0.0.1:${tlsPort}/c`, `https://localhost:${tlsPort}/d`];
    const lines = (await inChild(callsScript(urls), { HTTP_PROXY: proxyUrl, HTTPS_PROXY: proxyUrl, NO_PROXY: "localhost" })).split("\n");
    expect(lines[0]).toBe("200 proxied");
    expect(lines[1]).toBe("200 direct");
    expect(lines[2]).toStartWith("error"); // the proxy refused the tunnel
    expect(lines[3]).toStartWith("error"); // reached directly, hung up on
    expect(seen).toEqual([`POST http://127.0.0.1:${direct.port}/a HTTP/1.1`, `CONNECT 127.0.0.1:${tlsPort} HTTP/1.1`]);
    expect(helloes).toBe(1);

    seen.length = 0; // lower-case names too
    expect(await inChild(callsScript([`http://127.0.0.1:${direct.port}/e`]), { http_proxy: proxyUrl })).toBe("200 proxied");
    expect(seen).toEqual([`POST http://127.0.0.1:${direct.port}/e HTTP/1.1`]);
  });
});
