import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { openaiChatTranslation } from "../../../src/formats/openai-chat/translation/index.ts";

const { toCanonical } = openaiChatTranslation;

describe("openai-chat toCanonical", () => {
  it("hoists system and developer messages from anywhere in the conversation, in order", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
        { role: "developer", content: [{ type: "text", text: "Answer in French." }] },
        { role: "assistant", content: "Salut" },
        { role: "system", content: "No emoji." },
        { role: "user", content: "again" },
      ],
    });
    expect(canonical.system).toBe("Be brief.\n\nAnswer in French.\n\nNo emoji.");
    expect(canonical.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "hi" }] },
      { role: "assistant", content: [{ type: "text", text: "Salut" }] },
      { role: "user", content: [{ type: "text", text: "again" }] },
    ]);
  });

  it("folds consecutive tool messages and the user text after them into one user turn, tool results first", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [
        { role: "user", content: "weather in Paris and Rome?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
            { id: "call_b", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_a", content: "18C" },
        { role: "tool", tool_call_id: "call_b", content: [{ type: "text", text: "25C" }] },
        { role: "user", content: "and Oslo?" },
      ],
    });
    expect(canonical.messages).toHaveLength(3);
    expect(canonical.messages[1]!.content).toEqual([
      { type: "tool_call", id: "call_a", name: "weather", arguments: '{"city":"Paris"}' },
      { type: "tool_call", id: "call_b", name: "weather", arguments: '{"city":"Rome"}' },
    ]);
    expect(canonical.messages[2]).toEqual({
      role: "user",
      content: [
        { type: "tool_result", toolCallId: "call_a", content: [{ type: "text", text: "18C" }] },
        { type: "tool_result", toolCallId: "call_b", content: [{ type: "text", text: "25C" }] },
        { type: "text", text: "and Oslo?" },
      ],
    });
  });

  it("reads assistant reasoning_content first, with its origin, and turns empty tool arguments into {}", () => {
    const canonical = toCanonical({
      model: "deepseek-v4-pro",
      messages: [
        { role: "user", content: "list files" },
        { role: "assistant", reasoning_content: "I should call ls.", content: "Listing.", tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: "" } }] },
        { role: "tool", tool_call_id: "c1", content: "a.txt" },
      ],
    });
    expect(canonical.messages[1]!.content).toEqual([
      { type: "reasoning", text: "I should call ls.", origin: { format: "openai-chat", model: "deepseek-v4-pro" } },
      { type: "text", text: "Listing." },
      { type: "tool_call", id: "c1", name: "ls", arguments: "{}" },
    ]);
  });

  it("reads data-URL images as base64 with their media type and https images as URLs", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "compare" },
            { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=", detail: "high" } },
            { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
          ],
        },
      ],
    });
    expect(canonical.messages[0]!.content).toEqual([
      { type: "text", text: "compare" },
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { kind: "url", url: "https://example.com/cat.jpg" } },
    ]);
  });

  it("reads function tools, and custom tools as functions taking {input: string}", () => {
    const canonical = toCanonical({
      model: "m",
      messages: [
        { role: "user", content: "patch it" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "custom", custom: { name: "apply_patch", input: "*** Begin Patch" } }] },
        { role: "tool", tool_call_id: "c1", content: "done" },
      ],
      tools: [
        { type: "function", function: { name: "ls", description: "list", parameters: { type: "object", properties: { dir: { type: "string" } } }, strict: true } },
        { type: "function", function: { name: "now" } },
        { type: "custom", custom: { name: "apply_patch", description: "patch files", format: { type: "text" } } },
      ],
    });
    expect(canonical.tools).toEqual([
      { name: "ls", description: "list", parameters: { type: "object", properties: { dir: { type: "string" } } }, strict: true },
      { name: "now", parameters: { type: "object", properties: {} } },
      { name: "apply_patch", description: "patch files", parameters: { type: "object", properties: { input: { type: "string" } }, required: ["input"] } },
    ]);
    expect(canonical.messages[1]!.content).toEqual([{ type: "tool_call", id: "c1", name: "apply_patch", arguments: '{"input":"*** Begin Patch"}' }]);
  });

  it("reads tool_choice, parallel_tool_calls, limits, sampling, stop, response_format, reasoning_effort and user", () => {
    const base = { model: "m", messages: [{ role: "user", content: "x" }] };
    const canonical = toCanonical({
      ...base,
      stream: true,
      tool_choice: { type: "function", function: { name: "ls" } },
      parallel_tool_calls: false,
      max_tokens: 50,
      max_completion_tokens: 100,
      temperature: 0.2,
      top_p: 0.9,
      stop: "END",
      response_format: { type: "json_schema", json_schema: { name: "answer", schema: { type: "object" }, strict: true } },
      reasoning_effort: "high",
      user: "u-1",
    });
    expect(canonical).toMatchObject({
      model: "m",
      stream: true,
      toolChoice: { type: "tool", name: "ls" },
      parallelToolCalls: false,
      maxOutputTokens: 100,
      temperature: 0.2,
      topP: 0.9,
      stop: ["END"],
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true },
      reasoning: { effort: "high" },
      user: "u-1",
    });
    expect(toCanonical({ ...base, max_tokens: 50, tool_choice: "required", response_format: { type: "json_object" } })).toMatchObject({
      maxOutputTokens: 50,
      toolChoice: { type: "required" },
      responseFormat: { type: "json_object" },
      stream: false,
    });
    expect(toCanonical({ ...base, stop: ["a", "b"], response_format: { type: "text" } })).toMatchObject({ stop: ["a", "b"] });
    expect(toCanonical({ ...base, response_format: { type: "text" } }).responseFormat).toBeUndefined();
  });

  it("refuses content it cannot carry, naming the field", () => {
    const audio = () =>
      toCanonical({ model: "m", messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "x", format: "wav" } }] }] });
    expect(audio).toThrow(InvalidRequestError);
    expect(audio).toThrow("messages.0.content.0.type");
    const noId = () => toCanonical({ model: "m", messages: [{ role: "tool", content: "x" }] });
    expect(noId).toThrow("messages.0.tool_call_id");
  });
});
