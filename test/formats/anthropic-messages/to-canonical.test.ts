import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { messagesTranslation } from "../../../src/formats/anthropic-messages/translation/index.ts";
import { toAnthropicToolId } from "../../../src/formats/anthropic-messages/ids.ts";
import { wrapForeignSignature } from "../../../src/formats/anthropic-messages/signature.ts";

const toCanonical = messagesTranslation.toCanonical;

describe("anthropic-messages toCanonical (a Messages client on another family)", () => {
  it("hoists system blocks, maps sampling, stop, tools, tool_choice, parallelism, thinking and JSON output", () => {
    const canonical = toCanonical({
      model: "gpt-6-luna",
      max_tokens: 300,
      stream: true,
      system: [{ type: "text", text: "one" }, { type: "text", text: "two" }],
      messages: [{ role: "user", content: "hi" }],
      temperature: 0.3,
      top_p: 0.9,
      top_k: 5,
      stop_sequences: ["END"],
      tools: [{ name: "f", description: "does f", input_schema: { type: "object", properties: { a: { type: "string" } } } }, { name: "g" }],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      thinking: { type: "enabled", budget_tokens: 4096 },
      output_config: { format: { type: "json_schema", schema: { type: "object" } } },
      metadata: { user_id: "u-1" },
    });
    expect(canonical).toEqual({
      model: "gpt-6-luna",
      system: "one\n\ntwo",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      maxOutputTokens: 300,
      stream: true,
      tools: [
        { name: "f", description: "does f", parameters: { type: "object", properties: { a: { type: "string" } } } },
        { name: "g", parameters: { type: "object", properties: {} } },
      ],
      toolChoice: { type: "required" },
      parallelToolCalls: false,
      temperature: 0.3,
      topP: 0.9,
      topK: 5,
      stop: ["END"],
      reasoning: { budgetTokens: 4096 },
      responseFormat: { type: "json_schema", name: "output", schema: { type: "object" } },
      user: "u-1",
    });
  });

  it("keeps tool calls and results paired, restoring ids the gateway made Anthropic-valid", () => {
    const wrapped = toAnthropicToolId("Bash:0");
    const canonical = toCanonical({
      model: "m",
      max_tokens: 10,
      messages: [
        { role: "user", content: "run it" },
        { role: "assistant", content: [{ type: "text", text: "ok" }, { type: "tool_use", id: wrapped, name: "bash", input: { cmd: "ls" } }] },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: wrapped, is_error: true, content: [{ type: "text", text: "denied" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "AA" } }] },
            { type: "text", text: "try again" },
          ],
        },
      ],
    });
    expect(canonical.messages.slice(1)).toEqual([
      { role: "assistant", content: [{ type: "text", text: "ok" }, { type: "tool_call", id: "Bash:0", name: "bash", arguments: '{"cmd":"ls"}' }] },
      {
        role: "user",
        content: [
          { type: "tool_result", toolCallId: "Bash:0", isError: true, content: [{ type: "text", text: "denied" }, { type: "image", source: { kind: "base64", mediaType: "image/png", data: "AA" } }] },
          { type: "text", text: "try again" },
        ],
      },
    ]);
  });

  it("binds Anthropic thinking to its model, restores the origin of gateway-wrapped reasoning, and drops empty text", () => {
    const canonical = toCanonical({
      model: "claude-sonnet-5-5",
      max_tokens: 10,
      messages: [
        { role: "user", content: [{ type: "text", text: "" }, { type: "text", text: "q" }] },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "a", signature: "EqAnthropic" },
            { type: "thinking", thinking: "b", signature: wrapForeignSignature("gsig", { format: "gemini", model: "gemini-4-argon" }) },
            { type: "thinking", thinking: "c", signature: wrapForeignSignature(undefined, { format: "unknown", model: "deepseek-pro" }) },
            { type: "redacted_thinking", data: "RRR" },
            { type: "server_tool_use", id: "srv", name: "web_search", input: {} },
          ],
        },
      ],
    });
    expect(canonical.messages[0]!.content).toEqual([{ type: "text", text: "q" }]);
    expect(canonical.messages[1]!.content).toEqual([
      { type: "reasoning", text: "a", signature: "EqAnthropic", origin: { format: "anthropic-messages", model: "claude-sonnet-5-5" } },
      { type: "reasoning", text: "b", signature: "gsig", origin: { format: "gemini", model: "gemini-4-argon" } },
      { type: "reasoning", text: "c", origin: { format: "unknown", model: "deepseek-pro" } },
      { type: "reasoning", text: "", redactedData: "RRR", origin: { format: "anthropic-messages", model: "claude-sonnet-5-5" } },
    ]);
  });

  it("maps adaptive thinking and effort, and tool_choice tool/none", () => {
    const base = { model: "m", max_tokens: 10, messages: [{ role: "user", content: "x" }], tools: [{ name: "f" }] };
    expect(toCanonical({ ...base, thinking: { type: "adaptive" }, output_config: { effort: "high" } }).reasoning).toEqual({ effort: "high" });
    expect(toCanonical({ ...base, thinking: { type: "adaptive" } }).reasoning).toEqual({ effort: "medium" });
    expect(toCanonical({ ...base, thinking: { type: "disabled" }, output_config: { effort: "low" } }).reasoning).toBeUndefined();
    expect(toCanonical({ ...base, tool_choice: { type: "tool", name: "f" } }).toolChoice).toEqual({ type: "tool", name: "f" });
    expect(toCanonical({ ...base, tool_choice: { type: "none" } }).toolChoice).toEqual({ type: "none" });
  });

  it("turns plain-text documents into text and refuses what only Anthropic serves, naming the field", () => {
    const doc = toCanonical({ model: "m", max_tokens: 1, messages: [{ role: "user", content: [{ type: "document", title: "T", source: { type: "text", media_type: "text/plain", data: "body" } }] }] });
    expect(doc.messages[0]!.content).toEqual([{ type: "text", text: "T\n\nbody" }]);
    const refuse = (body: Record<string, unknown>) => {
      try {
        toCanonical(body);
      } catch (error) {
        return error as InvalidRequestError;
      }
      throw new Error("accepted");
    };
    const pdf = refuse({ model: "m", max_tokens: 1, messages: [{ role: "user", content: [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: "x" } }] }] });
    expect(pdf).toBeInstanceOf(InvalidRequestError);
    expect(pdf.param).toBe("messages.0.content.0");
    const server = refuse({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search_20250305", name: "web_search" }] });
    expect(server.message).toContain("web_search_20250305");
    expect(server.param).toBe("tools.0");
  });
});
