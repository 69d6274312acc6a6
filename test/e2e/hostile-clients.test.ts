import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/** Who gets refused before their body is read, what bounds the bodies in flight, and what an upstream's silence ends. */

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ env: { MAX_BODY_BYTES_IN_FLIGHT: String(1_000_000), UPSTREAM_IDLE_TIMEOUT_MS: "300" } });
});
afterAll(async () => {
  await t.stop();
});

const directive = (value: unknown) => `[[fake ${JSON.stringify(value)}]]`;

/** Sends raw bytes to the gateway and resolves with what came back once the gateway answers (the body may never be finished). */
async function rawRequest(head: string, firstBytes: string, options: { keepOpenMs?: number } = {}): Promise<{ status: number; text: string; close(): void }> {
  const url = new URL(t.url);
  let received = "";
  let resolveAnswer: () => void;
  const answered = new Promise<void>((resolve) => (resolveAnswer = resolve));
  const socket = await Bun.connect({
    hostname: url.hostname,
    port: Number(url.port),
    socket: {
      data(_socket, data) {
        received += data.toString();
        if (received.includes("\r\n\r\n")) resolveAnswer();
      },
      close() {
        resolveAnswer();
      },
    },
  });
  socket.write(head + "\r\n\r\n" + firstBytes);
  await Promise.race([answered, Bun.sleep(options.keepOpenMs ?? 3_000)]);
  await Bun.sleep(20);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
  return { status, text: received, close: () => socket.end() };
}

describe("a caller without a valid key", () => {
  it("is refused with 401 before a byte of its body is read: a 50 MB body declared and never sent still answers at once", async () => {
    for (const path of ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/images/generations"]) {
      const started = performance.now();
      const answer = await rawRequest(
        `POST ${path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: 52000000\r\nauthorization: Bearer sk-gw-not-a-key`,
        '{"model":"gpt-6-luna","messages":[',
      );
      answer.close();
      expect(answer.status).toBe(401);
      expect(performance.now() - started).toBeLessThan(2_000);
    }
  });

  it("gets 401, not 400, for a body that is not JSON", async () => {
    for (const path of ["/v1/chat/completions", "/v1/messages", "/v1/responses"]) {
      const response = await fetch(t.url + path, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
      expect(response.status).toBe(401);
    }
  });
});

describe("request bodies in flight", () => {
  it("past the shared budget, a request answers 503 with retry-after while another body is being received, and is served once it is done", async () => {
    const { key } = await t.newAccountWithKey();
    const body = JSON.stringify({ model: "gpt-6-luna", messages: [{ role: "user", content: "x".repeat(700_000) }] });
    const head = (length: number) =>
      `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nauthorization: Bearer ${key}`;
    // The first body is declared and half sent: its bytes hold the budget while it is received.
    const slow = rawRequest(head(body.length), body.slice(0, 1000), { keepOpenMs: 600 });
    await Bun.sleep(100);
    const refused = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as any).error.message).toContain("too many request bodies");
    (await slow).close();
    await Bun.sleep(50);
    const served = await fetch(`${t.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
    expect(served.status).toBe(200);
  });

  /** A chunked upload (no content-length) of `total` bytes, 1 MB a chunk. */
  function chunkedBody(total: number): ReadableStream<Uint8Array> {
    let sent = 0;
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > total) return controller.close();
        const chunk = new TextEncoder().encode(sent === 0 ? '{"model":"gpt-6-luna","x":"' : "x".repeat(1_000_000));
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
  }
  const post = (url: string, key: string, body: ReadableStream) =>
    fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
      duplex: "half",
    } as RequestInit);

  it("a chunked body is counted as it arrives: past the shared budget it is refused with 503", async () => {
    const { key } = await t.newAccountWithKey();
    const response = await post(t.url, key, chunkedBody(3_000_000));
    expect(response.status).toBe(503);
  });

  it("a chunked body past one body's limit is refused with 413 payload_too_large", async () => {
    const gateway = await startTestGateway({ fake: t.fake });
    try {
      const { key } = await gateway.newAccountWithKey();
      const response = await post(gateway.url, key, chunkedBody(gateway.gateway.config.server.max_body_bytes + 1_000_000));
      expect(response.status).toBe(413);
      expect(((await response.json()) as any).error.code).toBe("payload_too_large");
    } finally {
      await gateway.stop();
    }
  });
});

describe("an upstream that goes silent mid-answer", () => {
  it("ends a stream with the format's error event after UPSTREAM_IDLE_TIMEOUT_MS, recorded failed 504 and billed for what was delivered", async () => {
    const { key } = await t.newAccountWithKey();
    const started = performance.now();
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-6-luna", stream: true, messages: [{ role: "user", content: `Hello ${directive({ hang_after_chunks: 2, text: "one two three four five six" })}` }] }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(text).toContain('"error"');
    expect(text).toContain("sent nothing for 300 ms");
    const id = response.headers.get("x-gateway-request-id")!;
    const record = (await (await fetch(`${t.url}/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as any;
    expect(record.data.status).toBe("failed");
    expect(record.data.total_cost).toBeGreaterThan(0);
  });

  it("ends a non-streaming call whose upstream sends headers and then nothing with 504 upstream_timeout", async () => {
    const { key } = await t.newAccountWithKey();
    const silent = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () =>
        new Response(
          new ReadableStream({
            start(controller) {
              controller.enqueue(new TextEncoder().encode('{"id":"x","object":"chat.completion","choices":['));
            },
          }),
          { headers: { "content-type": "application/json" } },
        ),
    });
    const gateway = await startTestGateway({ fake: t.fake, env: { OPENAI_BASE_URL: `http://127.0.0.1:${silent.port}/v1`, UPSTREAM_IDLE_TIMEOUT_MS: "300" } });
    try {
      const funded = await gateway.newAccountWithKey();
      const error = await gateway.client(funded.key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "Hello" }] }).catch((thrown) => thrown);
      expect(error.status).toBe(504);
      expect(error.error?.code ?? error.code).toBe("upstream_timeout");
    } finally {
      await gateway.stop();
      silent.stop(true);
    }
    expect(key).toBeTruthy();
  });
});
