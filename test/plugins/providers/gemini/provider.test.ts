import { afterAll, beforeAll, beforeEach, describe, expect, it } from "bun:test";
import type { GatewayContext } from "../../../../src/core/context.ts";
import { ProviderUnavailableError } from "../../../../src/core/errors.ts";
import { readSseFrames } from "../../../../src/core/sse.ts";
import { openaiChat } from "../../../../src/formats/openai-chat/index.ts";
import { gemini } from "../../../../src/plugins/providers/gemini/codec.ts";
import type { StreamEvent } from "../../../../src/core/canonical.ts";
import geminiPlugin from "../../../../src/plugins/providers/gemini/index.ts";
import { createGeminiProvider, geminiUrl } from "../../../../src/plugins/providers/gemini/provider.ts";
import { bodyFor, sendVia } from "../../../helpers/provider.ts";
import { startFakeUpstream, type FakeUpstream } from "../../../fake-upstream/server.ts";
import { computeGeminiUsage } from "./fake.ts";

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await startFakeUpstream();
});
afterAll(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

/** A chat client's request, routed to a Gemini model, as the core hands it to the provider. */
function chatContext(body: Record<string, unknown>, upstreamModel = "gemini-2.5-flash-lite", extra: Partial<GatewayContext> = {}): GatewayContext {
  return {
    requestId: "gen-0123456789abcdef0123456789abcdef",
    startedAt: Date.now(),
    signal: AbortSignal.timeout(10_000),
    ingress: openaiChat,
    body,
    request: openaiChat.decodeRequest(body),
    target: { provider: "gemini", upstreamModel },
    responseHeaders: {},
    log: {},
    ...extra,
  } as unknown as GatewayContext;
}

const provider = () => createGeminiProvider({ deployments: [{ name: "gemini#1", weight: 1, baseUrl: fake.url + "/", apiKeyEnv: "GEMINI_API_KEY", apiKey: "gm-upstream-key" }] });

describe("gemini provider", () => {
  it("declares the gemini format only (every client format is translated)", () => {
    expect(provider().codecs).toEqual([gemini]);
  });

  it("builds the URL of generateContent and of the SSE stream", () => {
    expect(geminiUrl("https://generativelanguage.googleapis.com/", "gemini-2.5-flash-lite", false)).toBe(
      "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash-lite:generateContent",
    );
    expect(geminiUrl("https://g.example", "models/gemini-4-carbon", true)).toBe("https://g.example/v1beta/models/gemini-4-carbon:streamGenerateContent?alt=sse");
  });

  it("posts a translated body with x-goog-api-key and reads the answer's usage", async () => {
    const ctx = chatContext({ model: "gemini-2.5-flash-lite", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello" }] });
    const p = provider();
    const body = bodyFor(p, ctx);
    expect(body).toEqual({ contents: [{ role: "user", parts: [{ text: "hello" }] }], systemInstruction: { parts: [{ text: "Be brief." }] } });
    const response = await sendVia(p, ctx, body);
    expect(response.status).toBe(200);
    const [recorded] = fake.requests;
    expect(recorded!.path).toBe("/v1beta/models/gemini-2.5-flash-lite:generateContent");
    expect(recorded!.headers["x-goog-api-key"]).toBe("gm-upstream-key");
    expect(recorded!.headers.authorization).toBeUndefined();
    const answer = gemini.translation!.decodeResponse(JSON.parse(await response.text()) as Record<string, unknown>);
    const usage = computeGeminiUsage(body, "gemini-2.5-flash-lite");
    expect(answer.content).toEqual([{ type: "text", text: "Hello from gemini-2.5-flash-lite." }]);
    expect(answer.usage).toEqual({ inputTokens: usage.promptTokenCount, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: usage.candidatesTokenCount, reasoningTokens: 0 });
  });

  it("streams from streamGenerateContent?alt=sse through the stream decoder", async () => {
    const ctx = chatContext({ model: "gemini-4-carbon", stream: true, messages: [{ role: "user", content: "count" }] }, "gemini-4-carbon");
    const p = provider();
    const response = await sendVia(p, ctx, bodyFor(p, ctx));
    expect(fake.requests[0]!.path).toBe("/v1beta/models/gemini-4-carbon:streamGenerateContent?alt=sse");
    const decoder = gemini.translation!.createStreamDecoder();
    const events: StreamEvent[] = [];
    for await (const frame of readSseFrames(response.body!)) events.push(...decoder.decode(frame));
    events.push(...decoder.end());
    expect(events.filter((event) => event.type === "text_delta").map((event) => (event as any).text).join("")).toBe("Hello from gemini-4-carbon.");
    expect(events.at(-1)).toEqual({ type: "message_end", finishReason: "stop" });
  });

  it("puts the budget's output cap in generationConfig when the client set none", () => {
    const capped = chatContext({ model: "m", messages: [{ role: "user", content: "hi" }] }, "m", { upstreamOutputCap: 512 });
    expect((bodyFor(provider(), capped).generationConfig as any).maxOutputTokens).toBe(512);
    const own = chatContext({ model: "m", max_tokens: 100, messages: [{ role: "user", content: "hi" }] }, "m", { upstreamOutputCap: 512 });
    expect((bodyFor(provider(), own).generationConfig as any).maxOutputTokens).toBe(100);
  });

  it("answers 503 naming GEMINI_API_KEY when no key is configured, without calling upstream", async () => {
    const keyless = createGeminiProvider({ deployments: [{ name: "gemini#1", weight: 1, baseUrl: fake.url, apiKeyEnv: "GEMINI_API_KEY", apiKey: undefined }] });
    const ctx = chatContext({ model: "gemini-4-carbon", messages: [{ role: "user", content: "hi" }] });
    const error = await sendVia(keyless, ctx, bodyFor(keyless, ctx)).catch((thrown) => thrown);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect(error.status).toBe(503);
    expect(error.message).toContain("GEMINI_API_KEY");
    expect(fake.requests).toHaveLength(0);
  });

  it("is the plugin serving the gemini provider, its key read from the named variable", async () => {
    const host = { env: { MY_GEMINI_KEY: "k" }, secret() {} } as any;
    const instance = await geminiPlugin.setup({ base_url: fake.url, api_key_env: "MY_GEMINI_KEY" }, host);
    expect(Object.keys(instance.providers ?? {})).toEqual(["gemini"]);
    const ctx = chatContext({ model: "m", messages: [{ role: "user", content: "hi" }] });
    const response = await sendVia(instance.providers!.gemini!, ctx, bodyFor(instance.providers!.gemini!, ctx));
    expect(response.status).toBe(200);
    expect(fake.requests[0]!.headers["x-goog-api-key"]).toBe("k");
  });
});
