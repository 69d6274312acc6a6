import { afterAll, beforeAll, beforeEach, describe, expect, it } from "bun:test";
import type { GatewayContext } from "../../src/core/context.ts";
import { ProviderUnavailableError } from "../../src/core/errors.ts";
import { readSseFrames } from "../../src/core/sse.ts";
import type { WireFormat } from "../../src/core/format.ts";
import type { StreamEvent } from "../../src/core/canonical.ts";
import { openaiChat } from "../../src/formats/openai-chat/index.ts";
import { anthropicMessages } from "../../src/formats/anthropic-messages/index.ts";
import anthropicPlugin from "../../src/plugins/providers/anthropic/index.ts";
import { clientBetas, createAnthropicProvider } from "../../src/plugins/providers/anthropic/provider.ts";
import { bodyFor, sendVia } from "../helpers/provider.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { computeAnthropicUsage } from "../fake-upstream/anthropic.ts";

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await startFakeUpstream();
});
afterAll(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

/** A request as the core hands it to the provider: a client of `ingress`, routed to an Anthropic model. */
function context(ingress: WireFormat, body: Record<string, unknown>, extra: Partial<GatewayContext> & { headers?: Headers } = {}): GatewayContext {
  return {
    requestId: "gen-0123456789abcdef0123456789abcdef",
    startedAt: Date.now(),
    signal: AbortSignal.timeout(10_000),
    headers: new Headers(),
    ingress,
    body,
    request: ingress.decodeRequest(body),
    target: { provider: "anthropic", upstreamModel: "claude-sonnet-5-5" },
    model: { max_output_tokens: 128_000, family: "anthropic" },
    responseHeaders: {},
    log: {},
    ...extra,
  } as unknown as GatewayContext;
}

const provider = (options: { passBetas?: "all" | string[]; apiKey?: string; baseUrl?: string } = {}) =>
  createAnthropicProvider({
    name: "anthropic",
    deployments: [
      { name: "anthropic#1", weight: 1, baseUrl: options.baseUrl ?? fake.url, apiKeyEnv: "ANTHROPIC_API_KEY", apiKey: "apiKey" in options ? options.apiKey : "sk-ant-upstream" },
    ],
    version: "2023-06-01",
    passBetas: options.passBetas ?? "all",
  });

const MESSAGES_BODY = { model: "claude-sonnet-5-5", max_tokens: 64, messages: [{ role: "user", content: "hello" }] };

describe("anthropic provider", () => {
  it("declares the Messages format only", () => {
    expect(provider().codecs).toEqual([anthropicMessages]);
  });

  it("relays a Messages client's body to /v1/messages with x-api-key and anthropic-version, never the client's key", async () => {
    const headers = new Headers({ "x-api-key": "client-key", "anthropic-beta": "interleaved-thinking-2025-05-14, context-management-2025-06-27" });
    const ctx = context(anthropicMessages, MESSAGES_BODY, { headers });
    const p = provider();
    const body = bodyFor(p, ctx);
    expect(body).toEqual(MESSAGES_BODY);
    const response = await sendVia(p, ctx, body);
    expect(response.status).toBe(200);
    const [recorded] = fake.requests;
    expect(recorded!.path).toBe("/v1/messages");
    expect(recorded!.headers["x-api-key"]).toBe("sk-ant-upstream");
    expect(recorded!.headers["anthropic-version"]).toBe("2023-06-01");
    expect(recorded!.headers["anthropic-beta"]).toBe("interleaved-thinking-2025-05-14,context-management-2025-06-27");
    expect(JSON.stringify(recorded)).not.toContain("client-key");
    expect(anthropicMessages.readResponse(JSON.parse(await response.text()) as Record<string, unknown>).usage!.inputTokens).toBe(computeAnthropicUsage(MESSAGES_BODY).input_tokens);
  });

  it("passes only the listed betas when pass_betas is a list, and none for a translated request", async () => {
    const headers = new Headers({ "anthropic-beta": "a-1,b-2 , c-3" });
    expect(clientBetas(headers, new Set(["b-2", "z"]))).toBe("b-2");
    expect(clientBetas(headers, null)).toBe("a-1,b-2,c-3");
    expect(clientBetas(new Headers(), null)).toBe("");

    const chatBody = { model: "claude-sonnet-5-5", messages: [{ role: "user", content: "hi" }] };
    const ctx = context(openaiChat, chatBody, { headers: new Headers({ "anthropic-beta": "a-1" }) });
    const p = provider();
    await sendVia(p, ctx, bodyFor(p, ctx));
    expect(fake.requests[0]!.headers["anthropic-beta"]).toBeUndefined();
  });

  it("gives a translated client without a cap the model's maximum, or the budget's cap, keeping thinking below it", () => {
    const p = provider();
    const chatBody = { model: "claude-sonnet-5-5", messages: [{ role: "user", content: "hi" }], reasoning_effort: "high" };
    expect(bodyFor(p, context(openaiChat, chatBody))).toMatchObject({ max_tokens: 128_000, thinking: { type: "enabled", budget_tokens: 16384 } });
    const capped = bodyFor(p, context(openaiChat, chatBody, { upstreamOutputCap: 5000 }));
    expect(capped).toMatchObject({ max_tokens: 5000, thinking: { type: "enabled", budget_tokens: 4999 } });
    const tiny = bodyFor(p, context(openaiChat, chatBody, { upstreamOutputCap: 900 }));
    expect(tiny.max_tokens).toBe(900);
    expect(tiny.thinking).toBeUndefined();
    const own = bodyFor(p, context(openaiChat, { ...chatBody, max_completion_tokens: 3000 }));
    expect(own).toMatchObject({ max_tokens: 3000, thinking: { budget_tokens: 2999 } });
  });

  it("streams from the fake in the real wire format, decodable to canonical events", async () => {
    const ctx = context(anthropicMessages, { ...MESSAGES_BODY, stream: true });
    const p = provider();
    const response = await sendVia(p, ctx, bodyFor(p, ctx));
    const decoder = anthropicMessages.translation!.createStreamDecoder();
    const events: StreamEvent[] = [];
    for await (const frame of readSseFrames(response.body!)) {
      expect(frame.event).toBeDefined();
      events.push(...decoder.decode(frame));
    }
    events.push(...decoder.end());
    expect(events.filter((event) => event.type === "text_delta").map((event) => (event as { text: string }).text).join("")).toBe("Hello from claude-sonnet-5-5.");
    expect(events.at(-1)).toEqual({ type: "message_end", finishReason: "stop" });
  });

  it("accepts a base URL with or without /v1", async () => {
    const ctx = context(anthropicMessages, MESSAGES_BODY);
    const p = provider({ baseUrl: fake.url + "/v1/" });
    await sendVia(p, ctx, bodyFor(p, ctx));
    expect(fake.requests[0]!.path).toBe("/v1/messages");
  });

  it("without a key answers 503 naming ANTHROPIC_API_KEY, before any upstream call", async () => {
    const ctx = context(anthropicMessages, MESSAGES_BODY);
    const error = await sendVia(provider({ apiKey: undefined }), ctx, MESSAGES_BODY).catch((thrown) => thrown);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect(error.message).toContain("ANTHROPIC_API_KEY");
    expect(fake.requests).toHaveLength(0);
  });

  it("plugin: reads its key from the environment and defaults anthropic-version and pass_betas", async () => {
    const log = { info() {}, warn() {}, error() {}, request() {}, child: () => log };
    const host = { env: { ANTHROPIC_API_KEY: "k" }, log, secret() {} } as never;
    const config = { base_url: fake.url, api_key_env: "ANTHROPIC_API_KEY", anthropic_version: "2023-06-01", pass_betas: "all" as const };
    const instance = await anthropicPlugin.setup(config, host);
    expect(Object.keys(instance.providers!)).toEqual(["anthropic"]);
    const ctx = context(anthropicMessages, MESSAGES_BODY);
    await sendVia(instance.providers!.anthropic!, ctx, MESSAGES_BODY);
    expect(fake.requests[0]!.headers["x-api-key"]).toBe("k");
  });

  it("speaks to a fake that refuses what Anthropic refuses (so the e2e successes prove the bodies are valid)", async () => {
    const send = (body: unknown, headers: Record<string, string> = { "x-api-key": "k", "anthropic-version": "2023-06-01" }) =>
      fetch(fake.url + "/v1/messages", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    const refusal = async (body: unknown, headers?: Record<string, string>) => {
      const response = await send(body, headers);
      return { status: response.status, body: JSON.parse(await response.text()) as any };
    };
    expect(await refusal(MESSAGES_BODY, { "anthropic-version": "2023-06-01" })).toMatchObject({ status: 401, body: { type: "error", error: { type: "authentication_error" } } });
    expect((await refusal(MESSAGES_BODY, { "x-api-key": "k" })).body.error.message).toContain("anthropic-version");
    const messages = (list: unknown[]) => ({ ...MESSAGES_BODY, messages: list });
    const cases: [unknown, string][] = [
      [{ ...MESSAGES_BODY, max_tokens: undefined }, "max_tokens: Field required"],
      [{ ...MESSAGES_BODY, stream_options: {} }, "Extra inputs are not permitted"],
      [{ ...MESSAGES_BODY, temperature: 0.5, top_p: 0.5 }, "cannot both be specified"],
      [messages([{ role: "user", content: [{ type: "text", text: "" }] }]), "must be non-empty"],
      [messages([{ role: "user", content: "a" }, { role: "assistant", content: [{ type: "tool_use", id: "Bash:0", name: "b", input: {} }] }, { role: "user", content: "c" }]), "should match pattern"],
      [messages([{ role: "user", content: "a" }, { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "b", input: {} }] }, { role: "user", content: "c" }]), "without `tool_result`"],
      [messages([{ role: "user", content: "a" }, { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "b", input: {} }] }, { role: "user", content: [{ type: "text", text: "x" }, { type: "tool_result", tool_use_id: "t1" }] }]), "must come first"],
      [messages([{ role: "user", content: "a" }, { role: "assistant", content: [{ type: "thinking", thinking: "t", signature: "forged" }] }, { role: "user", content: "c" }]), "Invalid `signature`"],
      [{ ...MESSAGES_BODY, max_tokens: 2000, thinking: { type: "enabled", budget_tokens: 2000 } }, "must be greater than `thinking.budget_tokens`"],
    ];
    for (const [body, message] of cases) {
      const { status, body: answer } = await refusal(body);
      expect(status).toBe(400);
      expect(answer.error.type).toBe("invalid_request_error");
      expect(answer.error.message).toContain(message);
    }
  });
});
