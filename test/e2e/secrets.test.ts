import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";
import { REDACTED } from "../../src/core/secrets.ts";

/**
 * Issue 24, defect 4: no configured secret (provider keys, the admin token, client keys) in any answer or
 * log line, and no key hash in the logs. The upstream here echoes the key it was sent into its errors, as
 * real providers do ("Incorrect API key provided: sk-…"). The provider keys have no well-known shape: only
 * their registration can mask them.
 */
const PROVIDER_KEYS = {
  OPENAI_API_KEY: "up-key-openai-7Hq2Lm",
  DEEPSEEK_API_KEY: "up-key-ds-XYZ-4Rt9",
  ANTHROPIC_API_KEY: "up-key-ant-9Pw3Zk",
  GEMINI_API_KEY: "up-key-gem-2Vn8Qs",
};
const ADMIN_TOKEN = "admin-token-for-secrets-test";

/** What the upstream was authenticated with, whichever header its vendor uses. */
function presentedKey(request: Request): string {
  const authorization = request.headers.get("authorization");
  if (authorization?.startsWith("Bearer ")) return authorization.slice("Bearer ".length);
  return request.headers.get("x-api-key") ?? request.headers.get("x-goog-api-key") ?? "";
}

type Dialect = "chat" | "responses" | "messages" | "gemini";

function dialectOf(path: string): Dialect {
  if (path.endsWith("/chat/completions")) return "chat";
  if (path.endsWith("/responses")) return "responses";
  if (path.endsWith("/messages")) return "messages";
  return "gemini";
}

/** The vendor's 401 body, echoing the key as the vendors do. */
function unauthorizedBody(dialect: Dialect, key: string): unknown {
  if (dialect === "messages") return { type: "error", error: { type: "authentication_error", message: `invalid x-api-key: ${key}` } };
  if (dialect === "gemini") return { error: { code: 401, message: `API key not valid: ${key}`, status: "UNAUTHENTICATED" } };
  return { error: { message: `Incorrect API key provided: ${key}.`, type: "invalid_request_error", param: null, code: "invalid_api_key" } };
}

const sse = (data: unknown, event?: string) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

/** A stream that starts well, then (after a pause, so the client already has its headers) fails echoing the key. */
function midStreamFrames(dialect: Dialect, key: string): [string, string] {
  const message = `upstream failure while serving key ${key}`;
  switch (dialect) {
    case "chat":
      return [
        sse({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, finish_reason: null }] }),
        sse({ error: { message, type: "server_error", code: "internal_error" } }),
      ];
    case "messages":
      return [
        sse({ type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } }, "message_start") +
          sse({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }, "content_block_start") +
          sse({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi" } }, "content_block_delta"),
        sse({ type: "error", error: { type: "api_error", message } }, "error"),
      ];
    case "responses": {
      const response = { id: "resp_1", object: "response", created_at: 1, model: "m", output: [], usage: null };
      return [
        sse({ type: "response.created", sequence_number: 0, response: { ...response, status: "in_progress" } }, "response.created"),
        sse({ type: "response.failed", sequence_number: 1, response: { ...response, status: "failed", error: { code: "server_error", message } } }, "response.failed"),
      ];
    }
    case "gemini":
      return [
        sse({ candidates: [{ content: { role: "model", parts: [{ text: "Hi" }] }, index: 0 }], modelVersion: "m" }),
        sse({ error: { code: 500, message, status: "INTERNAL" } }),
      ];
  }
}

const CHAT_ANSWER = {
  id: "chatcmpl-ok",
  object: "chat.completion",
  created: 1,
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
};

/** A tiny upstream speaking every vendor's dialect: `ECHO_401` / `ECHO_MIDSTREAM` in the prompt choose the failure. */
function startEchoUpstream() {
  return Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const path = new URL(request.url).pathname;
      const text = await request.text();
      const dialect = dialectOf(path);
      const key = presentedKey(request);
      if (text.includes("ECHO_401")) return Response.json(unauthorizedBody(dialect, key), { status: 401 });
      if (text.includes("ECHO_MIDSTREAM")) {
        const [head, failure] = midStreamFrames(dialect, key);
        const stream = new ReadableStream({
          async start(controller) {
            controller.enqueue(new TextEncoder().encode(head));
            await Bun.sleep(30);
            controller.enqueue(new TextEncoder().encode(failure));
            controller.close();
          },
        });
        return new Response(stream, { headers: { "content-type": "text/event-stream" } });
      }
      if (dialect === "chat") return Response.json(CHAT_ANSWER);
      return Response.json({ error: { message: "this fake answers only chat successfully" } }, { status: 400 });
    },
  });
}

let upstream: ReturnType<typeof startEchoUpstream>;
let gateway: RunningGateway;
let dataDir: string;
let clientKey: string;
const lines: string[] = [];

async function admin(method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
  const response = await fetch(gateway.url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as any };
}

beforeAll(async () => {
  upstream = startEchoUpstream();
  const base = `http://127.0.0.1:${upstream.port}`;
  dataDir = mkdtempSync(join(tmpdir(), "gateway-secrets-"));
  const env = {
    ...process.env,
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
    EDGE_RATE_LIMIT_RPS: "0",
    GATEWAY_SANDBOX: "false",
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    OPENAI_BASE_URL: `${base}/v1`,
    DEEPSEEK_BASE_URL: `${base}/v1`,
    ANTHROPIC_BASE_URL: base,
    GEMINI_BASE_URL: base,
    ...PROVIDER_KEYS,
  };
  const log = createLogger("test", { silent: false, sink: (line) => void lines.push(line) });
  gateway = await startGateway({ env, port: 0, log });
  const account = await admin("POST", "/admin/v1/accounts", { name: "secrets" });
  await admin("POST", `/admin/v1/accounts/${account.body.data.id}/credits`, { amount: 50, kind: "card", reference: crypto.randomUUID() });
  const key = await admin("POST", `/admin/v1/accounts/${account.body.data.id}/keys`, { name: "secrets key" });
  clientKey = key.body.data.key;
});

afterAll(async () => {
  await gateway.stop();
  upstream.stop(true);
  rmSync(dataDir, { recursive: true, force: true });
});

/** Everything a client could see of an exchange: its events and the error it got, as text. */
async function seen(run: () => Promise<unknown>): Promise<string> {
  const parts: string[] = [];
  try {
    const result = await run();
    if (result && typeof (result as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
      for await (const event of result as AsyncIterable<unknown>) parts.push(JSON.stringify(event));
    } else parts.push(JSON.stringify(result));
  } catch (error) {
    parts.push(String((error as Error).message), JSON.stringify((error as { error?: unknown }).error ?? null));
  }
  return parts.join("\n");
}

function expectNoProviderKey(text: string): void {
  for (const key of Object.values(PROVIDER_KEYS)) expect(text).not.toContain(key);
}

type Scenario = "ECHO_401" | "ECHO_MIDSTREAM";
type Ingress = "chat completions" | "Messages" | "Responses";

/** The official client's call, and the raw request with the same body. */
function exchange(ingress: Ingress, model: string, scenario: Scenario, stream: boolean) {
  const prompt = `Hello ${scenario}`;
  if (ingress === "chat completions") {
    const body = { model, stream, max_tokens: 50, messages: [{ role: "user" as const, content: prompt }] };
    const client = new OpenAI({ apiKey: clientKey, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    return { sdk: () => client.chat.completions.create(body as never), path: "/v1/chat/completions", body };
  }
  if (ingress === "Messages") {
    const body = { model, stream, max_tokens: 50, messages: [{ role: "user" as const, content: prompt }] };
    const client = new Anthropic({ apiKey: clientKey, baseURL: gateway.url, maxRetries: 0 });
    return { sdk: () => client.messages.create(body as never), path: "/v1/messages", body };
  }
  const body = { model, stream, max_output_tokens: 50, input: prompt };
  const client = new OpenAI({ apiKey: clientKey, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  return { sdk: () => client.responses.create(body as never), path: "/v1/responses", body };
}

/** Each ingress on a relayed upstream of its own format and on a translated one (the issue's case: DeepSeek). */
const ROUTES: [Ingress, string][] = [
  ["chat completions", "deepseek-flash"],
  ["chat completions", "gpt-6-luna"],
  ["chat completions", "claude-haiku-4-5"],
  ["chat completions", "gemini-2.5-flash-lite"],
  ["Messages", "claude-haiku-4-5"],
  ["Messages", "gpt-6-luna"],
  ["Responses", "gpt-6-luna"],
  ["Responses", "claude-haiku-4-5"],
];

const CASES: { scenario: Scenario; stream: boolean; words: string }[] = [
  { scenario: "ECHO_401", stream: false, words: "an upstream 401 echoing the provider key reaches the client masked" },
  { scenario: "ECHO_401", stream: true, words: "an upstream 401 echoing the provider key reaches a streaming client masked" },
  { scenario: "ECHO_MIDSTREAM", stream: true, words: "a mid-stream error frame echoing the provider key reaches the client masked" },
];

describe("secrets in answers", () => {
  for (const [ingress, model] of ROUTES) {
    for (const { scenario, stream, words } of CASES) {
      it(`${ingress} on ${model}: ${words}`, async () => {
        const { sdk, path, body } = exchange(ingress, model, scenario, stream);
        const viaSdk = await seen(sdk);
        expectNoProviderKey(viaSdk);
        expect(viaSdk).toContain(REDACTED);

        const raw = await fetch(gateway.url + path, {
          method: "POST",
          headers: { authorization: `Bearer ${clientKey}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        const text = await raw.text();
        expect(raw.status).toBe(stream && scenario === "ECHO_MIDSTREAM" ? 200 : 502);
        expectNoProviderKey(text);
        expect(text).toContain(REDACTED);
      });
    }
  }
});

describe("secrets in log lines", () => {
  it("no provider key, admin token, client key or key hash in any line of a run with auth failures, upstream errors and a success", async () => {
    const client = new OpenAI({ apiKey: clientKey, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    // A success.
    const ok = await client.chat.completions.create({ model: "gpt-6-luna", max_tokens: 50, messages: [{ role: "user", content: "Hello" }] });
    expect(ok.choices[0]!.message.content).toBe("Hello");
    // Auth failures: no key, a wrong client key, a wrong admin token, the admin token as a client key.
    const wrongKey = "sk-gw-" + "W".repeat(40);
    for (const headers of [{}, { authorization: `Bearer ${wrongKey}` }, { "x-api-key": ADMIN_TOKEN }] as Record<string, string>[]) {
      const refused = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-6-luna", messages: [{ role: "user", content: "Hello" }] }),
      });
      expect(refused.status).toBe(401);
      expect(await refused.text()).not.toContain(ADMIN_TOKEN);
    }
    expect((await admin("GET", "/admin/v1/accounts/acc_nothing", undefined, "wrong-admin-token")).status).toBe(401);
    // Upstream errors, answered and mid-stream (beside those of the tests above, which ran on this gateway too).
    await seen(() => client.chat.completions.create({ model: "deepseek-flash", max_tokens: 50, messages: [{ role: "user", content: "ECHO_401" }] }));
    await seen(() => client.chat.completions.create({ model: "deepseek-flash", stream: true, max_tokens: 50, messages: [{ role: "user", content: "ECHO_MIDSTREAM" }] }));
    await Bun.sleep(50); // metering writes and their lines

    const all = lines.join("");
    const statuses = lines.map((line) => JSON.parse(line)).filter((line) => line.message === "request").map((line) => line.status);
    expect(statuses).toEqual(expect.arrayContaining([200, 401, 502]));
    const hashOf = (value: string) => new Bun.CryptoHasher("sha256").update(value).digest("hex");
    for (const secret of [...Object.values(PROVIDER_KEYS), ADMIN_TOKEN, clientKey, wrongKey, hashOf(clientKey), hashOf(ADMIN_TOKEN)]) {
      expect(all).not.toContain(secret);
    }
  });
});
