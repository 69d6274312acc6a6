import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import type { Json } from "./helpers.ts";

const toCanonical = (body: Json) => {
  openaiResponses.decodeRequest(body);
  return openaiResponses.translation!.toCanonical(body);
};

/**
 * A Codex turn as it goes on the wire (docs/wire-formats.md#what-codex-needs): full history, tool loop, reasoning
 * with encrypted content.
 */
const CODEX_TURN: Json = {
  model: "deepseek-flash",
  instructions: "You are Codex, a coding agent.",
  input: [
    { type: "message", role: "developer", content: [{ type: "input_text", text: "<permissions>workspace-write</permissions>" }] },
    { type: "message", role: "user", content: [{ type: "input_text", text: "<environment_context>cwd=/repo</environment_context>" }] },
    { type: "message", role: "user", content: [{ type: "input_text", text: "List the files." }] },
    { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Use ls." }], encrypted_content: "gAAAA-openai-blob" },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: "Listing." }] },
    { type: "function_call", id: "fc_1", call_id: "call_1", name: "shell", arguments: '{"command":["ls"]}' },
    { type: "function_call", id: "fc_2", call_id: "call_2", name: "shell", arguments: "" },
    { type: "function_call_output", call_id: "call_1", output: "a.txt\nb.txt" },
    { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "ok" }] },
    { type: "message", role: "user", content: "Thanks." },
  ],
  tools: [
    { type: "function", name: "shell", description: "Run a command", parameters: { type: "object", properties: { command: { type: "array" } } }, strict: false },
    { type: "custom", name: "apply_patch", description: "Patch files", format: { type: "grammar", syntax: "lark", definition: "start: begin_patch" } },
    { type: "web_search" },
  ],
  tool_choice: "auto",
  parallel_tool_calls: true,
  reasoning: { effort: "high", summary: "auto" },
  include: ["reasoning.encrypted_content"],
  store: false,
  stream: true,
  max_output_tokens: 2000,
  text: { verbosity: "low" },
  prompt_cache_key: "thread-9",
};

describe("openai-responses toCanonical", () => {
  it("hoists instructions and developer messages into system, in order", () => {
    expect(toCanonical(CODEX_TURN).system).toBe("You are Codex, a coding agent.\n\n<permissions>workspace-write</permissions>");
  });

  it("groups reasoning, assistant text and consecutive function calls into one assistant message, and the outputs into one turn of tool results", () => {
    const canonical = toCanonical(CODEX_TURN);
    expect(canonical.messages.map((message) => message.role)).toEqual(["user", "user", "assistant", "user", "user"]);
    const [, , assistant, results, last] = canonical.messages;
    expect(assistant!.content).toEqual([
      { type: "reasoning", text: "Use ls.", signature: "gAAAA-openai-blob", origin: { format: "openai-responses", model: "deepseek-flash" } },
      { type: "text", text: "Listing." },
      { type: "tool_call", id: "call_1", name: "shell", arguments: '{"command":["ls"]}' },
      { type: "tool_call", id: "call_2", name: "shell", arguments: "{}" },
    ]);
    expect(results!.content).toEqual([
      { type: "tool_result", toolCallId: "call_1", content: [{ type: "text", text: "a.txt\nb.txt" }] },
      { type: "tool_result", toolCallId: "call_2", content: [{ type: "text", text: "ok" }] },
    ]);
    expect(last!.content).toEqual([{ type: "text", text: "Thanks." }]);
  });

  it("pairs calls and results by call_id, never by the fc_ item id", () => {
    const canonical = toCanonical(CODEX_TURN);
    const ids = canonical.messages.flatMap((message) => message.content).flatMap((part) => (part.type === "tool_call" ? [part.id] : part.type === "tool_result" ? [part.toolCallId] : []));
    expect(ids).toEqual(["call_1", "call_2", "call_1", "call_2"]);
  });

  it("maps tools flat to canonical, wraps custom tools as {input: string} and leaves hosted tools out", () => {
    const canonical = toCanonical(CODEX_TURN);
    expect(canonical.tools!.map((tool) => tool.name)).toEqual(["shell", "apply_patch"]);
    expect(canonical.tools![0]).toEqual({ name: "shell", description: "Run a command", parameters: CODEX_TURN.tools[0].parameters, strict: false });
    const patch = canonical.tools![1]!.parameters as Json;
    expect(patch.required).toEqual(["input"]);
    expect(patch.properties.input.type).toBe("string");
    expect(patch.properties.input.description).toContain("start: begin_patch");
    expect(canonical).toMatchObject({ toolChoice: { type: "auto" }, parallelToolCalls: true, maxOutputTokens: 2000, reasoning: { effort: "high" }, stream: true });
  });

  it("reads a custom tool call and its output back as a wrapped call and a tool result", () => {
    const canonical = toCanonical({
      model: "m",
      input: [
        { type: "custom_tool_call", call_id: "call_p", name: "apply_patch", input: "*** Begin Patch\n*** End Patch" },
        { type: "custom_tool_call_output", call_id: "call_p", output: "Done!" },
      ],
    });
    expect(canonical.messages[0]!.content).toEqual([{ type: "tool_call", id: "call_p", name: "apply_patch", arguments: JSON.stringify({ input: "*** Begin Patch\n*** End Patch" }) }]);
    expect(canonical.messages[1]!.content).toEqual([{ type: "tool_result", toolCallId: "call_p", content: [{ type: "text", text: "Done!" }] }]);
  });

  it("flattens namespaced tools and their calls to one name", () => {
    const canonical = toCanonical({
      model: "m",
      input: [{ type: "function_call", call_id: "c", name: "lookup", namespace: "crm", arguments: "{}" }],
      tools: [{ type: "namespace", name: "crm", description: "CRM", tools: [{ type: "function", name: "lookup", parameters: { type: "object" } }] }],
      tool_choice: { type: "function", name: "lookup", namespace: "crm" },
    });
    expect(canonical.tools!.map((tool) => tool.name)).toEqual(["crm__lookup"]);
    expect(canonical.messages[0]!.content[0]).toMatchObject({ name: "crm__lookup" });
    expect(canonical.toolChoice).toEqual({ type: "tool", name: "crm__lookup" });
  });

  it("turns the input string, images and a flat json_schema format into canonical parts", () => {
    expect(toCanonical({ model: "m", input: "hello" }).messages).toEqual([{ role: "user", content: [{ type: "text", text: "hello" }] }]);
    const canonical = toCanonical({
      model: "m",
      input: [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,QUJD", detail: "high" }, { type: "input_image", image_url: "https://x/y.png" }] }],
      text: { format: { type: "json_schema", name: "codex_output_schema", schema: { type: "object" }, strict: true } },
    });
    expect(canonical.messages[0]!.content).toEqual([
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "QUJD" } },
      { type: "image", source: { kind: "url", url: "https://x/y.png" } },
    ]);
    expect(canonical.responseFormat).toEqual({ type: "json_schema", name: "codex_output_schema", schema: { type: "object" }, strict: true });
  });

  it("drops reasoning with nothing in it and keeps a summary-only item as plain reasoning text", () => {
    const canonical = toCanonical({
      model: "m",
      input: [
        { type: "reasoning", id: "rs_0", summary: [] },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "a" }, { type: "summary_text", text: "b" }] },
      ],
    });
    expect(canonical.messages).toEqual([{ role: "assistant", content: [{ type: "reasoning", text: "a\n\nb" }] }]);
  });

  it("refuses what only OpenAI's servers can resolve, naming the item", () => {
    const refuse = (input: Json[]) => {
      try {
        toCanonical({ model: "deepseek-flash", input });
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidRequestError);
        return error as InvalidRequestError;
      }
      throw new Error("accepted");
    };
    expect(refuse([{ type: "item_reference", id: "msg_1" }]).param).toBe("input.0");
    const hosted = refuse([{ role: "user", content: "x" }, { type: "web_search_call", id: "ws", status: "completed" }]);
    expect(hosted.param).toBe("input.1.type");
    expect(hosted.message).toContain("deepseek-flash");
    expect(refuse([{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }]).param).toBe("input.0.content.0.type");
    expect(refuse([{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }]).param).toBe("input.0.content.0.image_url");
  });
});
