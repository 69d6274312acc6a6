import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import type { CanonicalChatRequest } from "../../../src/core/canonical.ts";
import { messagesTranslation } from "../../../src/formats/anthropic-messages/translation/index.ts";
import { addAutomaticBreakpoints, enforceBreakpointRules, minimumCacheableTokens } from "../../../src/formats/anthropic-messages/cache.ts";

const { toCanonical, fromCanonical } = messagesTranslation;
const EPHEMERAL = { type: "ephemeral" } as const;
const HOUR = { type: "ephemeral", ttl: "1h" } as const;

function request(fields: Partial<CanonicalChatRequest>): CanonicalChatRequest {
  return { model: "m", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: false, ...fields };
}

/** Every cache_control of an Anthropic body, in prefix order, with where it is. */
function breakpoints(body: any): [string, unknown][] {
  const found: [string, unknown][] = [];
  (body.tools ?? []).forEach((tool: any, i: number) => tool.cache_control && found.push([`tools.${i}`, tool.cache_control]));
  if (Array.isArray(body.system)) body.system.forEach((block: any, i: number) => block.cache_control && found.push([`system.${i}`, block.cache_control]));
  body.messages.forEach((message: any, m: number) => {
    if (!Array.isArray(message.content)) return;
    message.content.forEach((block: any, b: number) => {
      (Array.isArray(block.content) ? block.content : []).forEach((inner: any, i: number) => inner.cache_control && found.push([`messages.${m}.content.${b}.content.${i}`, inner.cache_control]));
      if (block.cache_control) found.push([`messages.${m}.content.${b}`, block.cache_control]);
    });
  });
  return found;
}

describe("canonical breakpoints encoded for Anthropic", () => {
  it("puts each breakpoint on its tool, system block and content block", () => {
    const body: any = fromCanonical(
      request({
        system: "rulesnotes",
        systemParts: [{ text: "rules" }, { text: "notes", cacheControl: HOUR }],
        tools: [{ name: "ls", parameters: { type: "object" }, cacheControl: HOUR }],
        messages: [
          { role: "user", content: [{ type: "text", text: "look" }, { type: "image", source: { kind: "url", url: "https://x/y.png" }, cacheControl: EPHEMERAL }] },
          { role: "assistant", content: [{ type: "tool_call", id: "call_1", name: "ls", arguments: "{}", cacheControl: EPHEMERAL }] },
        ],
      }),
      "claude-up",
    );
    expect(body.system).toEqual([
      { type: "text", text: "rules" },
      { type: "text", text: "notes", cache_control: HOUR },
    ]);
    expect(body.tools[0].cache_control).toEqual(HOUR);
    expect(body.messages[0].content[1]).toEqual({ type: "image", source: { type: "url", url: "https://x/y.png" }, cache_control: EPHEMERAL });
    expect(body.messages[1].content[0]).toMatchObject({ type: "tool_use", cache_control: EPHEMERAL });
    const result: any = fromCanonical(
      request({
        messages: [
          { role: "assistant", content: [{ type: "tool_call", id: "call_1", name: "ls", arguments: "{}" }] },
          { role: "user", content: [{ type: "tool_result", toolCallId: "call_1", content: [{ type: "text", text: "a.txt" }], cacheControl: EPHEMERAL }] },
        ],
      }),
      "claude-up",
    );
    expect(result.messages[1].content[0]).toMatchObject({ type: "tool_result", tool_use_id: "call_1", cache_control: EPHEMERAL });
  });

  it("keeps the system a string when no system part has a breakpoint, and adds the JSON instruction as a block when it has", () => {
    expect((fromCanonical(request({ system: "s" }), "c") as any).system).toBe("s");
    const body: any = fromCanonical(request({ system: "s", systemParts: [{ text: "s", cacheControl: EPHEMERAL }], responseFormat: { type: "json_object" } }), "c");
    expect(body.system).toEqual([
      { type: "text", text: "s", cache_control: EPHEMERAL },
      { type: "text", text: "Respond with a single valid JSON object and nothing else." },
    ]);
  });

  it("keeps only the last four breakpoints in prefix order (tools, system, messages), dropping the earliest", () => {
    const body: any = fromCanonical(
      request({
        tools: [
          { name: "a", parameters: {}, cacheControl: EPHEMERAL },
          { name: "b", parameters: {}, cacheControl: EPHEMERAL },
        ],
        system: "s",
        systemParts: [{ text: "s", cacheControl: EPHEMERAL }],
        messages: [
          { role: "user", content: [{ type: "text", text: "one", cacheControl: EPHEMERAL }] },
          { role: "assistant", content: [{ type: "text", text: "two" }] },
          { role: "user", content: [{ type: "text", text: "three", cacheControl: EPHEMERAL }] },
        ],
      }),
      "c",
    );
    expect(breakpoints(body).map(([where]) => where)).toEqual(["tools.1", "system.0", "messages.0.content.0", "messages.2.content.0"]);
  });

  it("turns a 1-hour breakpoint that follows a 5-minute one into a 5-minute one, never an error", () => {
    const body: any = fromCanonical(
      request({
        tools: [{ name: "a", parameters: {}, cacheControl: HOUR }],
        system: "s",
        systemParts: [{ text: "s", cacheControl: EPHEMERAL }],
        messages: [{ role: "user", content: [{ type: "text", text: "x", cacheControl: HOUR }] }],
      }),
      "c",
    );
    expect(breakpoints(body)).toEqual([
      ["tools.0", HOUR],
      ["system.0", EPHEMERAL],
      ["messages.0.content.0", EPHEMERAL],
    ]);
  });

  it("counts a tool result's own blocks among the four, before the result", () => {
    const body: any = {
      messages: [
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "t", content: [{ type: "text", text: "a", cache_control: EPHEMERAL }], cache_control: EPHEMERAL },
            { type: "text", text: "b", cache_control: EPHEMERAL },
            { type: "text", text: "c", cache_control: EPHEMERAL },
            { type: "text", text: "d", cache_control: EPHEMERAL },
          ],
        },
      ],
    };
    enforceBreakpointRules(body);
    expect(breakpoints(body).map(([where]) => where)).toEqual(["messages.0.content.0", "messages.0.content.1", "messages.0.content.2", "messages.0.content.3"]);
  });
});

describe("Messages clients' breakpoints decode into canonical form", () => {
  it("reads cache_control on system blocks, content blocks, tool results and tools", () => {
    const canonical = toCanonical({
      model: "claude-x",
      max_tokens: 10,
      system: [{ type: "text", text: "rules", cache_control: HOUR }, { type: "text", text: "more" }],
      tools: [{ name: "ls", input_schema: { type: "object" }, cache_control: EPHEMERAL }],
      messages: [
        { role: "user", content: [{ type: "text", text: "hi", cache_control: EPHEMERAL }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "ls", input: {}, cache_control: EPHEMERAL }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "a", cache_control: EPHEMERAL }], cache_control: EPHEMERAL }] },
      ],
    });
    expect(canonical.system).toBe("rules\n\nmore");
    expect(canonical.systemParts).toEqual([{ text: "rules", cacheControl: HOUR }, { text: "more" }]);
    expect(canonical.tools![0]!.cacheControl).toEqual(EPHEMERAL);
    expect(canonical.messages[0]!.content[0]).toEqual({ type: "text", text: "hi", cacheControl: EPHEMERAL });
    expect(canonical.messages[1]!.content[0]).toMatchObject({ type: "tool_call", cacheControl: EPHEMERAL });
    expect(canonical.messages[2]!.content[0]).toEqual({
      type: "tool_result",
      toolCallId: "toolu_1",
      content: [{ type: "text", text: "a", cacheControl: EPHEMERAL }],
      cacheControl: EPHEMERAL,
    });
    // Back to an Anthropic-compatible upstream where they were: six, so the last four (the longest prefixes) stay.
    const body: any = fromCanonical(canonical, "claude-x");
    expect(breakpoints(body).map(([where]) => where)).toEqual([
      "messages.0.content.0",
      "messages.1.content.0",
      "messages.2.content.0.content.0",
      "messages.2.content.0",
    ]);
  });

  it("refuses a malformed cache_control, naming the path in Anthropic's words", () => {
    try {
      toCanonical({ model: "c", max_tokens: 1, messages: [{ role: "user", content: [{ type: "text", text: "x", cache_control: { type: "ephemeral", ttl: "2h" } }] }] });
      throw new Error("accepted");
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidRequestError);
      expect((error as InvalidRequestError).param).toBe("messages.0.content.0.cache_control");
      expect((error as InvalidRequestError).message).toStartWith("messages.0.content.0.cache_control: must be");
    }
  });
});

describe("automatic breakpoints (translated routes into Anthropic)", () => {
  const long = "x".repeat(1024 * 4);

  it("places one at the end of the system prefix and one on the last user turn once the prefix is long enough", () => {
    const body: any = fromCanonical(
      request({
        system: long,
        tools: [{ name: "ls", parameters: {} }],
        messages: [
          { role: "user", content: [{ type: "text", text: "first" }] },
          { role: "assistant", content: [{ type: "text", text: "ok" }] },
          { role: "user", content: [{ type: "text", text: "second" }] },
        ],
      }),
      "claude-sonnet",
    );
    expect(addAutomaticBreakpoints(body, 1024)).toBe(2);
    expect(body.system).toEqual([{ type: "text", text: long, cache_control: EPHEMERAL }]);
    expect(body.tools[0].cache_control).toBeUndefined();
    expect(breakpoints(body).map(([where]) => where)).toEqual(["system.0", "messages.2.content.0"]);
  });

  it("uses the last tool when there is no system prompt, and string user content becomes a block", () => {
    const body: any = { tools: [{ name: "a", input_schema: {} }, { name: "b", description: long, input_schema: {} }], messages: [{ role: "user", content: "go" }] };
    expect(addAutomaticBreakpoints(body, 1024)).toBe(2);
    expect(body.tools[1].cache_control).toEqual(EPHEMERAL);
    expect(body.messages[0].content).toEqual([{ type: "text", text: "go", cache_control: EPHEMERAL }]);
  });

  it("adds none below the minimum, only the turn's when the conversation reaches it", () => {
    const short: any = { system: "short", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }] };
    expect(addAutomaticBreakpoints(short, 1024)).toBe(0);
    expect(breakpoints(short)).toEqual([]);
    const conversation: any = { system: "short", messages: [{ role: "user", content: [{ type: "text", text: long }] }, { role: "assistant", content: [{ type: "text", text: "ok" }] }] };
    expect(addAutomaticBreakpoints(conversation, 1024)).toBe(1);
    expect(conversation.system).toBe("short");
    expect(breakpoints(conversation).map(([where]) => where)).toEqual(["messages.0.content.0"]);
  });

  it("respects Haiku's larger minimum: 1024 tokens of prefix are not enough there", () => {
    expect(minimumCacheableTokens("claude-haiku-4-5")).toBe(2048);
    expect(minimumCacheableTokens("claude-sonnet-5-5")).toBe(1024);
    const body: any = { system: long, messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }] };
    expect(addAutomaticBreakpoints(body, minimumCacheableTokens("claude-haiku-4-5"))).toBe(0);
  });

  it("adds nothing when the client placed any breakpoint of its own", () => {
    const body: any = { system: long, messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: HOUR }] }] };
    expect(addAutomaticBreakpoints(body, 1024)).toBe(0);
    expect(body.system).toBe(long);
    expect(breakpoints(body)).toEqual([["messages.0.content.0", HOUR]]);
  });
});
