import { afterAll, afterEach, describe, expect, it } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { UpstreamConnectionError, UpstreamHttpClient, type UpstreamResponse } from "../../src/core/upstream-client.ts";
import { requestEnded, requestStarted } from "../../src/core/turn-end.ts";
import { upstreamClientKind } from "../../src/core/http.ts";
import { waitFor } from "../helpers/processes.ts";

/**
 * A raw TCP upstream: each request (head and content-length body) is handed to `answer`, which writes the
 * bytes of its answer itself, in as many pieces and as late as it likes.
 */
interface Received {
  head: string;
  body: Buffer;
  connection: number;
}
type Answer = (socket: Socket<ServerConnection>, request: Received) => void | Promise<void>;
interface ServerConnection {
  id: number;
  buffer: Buffer;
}

function rawUpstream(answer: Answer) {
  const requests: Received[] = [];
  let connections = 0;
  const closed: number[] = [];
  const listener: TCPSocketListener<ServerConnection> = Bun.listen<ServerConnection>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.data = { id: ++connections, buffer: Buffer.alloc(0) };
      },
      data(socket, data) {
        let buffer = Buffer.concat([socket.data.buffer, data]);
        for (;;) {
          const end = buffer.indexOf("\r\n\r\n");
          if (end < 0) break;
          const head = buffer.toString("latin1", 0, end);
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (buffer.length < end + 4 + length) break;
          const request = { head, body: buffer.subarray(end + 4, end + 4 + length), connection: socket.data.id };
          buffer = buffer.subarray(end + 4 + length);
          requests.push(request);
          void answer(socket, request);
        }
        socket.data.buffer = buffer;
      },
      close(socket) {
        closed.push(socket.data.id);
      },
    },
  });
  return {
    url: `http://127.0.0.1:${listener.port}`,
    requests,
    closed,
    get connections() {
      return connections;
    },
    stop: () => listener.stop(true),
  };
}

const JSON_HEADERS = new Headers({ "content-type": "application/json", authorization: "Bearer sk-up" });
const servers: { stop(): void }[] = [];
const clients: UpstreamHttpClient[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.closeAll();
  for (const server of servers.splice(0)) server.stop();
});

function setup(answer: Answer, options: { idleSeconds?: number; connectTimeoutMs?: number } = {}) {
  const server = rawUpstream(answer);
  servers.push(server);
  const client = new UpstreamHttpClient(options);
  clients.push(client);
  return { server, client };
}

async function readAll(response: UpstreamResponse): Promise<{ chunks: number; text: string }> {
  const reader = response.body!.getReader();
  const parts: Buffer[] = [];
  for (let read = await reader.read(); !read.done; read = await reader.read()) parts.push(Buffer.from(read.value));
  return { chunks: parts.length, text: Buffer.concat(parts).toString("utf8") };
}

function ok(body: string, extra = ""): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Writes `bytes` one piece at a time with a pause between, so the client sees every split. */
async function dribble(socket: Socket<ServerConnection>, bytes: Buffer, pieceBytes: number, pauseMs = 1): Promise<void> {
  for (let at = 0; at < bytes.length; at += pieceBytes) {
    socket.write(bytes.subarray(at, at + pieceBytes));
    await Bun.sleep(pauseMs);
  }
}

describe("core/upstream-client", () => {
  it("sends the request line, the provider's headers, identity encoding and the exact UTF-8 body length", async () => {
    const { server, client } = setup((socket) => void socket.write(ok("{}")));
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "héllo 🌍 日本" }] });
    const response = await client.post(`${server.url}/v1/chat/completions?x=1`, JSON_HEADERS, body, undefined);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("{}");
    const [request] = server.requests;
    const lines = request!.head.split("\r\n");
    expect(lines[0]).toBe("POST /v1/chat/completions?x=1 HTTP/1.1");
    expect(lines).toContain(`host: ${server.url.slice("http://".length)}`);
    expect(lines).toContain("authorization: Bearer sk-up");
    expect(lines).toContain("accept-encoding: identity");
    expect(lines).toContain(`content-length: ${Buffer.byteLength(body)}`);
    expect(request!.body.toString("utf8")).toBe(body);
  });

  it("reads a content-length answer split anywhere, a multi-byte character included", async () => {
    const text = JSON.stringify({ answer: "grüße 👋 ".repeat(50) });
    const { server, client } = setup((socket) => dribble(socket, Buffer.from(ok(text)), 7));
    const response = await client.post(server.url + "/", JSON_HEADERS, "{}", undefined);
    expect(await response.text()).toBe(text);
    expect(response.headers.get("Content-Type")).toBe("application/json");
  });

  it("decodes chunked answers split byte by byte, with chunk extensions and trailers, as a stream", async () => {
    const frames = ["data: {\"a\":\"é\"}\n\n", "data: {\"b\":2}\n\n", "data: [DONE]\n\n"];
    const chunked = frames.map((frame) => `${Buffer.byteLength(frame).toString(16)};ext=1\r\n${frame}\r\n`).join("") + "0\r\nx-trailer: 1\r\n\r\n";
    const head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    const { server, client } = setup(async (socket) => {
      socket.write(head);
      await Bun.sleep(5);
      await dribble(socket, Buffer.from(chunked), 1, 0);
    });
    const response = await client.post(server.url + "/", JSON_HEADERS, "{}", undefined);
    const { chunks, text } = await readAll(response);
    expect(text).toBe(frames.join(""));
    expect(chunks).toBeGreaterThan(3); // handed on as it came, not gathered to the end
    // The connection went back to the pool after the last chunk: the next request reuses it.
    await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    expect(server.connections).toBe(1);
  });

  it("keeps one connection alive for sequential requests and opens one per concurrent request", async () => {
    const { server, client } = setup((socket, request) => void socket.write(ok(request.body.toString())));
    for (let index = 0; index < 20; index++) {
      expect(await (await client.post(server.url + "/", JSON_HEADERS, `{"i":${index}}`, undefined)).text()).toBe(`{"i":${index}}`);
    }
    expect(server.connections).toBe(1);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, index) => client.post(server.url + "/", JSON_HEADERS, `{"p":${index}}`, undefined).then((r) => r.text())));
    expect(answers).toEqual(Array.from({ length: 8 }, (_, index) => `{"p":${index}}`));
    expect(server.connections).toBe(8);
    expect(client.openConnections).toBe(8);
  });

  it("closes a connection left idle in the pool, and opens a new one for the next request", async () => {
    const { server, client } = setup((socket) => void socket.write(ok("{}")), { idleSeconds: 1 });
    await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    expect(client.openConnections).toBe(1);
    const waited = await waitFor(() => server.closed.length === 1, 5_000, "the idle connection closed", 50);
    expect(waited).toBeGreaterThan(500);
    expect(client.openConnections).toBe(0);
    await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    expect(server.connections).toBe(2);
  });

  it("does not reuse a connection the upstream asked to close", async () => {
    const { server, client } = setup((socket) => void socket.write(ok("{}", "connection: close\r\n")));
    for (let index = 0; index < 3; index++) await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    expect(server.connections).toBe(3);
  });

  it("does not reuse a connection idle longer than the server's keep-alive timeout allows (less one second)", async () => {
    const { server, client } = setup((socket) => void socket.write(ok("{}", "keep-alive: timeout=2\r\n")));
    const call = async () => (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    await call();
    await call(); // at once: the same connection
    expect(server.connections).toBe(1);
    await Bun.sleep(1_100); // past 2 - 1 s: the server may be closing it
    await call();
    expect(server.connections).toBe(2);
    await waitFor(() => server.closed.includes(1), 2_000, "the stale connection closed", 20);
    expect(client.openConnections).toBe(1);
  });

  it("sends again on a new connection when a reused one turns out closed before any answer byte", async () => {
    let answered = 0;
    const { server, client } = setup((socket) => {
      answered++;
      // The first connection answers once, then the upstream drops it as idle (as servers do).
      if (socket.data.id === 1 && answered === 2) return void socket.terminate();
      socket.write(ok(`{"n":${answered}}`));
    });
    expect(await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text()).toBe('{"n":1}');
    expect(await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text()).toBe('{"n":3}');
    expect(server.connections).toBe(2);
  });

  it("fails, without retrying, when a new connection closes before the answer or in the middle of it", async () => {
    const { server, client } = setup((socket, request) => {
      if (request.body.toString() === "{\"cut\":\"head\"}") return void socket.terminate();
      socket.write("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"partial\":");
      setTimeout(() => socket.terminate(), 10);
    });
    const headCut = client.post(server.url + "/", JSON_HEADERS, '{"cut":"head"}', undefined);
    await expect(headCut).rejects.toThrow(UpstreamConnectionError);
    await expect(headCut).rejects.toThrow("upstream closed the connection");
    const response = await client.post(server.url + "/", JSON_HEADERS, '{"cut":"body"}', undefined);
    await expect(response.text()).rejects.toThrow("upstream closed the connection before the answer ended");
    expect(server.requests.length).toBe(2);
  });

  it("reads an answer without length to the connection's end, and skips a 100 Continue", async () => {
    const { server, client } = setup((socket) => {
      socket.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil ");
      setTimeout(() => socket.end("close"), 5);
    });
    const response = await client.post(server.url + "/", JSON_HEADERS, "{}", undefined);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("until close");
  });

  it("gives error answers with their status and headers, and no body for 204", async () => {
    const { server, client } = setup((socket, request) => {
      if (request.body.toString() === "204") return void socket.write("HTTP/1.1 204 No Content\r\n\r\n");
      socket.write("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nx-multi: a\r\nX-Multi: b\r\ncontent-length: 2\r\n\r\n{}");
    });
    const limited = await client.post(server.url + "/", JSON_HEADERS, "429", undefined);
    expect([limited.status, limited.ok]).toEqual([429, false]);
    expect(limited.headers.get("retry-after")).toBe("7");
    expect(limited.headers.get("x-multi")).toBe("a, b");
    expect(limited.headers.get("x-missing")).toBeNull();
    expect(await limited.text()).toBe("{}");
    const empty = await client.post(server.url + "/", JSON_HEADERS, "204", undefined);
    expect([empty.status, empty.ok, await empty.text()]).toEqual([204, true, ""]);
  });

  it("refuses an answer that is not HTTP/1.x, a compressed one (content or transfer encoding), and an unreachable upstream", async () => {
    const { server, client } = setup((socket, request) => {
      if (request.body.toString() === "gzip") return void socket.write("HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 1\r\n\r\nx");
      if (request.body.toString() === "te") return void socket.write("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n");
      socket.write("SSH-2.0-OpenSSH\r\n\r\n");
    });
    await expect(client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).rejects.toThrow("not HTTP/1.x");
    await expect(client.post(server.url + "/", JSON_HEADERS, "gzip", undefined)).rejects.toThrow("content-encoding gzip");
    await expect(client.post(server.url + "/", JSON_HEADERS, "te", undefined)).rejects.toThrow("transfer-encoding gzip, chunked");
    const port = server.url.split(":").at(-1);
    server.stop();
    await expect(client.post(`http://127.0.0.1:${port}/`, JSON_HEADERS, "{}", undefined)).rejects.toThrow(`cannot connect to 127.0.0.1:${port}`);
  });

  it("aborts a call waiting for its answer or in the middle of its body, closing the connection", async () => {
    const { server, client } = setup((socket, request) => {
      if (request.body.toString() === "silent") return; // never answers
      socket.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n");
    });
    const waiting = new AbortController();
    const pending = client.post(server.url + "/", JSON_HEADERS, "silent", waiting.signal);
    await waitFor(() => server.requests.length === 1, 2000, "the request");
    waiting.abort(new DOMException("deadline", "TimeoutError"));
    await expect(pending).rejects.toThrow("deadline");
    await waitFor(() => server.closed.length === 1, 2000, "the first connection closed");

    const streaming = new AbortController();
    const response = await client.post(server.url + "/", JSON_HEADERS, "stream", streaming.signal);
    const reader = response.body!.getReader();
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("hello");
    streaming.abort(new Error("client went away"));
    await expect(reader.read()).rejects.toThrow("client went away");
    await waitFor(() => server.closed.length === 2, 2000, "the streaming connection closed");
    expect(client.openConnections).toBe(0);
    const before = new AbortController();
    before.abort(new Error("already"));
    await expect(client.post(server.url + "/", JSON_HEADERS, "{}", before.signal)).rejects.toThrow("already");
  });

  it("with requests in flight, writes the requests of one turn of the event loop after it: one aborted in that turn never reaches the upstream", async () => {
    const { server, client } = setup((socket, request) => void socket.write(ok(request.body.toString())));
    await Promise.all([1, 2].map((n) => client.post(server.url + "/", JSON_HEADERS, `{"warm":${n}}`, undefined).then((r) => r.text())));
    expect(client.openConnections).toBe(2);

    requestStarted(); // as the pipeline counts the two calls below
    requestStarted();
    try {
      const aborted = new AbortController();
      const gone = client.post(server.url + "/", JSON_HEADERS, '{"n":"aborted"}', aborted.signal);
      const kept = client.post(server.url + "/", JSON_HEADERS, '{"n":"kept"}', undefined);
      aborted.abort(new Error("client went away"));
      await expect(gone).rejects.toThrow("client went away");
      expect(await (await kept).text()).toBe('{"n":"kept"}');
      expect(server.requests.map((r) => r.body.toString())).toEqual(['{"warm":1}', '{"warm":2}', '{"n":"kept"}']);
    } finally {
      requestEnded();
      requestEnded();
    }
  });

  it("alone, writes a request at once: it reaches the upstream before the turn ends", async () => {
    const { server, client } = setup((socket, request) => void socket.write(ok(request.body.toString())));
    await (await client.post(server.url + "/", JSON_HEADERS, '{"warm":1}', undefined)).text(); // an open connection
    const aborted = new AbortController();
    const call = client.post(server.url + "/", JSON_HEADERS, '{"n":"alone"}', aborted.signal);
    aborted.abort(new Error("client went away")); // after the write: the upstream has it
    await expect(call).rejects.toThrow("client went away");
    await waitFor(() => server.requests.length === 2, 2000, "the request reached the upstream");
    expect(server.requests[1]!.body.toString()).toBe('{"n":"alone"}');
  });

  it("closes the connection when the reader cancels a body still coming", async () => {
    const { server, client } = setup((socket) => void socket.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"));
    const response = await client.post(server.url + "/", JSON_HEADERS, "{}", undefined);
    const reader = response.body!.getReader();
    await reader.read();
    await reader.cancel();
    await waitFor(() => server.closed.length === 1, 2000, "the connection closed");
    expect(client.openConnections).toBe(0);
  });

  it("sends a body larger than the socket takes at once (the rest on drain)", async () => {
    const { server, client } = setup((socket, request) => void socket.write(ok(String(request.body.length))));
    const big = JSON.stringify({ text: "x".repeat(8 * 1024 * 1024) + "é" });
    const response = await client.post(server.url + "/", JSON_HEADERS, big, undefined);
    expect(await response.text()).toBe(String(Buffer.byteLength(big)));
    expect(server.requests[0]!.body.toString("utf8")).toBe(big);
  });

  it("stops reading an answer its reader is behind on, so the upstream waits instead of the gateway's memory filling", async () => {
    const answerBytes = 48 * 1024 * 1024;
    const piece = Buffer.alloc(64 * 1024, "x");
    let accepted = 0; // bytes the upstream's kernel took from it
    const writeMore = (socket: Socket<{ left: number }>) => {
      while (socket.data.left > 0) {
        const written = socket.write(piece, 0, Math.min(piece.length, socket.data.left));
        accepted += Math.max(0, written);
        socket.data.left -= Math.max(0, written);
        if (written < Math.min(piece.length, socket.data.left + written)) return; // full: wait for drain
      }
    };
    const listener = Bun.listen<{ left: number }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(socket, data) {
          if (!data.includes("\r\n\r\n")) return;
          socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${answerBytes}\r\n\r\n`);
          socket.data = { left: answerBytes };
          writeMore(socket);
        },
        drain: writeMore,
      },
    });
    servers.push(listener);
    const client = new UpstreamHttpClient();
    clients.push(client);
    const url = `http://127.0.0.1:${listener.port}/`;

    const response = await client.post(url, JSON_HEADERS, "{}", undefined);
    const reader = response.body!.getReader();
    await Bun.sleep(300); // the reader is busy elsewhere
    const acceptedWhileBehind = accepted;
    // Without the pause the whole answer is taken in at once. With it: the high-water mark and the two
    // sockets' kernel buffers (a few MB on loopback).
    expect(acceptedWhileBehind).toBeLessThan(answerBytes / 3);

    let received = 0;
    for (let read = await reader.read(); !read.done; read = await reader.read()) received += read.value.length;
    expect(received).toBe(answerBytes);
    expect(accepted).toBe(answerBytes);
    // The connection went back to the pool reading again: the next call on it gets its answer.
    const second = await client.post(url, JSON_HEADERS, "{}", undefined);
    expect(second.status).toBe(200);
    await second.body!.getReader().cancel();
  });

  it("keeps a plain connection that opened in time past its connect timeout", async () => {
    const { server, client } = setup((socket) => void socket.write(ok("{}")), { connectTimeoutMs: 100 });
    await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    await Bun.sleep(200);
    expect(client.openConnections).toBe(1);
    await (await client.post(server.url + "/", JSON_HEADERS, "{}", undefined)).text();
    expect(server.connections).toBe(1);
  });

  it("fails a new connection that does not open in time (a TLS handshake never answered), closing it", async () => {
    let accepted = 0;
    const closed: number[] = [];
    const silent = Bun.listen<{ id: number }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open(socket) {
          socket.data = { id: ++accepted };
        },
        data() {}, // takes the TLS hello, never answers
        close(socket) {
          closed.push(socket.data.id);
        },
      },
    });
    servers.push(silent);
    const client = new UpstreamHttpClient({ connectTimeoutMs: 200 });
    clients.push(client);
    const started = performance.now();
    const call = client.post(`https://127.0.0.1:${silent.port}/v1`, JSON_HEADERS, "{}", undefined);
    await expect(call).rejects.toThrow(`connecting (TCP and TLS) to 127.0.0.1:${silent.port} took longer than 200 ms`);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(accepted).toBe(1);
    await waitFor(() => closed.length === 1, 2_000, "the connection closed", 10);
    expect(client.openConnections).toBe(0);
  });

  it("is the default way upstream, and leaves the calls to fetch when asked to or when a proxy is set", () => {
    expect(upstreamClientKind({})).toBe("sockets");
    expect(upstreamClientKind({ GATEWAY_UPSTREAM_CLIENT: "fetch" })).toBe("fetch");
    expect(upstreamClientKind({ HTTPS_PROXY: "http://proxy:3128" })).toBe("fetch");
    expect(upstreamClientKind({ http_proxy: "http://proxy:3128" })).toBe("fetch");
  });

  it("speaks TLS, verifying the upstream's certificate", async () => {
    // Bun reads extra CA certificates at start only: the client runs in a child that trusts a fresh self-signed one.
    const dir = mkdtempSync(join(tmpdir(), "upstream-tls-"));
    const made = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"]);
    expect(made.exitCode).toBe(0);
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert: Bun.file(join(dir, "cert.pem")), key: Bun.file(join(dir, "key.pem")) },
      fetch: async (request) => new Response(`secure ${await request.text()}`),
    });
    servers.push(server);
    const script = join(dir, "client.ts");
    await Bun.write(
      script,
      `import { UpstreamHttpClient } from ${JSON.stringify(resolve(import.meta.dir, "../../src/core/upstream-client.ts"))};
// A short connect timeout: the second call, after it, reuses the connection (the timeout ended with the handshake).
const client = new UpstreamHttpClient({ connectTimeoutMs: 300 });
const headers = new Headers({ "content-type": "application/json" });
const out = [];
for (const body of ["1", "2"]) {
  out.push(await client.post("https://localhost:${server.port}/v1", headers, body, undefined).then((r) => r.text(), (e) => "error: " + e.message));
  await Bun.sleep(400);
  out.push(client.openConnections);
}
console.log(JSON.stringify(out));
process.exit(0);`,
    );
    const run = async (env: Record<string, string>) => {
      const child = Bun.spawn([process.execPath, script], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "inherit" });
      return JSON.parse((await new Response(child.stdout).text()).trim());
    };
    expect(await run({ NODE_EXTRA_CA_CERTS: join(dir, "cert.pem") })).toEqual(["secure 1", 1, "secure 2", 1]);
    const untrusted = await run({});
    expect(untrusted[0]).toMatch(/^error: TLS with localhost failed: .*self.signed/);
  });
});

afterAll(() => {
  for (const server of servers) server.stop();
});
