import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { openaiChatTranslation } from "../../../src/formats/openai-chat/translation/index.ts";
import { stripCacheControl } from "../../../src/formats/openai-chat/cache-control.ts";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";

const { toCanonical, fromCanonical } = openaiChatTranslation;
const EPHEMERAL = { type: "ephemeral" } as const;
const HOUR = { type: "ephemeral", ttl: "1h" } as const;

function refusal(body: Record<string, unknown>): InvalidRequestError {
  try {
    toCanonical(body);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return error as InvalidRequestError;
  }
  throw new Error("toCanonical accepted the body");
}

describe("chat completions breakpoints decode into canonical form", () => {
  it("keeps breakpoints on system parts and on a string system message (OpenRouter / Cline style), in systemParts", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [
        { role: "system", content: [{ type: "text", text: "Long rules." }, { type: "text", text: "Project notes.", cache_control: HOUR }] },
        { role: "developer", content: "Style guide.", cache_control: EPHEMERAL },
        { role: "user", content: "hi" },
      ],
    });
    expect(canonical.system).toBe("Long rules.Project notes.\n\nStyle guide.");
    expect(canonical.systemParts).toEqual([
      { text: "Long rules." },
      { text: "Project notes.", cacheControl: HOUR },
      { text: "Style guide.", cacheControl: EPHEMERAL },
    ]);
  });

  it("leaves systemParts unset when no system part has a breakpoint", () => {
    const canonical = toCanonical({ model: "m", messages: [{ role: "system", content: [{ type: "text", text: "a" }] }, { role: "user", content: "hi" }] });
    expect(canonical.systemParts).toBeUndefined();
    expect(canonical.system).toBe("a");
  });

  it("keeps breakpoints on user parts, on string user content promoted to a part, on tool results and assistant turns", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [
        { role: "user", content: [{ type: "text", text: "look", cache_control: EPHEMERAL }, { type: "image_url", image_url: { url: "https://x/y.png" }, cache_control: HOUR }] },
        { role: "assistant", content: "calling", tool_calls: [{ id: "call_1", type: "function", function: { name: "ls", arguments: "{}" } }], cache_control: EPHEMERAL },
        { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "a.txt", cache_control: EPHEMERAL }] },
        { role: "user", content: "next", cache_control: EPHEMERAL },
      ],
    });
    expect(canonical.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "look", cacheControl: EPHEMERAL },
          { type: "image", source: { kind: "url", url: "https://x/y.png" }, cacheControl: HOUR },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "calling" },
          { type: "tool_call", id: "call_1", name: "ls", arguments: "{}", cacheControl: EPHEMERAL },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", toolCallId: "call_1", content: [{ type: "text", text: "a.txt" }], cacheControl: EPHEMERAL },
          { type: "text", text: "next", cacheControl: EPHEMERAL },
        ],
      },
    ]);
  });

  it("reads a tool definition's breakpoint on the tool (OpenRouter) or on its function", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      tools: [
        { type: "function", function: { name: "a", parameters: { type: "object" } }, cache_control: EPHEMERAL },
        { type: "function", function: { name: "b", parameters: { type: "object" }, cache_control: HOUR } },
        { type: "function", function: { name: "c", parameters: { type: "object" } } },
      ],
    });
    expect(canonical.tools!.map((tool) => tool.cacheControl)).toEqual([EPHEMERAL, HOUR, undefined]);
  });

  it("refuses a breakpoint that is not {type: ephemeral} with ttl 5m or 1h, naming the path", () => {
    const bad = [
      [{ role: "user", content: [{ type: "text", text: "x", cache_control: { type: "persistent" } }] }, "messages.0.content.0.cache_control"],
      [{ role: "system", content: "x", cache_control: { type: "ephemeral", ttl: "24h" } }, "messages.0.cache_control"],
      [{ role: "user", content: "x", cache_control: "ephemeral" }, "messages.0.cache_control"],
    ] as const;
    for (const [message, param] of bad) {
      const error = refusal({ model: "m", messages: [message] });
      expect(error.status).toBe(400);
      expect(error.param).toBe(param);
      expect(error.message).toContain(`'${param}'`);
    }
    const tool = refusal({ model: "m", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "a", cache_control: { type: "ephemeral", ttl: 5 } } }] });
    expect(tool.param).toBe("tools.0.function.cache_control");
  });

  it("never writes breakpoints into a chat upstream's body (translated routes)", () => {
    const body = fromCanonical(
      {
        model: "m",
        system: "sys",
        systemParts: [{ text: "sys", cacheControl: EPHEMERAL }],
        messages: [{ role: "user", content: [{ type: "text", text: "hi", cacheControl: EPHEMERAL }] }],
        tools: [{ name: "a", parameters: { type: "object" }, cacheControl: EPHEMERAL }],
        stream: false,
      },
      "up",
    );
    expect(JSON.stringify(body)).not.toContain("cache_control");
    expect(body.messages).toEqual([{ role: "system", content: "sys" }, { role: "user", content: "hi" }]);
  });

  it("reads prompt_cache_key as the request's cache key", () => {
    expect(openaiChat.decodeRequest({ model: "m", messages: [{ role: "user", content: "hi" }], prompt_cache_key: "thread-9" }).cacheKey).toBe("thread-9");
    expect(openaiChat.decodeRequest({ model: "m", messages: [{ role: "user", content: "hi" }] }).cacheKey).toBeUndefined();
  });
});

describe("stripCacheControl (relayed chat bodies for upstreams that take no breakpoints)", () => {
  it("removes cache_control from every message, content part, tool and tool function, leaving the client's objects as they were", () => {
    const client = {
      model: "m",
      messages: [
        { role: "system", content: "s", cache_control: EPHEMERAL },
        { role: "user", content: [{ type: "text", text: "a", cache_control: EPHEMERAL }, { type: "text", text: "b" }] },
        { role: "assistant", content: "c" },
      ],
      tools: [
        { type: "function", function: { name: "t", parameters: {} }, cache_control: EPHEMERAL },
        { type: "function", function: { name: "u", parameters: {}, cache_control: EPHEMERAL } },
      ],
      prompt_cache_key: "k",
    };
    const snapshot = structuredClone(client);
    const body: Record<string, unknown> = { ...client };
    stripCacheControl(body);
    expect(JSON.stringify(body)).not.toContain("cache_control");
    expect(body).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "s" },
        { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
        { role: "assistant", content: "c" },
      ],
      tools: [
        { type: "function", function: { name: "t", parameters: {} } },
        { type: "function", function: { name: "u", parameters: {} } },
      ],
      prompt_cache_key: "k",
    });
    expect(client).toEqual(snapshot);
    // Untouched messages are the client's own objects (copy on write).
    expect((body.messages as unknown[])[2]).toBe(client.messages[2]);
  });

  it("copies nothing when the body has no breakpoint", () => {
    const messages = [{ role: "user", content: [{ type: "text", text: "a" }] }];
    const tools = [{ type: "function", function: { name: "t" } }];
    const body: Record<string, unknown> = { model: "m", messages, tools };
    stripCacheControl(body);
    expect(body.messages).toBe(messages);
    expect(body.tools).toBe(tools);
  });
});
