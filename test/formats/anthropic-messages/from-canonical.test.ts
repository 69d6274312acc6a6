import { describe, expect, it } from "bun:test";
import type { CanonicalChatRequest } from "../../../src/core/canonical.ts";
import { messagesTranslation } from "../../../src/formats/anthropic-messages/translation/index.ts";
import { fromAnthropicToolId } from "../../../src/formats/anthropic-messages/ids.ts";
import { validateAnthropicBody } from "../../fake-upstream/anthropic.ts";

const fromCanonical = (request: Partial<CanonicalChatRequest>, model = "claude-sonnet-5-5") =>
  messagesTranslation.fromCanonical({ model: "client", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: false, ...request }, model) as any;

describe("anthropic-messages fromCanonical (another client format on an Anthropic upstream)", () => {
  it("builds a body Anthropic accepts: max_tokens always set, system hoisted, flat tools, tool_choice, stop as an array", () => {
    const body = fromCanonical({
      system: "be brief",
      maxOutputTokens: 200,
      stop: ["END"],
      tools: [{ name: "f", description: "d", parameters: { type: "object", properties: {} }, strict: true }],
      toolChoice: { type: "tool", name: "f" },
      parallelToolCalls: false,
      user: "u-1",
      stream: true,
    });
    expect(body).toEqual({
      model: "claude-sonnet-5-5",
      max_tokens: 200,
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      system: "be brief",
      tools: [{ name: "f", description: "d", input_schema: { type: "object", properties: {} } }],
      tool_choice: { type: "tool", name: "f", disable_parallel_tool_use: true },
      stop_sequences: ["END"],
      metadata: { user_id: "u-1" },
      stream: true,
    });
    expect(validateAnthropicBody(body)).toBeNull();
    expect(fromCanonical({}).max_tokens).toBe(8192);
  });

  it("never sends temperature and top_p together and clamps temperature to Anthropic's 0..1", () => {
    expect(fromCanonical({ temperature: 1.7, topP: 0.5 })).toMatchObject({ temperature: 1 });
    expect(fromCanonical({ temperature: 1.7, topP: 0.5 }).top_p).toBeUndefined();
    expect(fromCanonical({ topP: 0.5 }).top_p).toBe(0.5);
  });

  it("turns an effort into a thinking budget below max_tokens, without sampling knobs or forced tools", () => {
    const body = fromCanonical({ reasoning: { effort: "high" }, maxOutputTokens: 10_000, temperature: 0.2, topK: 3, toolChoice: { type: "required" }, tools: [{ name: "f", parameters: {} }] });
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 9999 });
    expect(body.temperature).toBeUndefined();
    expect(body.top_k).toBeUndefined();
    expect(body.tool_choice).toEqual({ type: "auto" });
    expect(validateAnthropicBody(body)).toBeNull();
    expect(fromCanonical({ reasoning: { effort: "low" }, maxOutputTokens: 1000 }).thinking).toBeUndefined();
    expect(fromCanonical({ reasoning: { effort: "none" } }).thinking).toBeUndefined();
    expect(fromCanonical({ reasoning: { budgetTokens: 2048 } })).toMatchObject({ thinking: { type: "enabled", budget_tokens: 2048 }, max_tokens: 8192 + 2048 });
  });

  it("writes history Anthropic accepts: results first and paired, ids valid, empty text dropped, orphans as text", () => {
    const body = fromCanonical({
      messages: [
        { role: "user", content: [{ type: "text", text: "do two things" }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "" },
            { type: "tool_call", id: "Bash:0", name: "bash", arguments: '{"cmd":"ls"}' },
            { type: "tool_call", id: "call_2", name: "read", arguments: "" },
          ],
        },
        { role: "user", content: [{ type: "tool_result", toolCallId: "Bash:0", content: [{ type: "text", text: "a.txt" }] }] },
        { role: "user", content: [{ type: "text", text: "and?" }, { type: "tool_result", toolCallId: "ghost", content: [{ type: "text", text: "boo" }] }] },
      ],
    });
    expect(validateAnthropicBody(body)).toBeNull();
    const [, assistant, user] = body.messages;
    expect(assistant.content).toEqual([
      { type: "tool_use", id: assistant.content[0].id, name: "bash", input: { cmd: "ls" } },
      { type: "tool_use", id: "call_2", name: "read", input: {} },
    ]);
    expect(fromAnthropicToolId(assistant.content[0].id)).toBe("Bash:0");
    expect(user.content.map((block: any) => block.type)).toEqual(["tool_result", "tool_result", "text", "text"]);
    expect(user.content[0]).toEqual({ type: "tool_result", tool_use_id: "call_2", content: "No result was provided for this tool call.", is_error: true });
    expect(user.content[1]).toEqual({ type: "tool_result", tool_use_id: assistant.content[0].id, content: [{ type: "text", text: "a.txt" }] });
    expect(user.content[3]).toEqual({ type: "text", text: "Result of tool call ghost: boo" });
  });

  it("replays thinking only to the Anthropic model that signed it, byte for byte", () => {
    const reasoning = (origin: { format: string; model: string }) => ({ type: "reasoning" as const, text: "t", signature: "SIG", origin });
    const request: Partial<CanonicalChatRequest> = {
      messages: [
        { role: "user", content: [{ type: "text", text: "q" }] },
        {
          role: "assistant",
          content: [
            reasoning({ format: "anthropic-messages", model: "claude-sonnet-5-5" }),
            reasoning({ format: "anthropic-messages", model: "claude-opus-5-5" }),
            reasoning({ format: "gemini", model: "claude-sonnet-5-5" }),
            { type: "reasoning", text: "unsigned" },
            { type: "reasoning", text: "", redactedData: "RD", origin: { format: "anthropic-messages", model: "claude-sonnet-5-5" } },
            { type: "text", text: "a" },
          ],
        },
        { role: "user", content: [{ type: "text", text: "next" }] },
      ],
    };
    expect(fromCanonical(request).messages[1].content).toEqual([
      { type: "thinking", thinking: "t", signature: "SIG" },
      { type: "redacted_thinking", data: "RD" },
      { type: "text", text: "a" },
    ]);
    expect(fromCanonical(request, "claude-haiku-5-5").messages[1].content).toEqual([{ type: "text", text: "a" }]);
  });

  it("goes without thinking when the tool loop's assistant turn has no thinking block to lead with", () => {
    const body = fromCanonical({
      reasoning: { effort: "medium" },
      maxOutputTokens: 20_000,
      messages: [
        { role: "user", content: [{ type: "text", text: "q" }] },
        { role: "assistant", content: [{ type: "tool_call", id: "call_1", name: "f", arguments: "{}" }] },
        { role: "user", content: [{ type: "tool_result", toolCallId: "call_1", content: [{ type: "text", text: "r" }] }] },
      ],
    });
    expect(body.thinking).toBeUndefined();
    expect(validateAnthropicBody(body)).toBeNull();
  });

  it("maps images (data URLs to base64) and JSON output", () => {
    const body = fromCanonical({
      responseFormat: { type: "json_schema", name: "x", schema: { type: "object" } },
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { kind: "url", url: "data:image/png;base64,AAAA" } },
            { type: "image", source: { kind: "url", url: "https://x/y.jpg" } },
            { type: "text", text: "describe" },
          ],
        },
      ],
    });
    expect(body.messages[0].content.slice(0, 2)).toEqual([
      { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
      { type: "image", source: { type: "url", url: "https://x/y.jpg" } },
    ]);
    expect(body.output_config).toEqual({ format: { type: "json_schema", schema: { type: "object" } } });
    expect(fromCanonical({ system: "s", responseFormat: { type: "json_object" } }).system).toBe("s\n\nRespond with a single valid JSON object and nothing else.");
  });
});
