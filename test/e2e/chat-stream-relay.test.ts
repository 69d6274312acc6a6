import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startTestGateway, UPSTREAM_KEYS, type TestGateway } from "../helpers/gateway.ts";
import { catalog } from "../helpers/budget.ts";
import { countTextTokens, loadTokenizer } from "../../src/plugins/token-count/count.ts";
import { usdToNano } from "../../src/core/money.ts";

/**
 * The same-format chat relay reads only the first content chunk of a run that share their text around the
 * content (the others are relayed by their shape, unparsed). An upstream over real HTTP that sends its bytes in
 * reads cut where this test says: what the client gets and what is billed must be what a relay that parses every
 * chunk gives.
 */

const MODEL = "gpt-6-luna";
const prices = catalog.pricesFor(catalog.get(MODEL)!, 0, new Date());
const USAGE = { prompt_tokens: 11, completion_tokens: 22, total_tokens: 33 };
const WORDS = ["The", " answer", " is", " forty", "-two", ",", " said", " the", " model", "."];

function chunk(choice: string, usage = "null"): string {
  return `data: {"id":"chatcmpl-up7","object":"chat.completion.chunk","created":1800000000,"model":"${MODEL}","system_fingerprint":"fp_1","choices":[${choice}],"usage":${usage}}\n\n`;
}
const content = (text: string) => chunk(`{"index":0,"delta":{"content":${JSON.stringify(text)}},"logprobs":null,"finish_reason":null}`);
const ROLE = chunk('{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}');
const FINISH = chunk('{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}');
const USAGE_CHUNK = `data: {"id":"chatcmpl-up7","object":"chat.completion.chunk","created":1800000000,"model":"${MODEL}","system_fingerprint":"fp_1","choices":[],"usage":${JSON.stringify(USAGE)}}\n\n`;
const DONE = "data: [DONE]\n\n";

/** Text cut at `at` (a string in it: the cut falls in its middle). */
function cutAt(text: string, at: string): [string, string] {
  const middle = text.indexOf(at) + Math.floor(at.length / 2);
  return [text.slice(0, middle), text.slice(middle)];
}

/** Each script: the reads the upstream sends, 15 ms apart, and whether it then stalls instead of ending. */
const SCRIPTS: Record<string, { reads: string[]; stall?: boolean }> = {
  // A content chunk and the usage chunk each cut across two reads, after the relay has a shape to go by.
  split: (() => {
    const [contentHead, contentTail] = cutAt(content(WORDS[5]!), '"content"');
    const [usageHead, usageTail] = cutAt(USAGE_CHUNK, '"prompt_tokens"');
    return {
      reads: [
        ROLE + WORDS.slice(0, 5).map(content).join(""),
        contentHead,
        contentTail + WORDS.slice(6).map(content).join("") + FINISH + usageHead,
        usageTail + DONE,
      ],
    };
  })(),
  // Content that looks like usage, an error or a finish: text, never read as such.
  lookalikes: {
    reads: [
      ROLE + content("Hello") + content(`{"usage":{"prompt_tokens":999999,"completion_tokens":999999}}`) + content('"usage"'),
      content('"error":{"message":"no"}') + content('"finish_reason":"stop"') + content(" usage") + FINISH + USAGE_CHUNK + DONE,
    ],
  },
  // An error event in the middle of shaped content chunks, carrying the upstream's key.
  error: {
    reads: [ROLE + WORDS.slice(0, 4).map(content).join(""), WORDS.slice(4, 6).map(content).join("") + `data: {"error":{"message":"overloaded, key ${UPSTREAM_KEYS.openai}","type":"server_error"}}\n\n`],
  },
  // Content, then nothing: the client leaves.
  stall: { reads: [ROLE + WORDS.slice(0, 3).map(content).join(""), WORDS.slice(3, 6).map(content).join("")], stall: true },
};

let upstream: ReturnType<typeof Bun.serve>;
let t: TestGateway;
let key: string;

beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request) {
      const body = (await request.json()) as { messages: { content: string }[] };
      const script = SCRIPTS[body.messages.at(-1)!.content]!;
      const encoder = new TextEncoder();
      let cancelled = false;
      return new Response(
        new ReadableStream({
          async pull(controller) {
            for (const read of script.reads) {
              if (cancelled) return;
              controller.enqueue(encoder.encode(read));
              await Bun.sleep(15);
            }
            if (script.stall) await new Promise<void>((resolve) => request.signal.addEventListener("abort", () => resolve()));
            if (!cancelled) controller.close();
          },
          cancel() {
            cancelled = true;
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    },
  });
  const base = `http://127.0.0.1:${upstream.port}/v1`;
  t = await startTestGateway({ env: { OPENAI_BASE_URL: base, DEEPSEEK_BASE_URL: base, XAI_BASE_URL: base } });
  ({ key } = await t.newAccountWithKey({ credit: 20 }));
  await loadTokenizer();
});
afterAll(async () => {
  await t.stop();
  upstream.stop(true);
});

async function send(script: string, includeUsage = true): Promise<Response> {
  return fetch(`${t.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: includeUsage }, messages: [{ role: "user", content: script }] }),
  });
}

/** The JSON payloads of an SSE text ("[DONE]" kept as a string). */
function payloads(sse: string): any[] {
  return sse
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => (block.slice(6) === "[DONE]" ? "[DONE]" : JSON.parse(block.slice(6))));
}

const textOf = (chunks: any[]) => chunks.map((c) => c?.choices?.[0]?.delta?.content ?? "").join("");

async function generation(requestId: string): Promise<any> {
  for (let tries = 0; tries < 100; tries++) {
    const response = await fetch(`${t.url}/v1/generation?id=${requestId}`, { headers: { authorization: `Bearer ${key}` } });
    if (response.status === 200) return ((await response.json()) as any).data;
    await Bun.sleep(20);
  }
  throw new Error(`no generation record for ${requestId}`);
}

function expectBilledAsReported(record: any): void {
  expect(record.status).toBe("success");
  expect(record.usage_estimated).toBe(false);
  expect(record.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 22 });
  expect(usdToNano(record.total_cost)).toBe(11 * prices.input + 22 * prices.output);
}

describe("the chat relay's unparsed content chunks", () => {
  it("a content chunk and the usage chunk cut across reads: the client's text, ids and usage, and the bill, exact", async () => {
    for (const includeUsage of [true, false]) {
      const response = await send("split", includeUsage);
      const requestId = response.headers.get("x-gateway-request-id")!;
      const chunks = payloads(await response.text());
      expect(textOf(chunks)).toBe(WORDS.join(""));
      expect(chunks.at(-1)).toBe("[DONE]");
      for (const c of chunks.slice(0, -1)) expect(c.id).toBe(requestId);
      const usage = chunks.filter((c) => c.usage);
      expect(usage.map((c) => c.usage)).toEqual(includeUsage ? [USAGE] : []);
      expectBilledAsReported(await generation(requestId));
    }
  });

  it("content that reads like usage, an error or a finish is text: the upstream's own usage is billed", async () => {
    const response = await send("lookalikes");
    const requestId = response.headers.get("x-gateway-request-id")!;
    const chunks = payloads(await response.text());
    expect(textOf(chunks)).toBe(`Hello{"usage":{"prompt_tokens":999999,"completion_tokens":999999}}"usage""error":{"message":"no"}"finish_reason":"stop" usage`);
    expect(chunks.filter((c) => c.error)).toEqual([]);
    expectBilledAsReported(await generation(requestId));
  });

  it("an error event mid-stream ends it failed, its key redacted, the text before it billed as counted", async () => {
    const response = await send("error");
    const requestId = response.headers.get("x-gateway-request-id")!;
    const sse = await response.text();
    expect(sse).not.toContain(UPSTREAM_KEYS.openai);
    const chunks = payloads(sse);
    expect(textOf(chunks)).toBe(WORDS.slice(0, 6).join(""));
    expect(chunks.filter((c) => c.error).map((c) => c.error.message)).toEqual(["overloaded, key [redacted]"]);
    const record = await generation(requestId);
    expect(record.status).toBe("failed");
    expect(record.usage_estimated).toBe(true);
    expect(record.usage.completion_tokens).toBe(countTextTokens(WORDS.slice(0, 6).join(""), true));
  });

  it("a client that leaves mid-stream: cancelled, billed for the text relayed", async () => {
    const controller = new AbortController();
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      signal: controller.signal,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "stall" }] }),
    });
    const requestId = response.headers.get("x-gateway-request-id")!;
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let sse = "";
    while (textOf(payloads(sse.slice(0, sse.lastIndexOf("\n\n") + 2))) !== WORDS.slice(0, 6).join("")) {
      const read = await reader.read();
      if (read.done) throw new Error("the stream ended before the client left");
      sse += decoder.decode(read.value, { stream: true });
    }
    controller.abort();
    await reader.cancel().catch(() => {});
    const record = await generation(requestId);
    expect(record.status).toBe("cancelled");
    expect(record.usage_estimated).toBe(true);
    expect(record.usage.completion_tokens).toBe(countTextTokens(WORDS.slice(0, 6).join(""), true));
  });
});
