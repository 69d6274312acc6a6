import { describe, expect, it } from "bun:test";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import { sandboxReply } from "../../../src/plugins/sandbox/reply.ts";
import { SANDBOX_COMMAND } from "../../../src/plugins/sandbox/tool-call.ts";
import { violations } from "./schema-check.ts";
import claudeCodeTools from "./fixtures/claude-code-2.1.197-tools.json";
import codexTools from "./fixtures/codex-0.169-tools.json";

type Json = Record<string, any>;

const ID = "chatcmpl-sandbox-0123456789abcdef01234567";
const user = (content: string) => ({ role: "user", content });
const fn = (name: string, parameters: Json, description?: string) => ({ type: "function", function: { name, parameters, ...(description ? { description } : {}) } });
const weather = fn("get_weather", { type: "object", properties: { city: { type: "string" }, unit: { enum: ["c", "f"] } }, required: ["city", "unit"] });

/** A Codex Responses body with the captured tools, as the gateway sends it to the sandbox (Chat). */
function codexChatBody(model: string, tools: Json): Json {
  const body: Json = { model, input: [user("Run something.")], store: false, stream: true };
  if (Array.isArray(tools)) body.tools = tools;
  else body.input = [tools, ...body.input];
  openaiResponses.decodeRequest(body);
  return openaiChat.translation!.fromCanonical(openaiResponses.translation!.toCanonical(body), model);
}

/** The call the reply makes, its arguments parsed and checked against the offered tool's schema. */
function callOf(body: Json): { name: string; args: Json } {
  const reply = sandboxReply(body as never, ID);
  expect(reply.text).toBeNull();
  const { name, arguments: raw } = reply.toolCall!;
  const args = JSON.parse(raw);
  const tool = body.tools.find((candidate: Json) => candidate.function.name === name);
  expect(violations(tool.function.parameters, args)).toEqual([]);
  return { name, args };
}

describe("sandbox reply", () => {
  it("runs Claude Code's Bash tool with a harmless echo, not its first tool (Agent)", () => {
    const tools = claudeCodeTools.map((tool) => fn(tool.name, tool.input_schema));
    expect(tools[0]!.function.name).toBe("Agent");
    expect(callOf({ model: "m", messages: [user("say hi")], tools })).toEqual({
      name: "Bash",
      args: { command: SANDBOX_COMMAND, description: "Print the sandbox marker" },
    });
  });

  it("runs Codex's exec_command for a non-OpenAI model (top-level tools)", () => {
    const body = codexChatBody("deepseek-flash", codexTools['tools (model = "deepseek-flash")']);
    expect(callOf(body)).toEqual({ name: "exec_command", args: { cmd: SANDBOX_COMMAND } });
  });

  it("runs the shell through Codex's code-mode exec tool (JavaScript) for an OpenAI model (additional_tools)", () => {
    const body = codexChatBody("gpt-6-luna", codexTools['additional_tools_item (model = "gpt-6-luna")']);
    const { name, args } = callOf(body);
    expect(name).toBe("functions__exec");
    expect(args.input).toBe(`const result = await tools.exec_command({ cmd: ${JSON.stringify(SANDBOX_COMMAND)} });\ntext(result.output);`);
  });

  it("fills the first JSON tool's schema when no shell is offered, passing over freeform (custom) tools", () => {
    const body = codexChatBody("m", [
      { type: "custom", name: "apply_patch", description: "Patch files", format: { type: "grammar", syntax: "lark", definition: "start: x" } },
      { type: "function", name: "get_weather", parameters: weather.function.parameters },
    ]);
    expect(callOf(body)).toEqual({ name: "get_weather", args: { city: "sandbox", unit: "c" } });
    expect(callOf({ model: "m", messages: [user("hi")], tools: [weather, fn("Bash", { type: "object", properties: { command: { type: "string" } } })], tool_choice: { type: "function", function: { name: "get_weather" } } }).name).toBe(
      "get_weather",
    );
  });

  it("gives a shell tool whose command is an argv array an array", () => {
    const shell = fn("shell", { type: "object", properties: { command: { type: "array", items: { type: "string" } }, workdir: { type: "string" } }, required: ["command"] });
    expect(callOf({ model: "m", messages: [user("hi")], tools: [weather, shell] }).args).toEqual({ command: ["bash", "-lc", SANDBOX_COMMAND] });
  });

  it("answers text, echoing the tool's output, once a tool result is back (even with a user note after it)", () => {
    const messages = [
      user("run it"),
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "sandbox-tool-42" }] },
      user("<system-reminder>keep going</system-reminder>"),
    ];
    const reply = sandboxReply({ model: "m", messages, tools: [weather] } as never, ID);
    expect(reply.toolCall).toBeNull();
    expect(reply.text).toBe("Sandbox reply from m. The tool returned: sandbox-tool-42");
  });

  it("answers text with tool_choice none or without tools", () => {
    expect(sandboxReply({ model: "m", messages: [user("hi")], tools: [weather], tool_choice: "none" } as never, ID).text).toBe("Sandbox reply from m. You said: hi");
    expect(sandboxReply({ model: "m", messages: [user("hi")] } as never, ID).text).toBe("Sandbox reply from m. You said: hi");
  });

  it("answers JSON valid against a json_schema response_format, and a JSON object for json_object", () => {
    const schema = { type: "object", properties: { title: { type: "string" }, tags: { type: "array", items: { type: "string" }, minItems: 1 } }, required: ["title", "tags"], additionalProperties: false };
    const structured = sandboxReply({ model: "m", messages: [user("title?")], response_format: { type: "json_schema", json_schema: { name: "t", schema } } } as never, ID);
    expect(violations(schema, JSON.parse(structured.text!))).toEqual([]);
    const object = sandboxReply({ model: "m", messages: [user("json please")], response_format: { type: "json_object" } } as never, ID);
    expect(JSON.parse(object.text!)).toEqual({ reply: "Sandbox reply from m. You said: json please" });
  });
});
