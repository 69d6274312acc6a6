import { describe, expect, it } from "bun:test";
import type { GatewayContext } from "../../../src/core/context.ts";
import type { WireFormat } from "../../../src/core/format.ts";
import type { Provider } from "../../../src/core/plugin.ts";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";
import { anthropicMessages } from "../../../src/formats/anthropic-messages/index.ts";
import { createAnthropicProvider } from "../../../src/plugins/providers/anthropic/provider.ts";
import { createOpenAIWireProvider } from "../../../src/plugins/providers/openai/provider.ts";
import compatiblePlugin from "../../../src/plugins/providers/openai-compatible/index.ts";
import { bodyFor } from "../../helpers/provider.ts";

const EPHEMERAL = { type: "ephemeral" } as const;
const LONG = "y".repeat(5000);
const deployments = [{ name: "d", baseUrl: "http://upstream.invalid", apiKey: "k", apiKeyEnv: "K", weight: 1 }] as never;

/** A request as the core hands it to a provider. */
function context(ingress: WireFormat, body: Record<string, unknown>, model: Record<string, unknown> = {}): GatewayContext {
  return {
    requestId: "gen-0123456789abcdef0123456789abcdef",
    headers: new Headers(),
    ingress,
    body,
    request: ingress.decodeRequest(body),
    target: { provider: "p", upstreamModel: String(body.model) },
    model: { max_output_tokens: 1000, ...model },
    responseHeaders: {},
    log: {},
  } as unknown as GatewayContext;
}

const chatBody = (model: string) => ({
  model,
  messages: [{ role: "system", content: LONG }, { role: "user", content: [{ type: "text", text: "hi", cache_control: EPHEMERAL }] }],
});

describe("providers: whether breakpoints reach the upstream is the provider's capability", () => {
  it("an OpenAI-wire provider takes none by default: a relayed chat body loses them", () => {
    const provider = createOpenAIWireProvider({ name: "openai", deployments, outputCapField: "max_completion_tokens" });
    expect(provider.cacheControl).toBe("none");
    expect(JSON.stringify(bodyFor(provider, context(openaiChat, chatBody("gpt"))))).not.toContain("cache_control");
  });

  it("openai-compatible: an upstream with cache_control: true keeps them, the others strip them", async () => {
    const log = { info() {}, warn() {}, error() {}, request() {}, child: () => log };
    const host = { env: { Q: "k", D: "k" }, log, secret() {} } as never;
    const instance = await compatiblePlugin.setup(
      { upstreams: { qwen: { base_url: "http://q.invalid/v1", api_key_env: "Q", cache_control: true }, deepseek: { base_url: "http://d.invalid/v1", api_key_env: "D" } } },
      host,
    );
    const qwen = instance.providers!.qwen as Provider;
    const deepseek = instance.providers!.deepseek as Provider;
    expect([qwen.cacheControl, deepseek.cacheControl]).toEqual(["breakpoints", "none"]);
    expect((bodyFor(qwen, context(openaiChat, chatBody("qwen"))).messages as any)[1].content[0].cache_control).toEqual(EPHEMERAL);
    expect(JSON.stringify(bodyFor(deepseek, context(openaiChat, chatBody("ds"))))).not.toContain("cache_control");
  });

  it("anthropic takes breakpoints and adds automatic ones on translated routes only, unless switched off", () => {
    const provider = (autoCache?: boolean) => createAnthropicProvider({ name: "anthropic", deployments, version: "2023-06-01", passBetas: "all", autoCache });
    expect(provider().cacheControl).toBe("breakpoints");
    const plainChat = { model: "claude-sonnet", messages: [{ role: "system", content: LONG }, { role: "user", content: "hi" }] };
    const auto = bodyFor(provider(), context(openaiChat, plainChat)) as any;
    expect(auto.system).toEqual([{ type: "text", text: LONG, cache_control: EPHEMERAL }]);
    expect(auto.messages[0].content).toEqual([{ type: "text", text: "hi", cache_control: EPHEMERAL }]);

    expect(JSON.stringify(bodyFor(provider(false), context(openaiChat, plainChat)))).not.toContain("cache_control");
    expect(JSON.stringify(bodyFor(provider(), context(openaiChat, plainChat, { auto_cache: false })))).not.toContain("cache_control");
    // A catalog minimum above the prompt's length: none.
    expect(JSON.stringify(bodyFor(provider(), context(openaiChat, plainChat, { cache_min_tokens: 100_000 })))).not.toContain("cache_control");

    const messages = { model: "claude-sonnet", max_tokens: 10, system: LONG, messages: [{ role: "user", content: "hi" }] };
    expect(bodyFor(provider(), context(anthropicMessages, messages))).toEqual(messages);
  });
});
