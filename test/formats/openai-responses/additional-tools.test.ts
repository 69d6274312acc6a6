import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import type { CanonicalResponse } from "../../../src/core/canonical.ts";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";
import { anthropicMessages } from "../../../src/formats/anthropic-messages/index.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import { responsesCtx, type Json } from "./helpers.ts";

const translation = openaiResponses.translation!;
const toCanonical = (body: Json) => {
  openaiResponses.decodeRequest(body);
  return translation.toCanonical(body);
};

/**
 * A Codex 0.169 turn for an OpenAI model name (captured from `codex exec` with `model = "gpt-6-luna"`, trimmed):
 * no top-level `tools`; input.0 is an `additional_tools` item (with an id and role developer) holding namespaces,
 * among them the freeform code-mode `exec` tool.
 */
const EXEC_GRAMMAR = "start: pragma_source | plain_source\nplain_source: SOURCE\nSOURCE: /[\\s\\S]+/";
const WAIT = {
  type: "object",
  properties: { cell_id: { type: "string" }, yield_time_ms: { type: "number" } },
  required: ["cell_id"],
  additionalProperties: false,
};
const SLEEP = { type: "object", properties: { duration_ms: { type: "number" } }, required: ["duration_ms"], additionalProperties: false };
const CODEX_OPENAI_TURN: Json = {
  model: "gpt-6-luna",
  input: [
    {
      type: "additional_tools",
      id: "at_01a216ca-03ea-7c72-8cfd-0dd576cca248",
      role: "developer",
      tools: [
        {
          type: "namespace",
          name: "functions",
          description: "",
          tools: [
            { type: "custom", name: "exec", description: "Run JavaScript code", format: { type: "grammar", syntax: "lark", definition: EXEC_GRAMMAR } },
            { type: "function", name: "wait", description: "Wait on an exec cell", strict: false, parameters: WAIT },
          ],
        },
        { type: "namespace", name: "clock", description: "Time", tools: [{ type: "function", name: "sleep", strict: false, parameters: SLEEP }] },
      ],
    },
    { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex." }] },
    { type: "message", role: "user", content: [{ type: "input_text", text: "Say hello." }] },
  ],
  tools: null,
  tool_choice: "auto",
  parallel_tool_calls: false,
  reasoning: { effort: "medium", context: "all_turns" },
  store: false,
  stream: true,
  include: ["reasoning.encrypted_content"],
};

describe("openai-responses additional_tools input items (Codex, OpenAI model names)", () => {
  it("reads the item's tools as the request's tools, namespaces flattened, custom tools wrapped", () => {
    const canonical = toCanonical(CODEX_OPENAI_TURN);
    expect(canonical.tools!.map((tool) => tool.name)).toEqual(["functions__exec", "functions__wait", "clock__sleep"]);
    expect(canonical.tools![1]).toEqual({ name: "functions__wait", description: "Wait on an exec cell", parameters: WAIT, strict: false });
    const exec = canonical.tools![0]!.parameters as Json;
    expect(exec.required).toEqual(["input"]);
    expect(exec.properties.input.description).toContain("plain_source: SOURCE");
    expect(canonical.toolChoice).toEqual({ type: "auto" });
    expect(canonical.parallelToolCalls).toBe(false);
  });

  it("adds no message for the item itself", () => {
    const canonical = toCanonical(CODEX_OPENAI_TURN);
    expect(canonical.system).toBe("You are Codex.");
    expect(canonical.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Say hello." }] }]);
  });

  it("merges with top-level tools and other additional_tools items, the first declaration of a name winning", () => {
    const body: Json = {
      ...CODEX_OPENAI_TURN,
      tools: [
        { type: "function", name: "sleep", parameters: { type: "object" } },
        { type: "namespace", name: "clock", tools: [{ type: "function", name: "sleep", description: "top-level wins", parameters: SLEEP }] },
        { type: "web_search" },
      ],
      input: [
        ...CODEX_OPENAI_TURN.input,
        { type: "additional_tools", tools: [{ type: "function", name: "view_image", parameters: { type: "object", properties: { path: { type: "string" } } } }] },
        { type: "additional_tools", tools: [{ type: "namespace", name: "functions", tools: [{ type: "function", name: "wait", description: "later copy" }] }] },
      ],
    };
    const tools = toCanonical(body).tools!;
    expect(tools.map((tool) => tool.name)).toEqual(["sleep", "clock__sleep", "functions__exec", "functions__wait", "view_image"]);
    expect(tools.find((tool) => tool.name === "clock__sleep")!.description).toBe("top-level wins");
    expect(tools.find((tool) => tool.name === "functions__wait")!.description).toBe("Wait on an exec cell");
  });

  it("declares tools for the capability check even with no top-level tools", () => {
    expect(openaiResponses.decodeRequest(CODEX_OPENAI_TURN).uses!.tools).toBe(true);
    expect(openaiResponses.decodeRequest({ ...CODEX_OPENAI_TURN, input: CODEX_OPENAI_TURN.input.slice(1) }).uses!.tools).toBe(false);
  });

  it("refuses an additional_tools item without a tools array, naming the field", () => {
    const bad = { ...CODEX_OPENAI_TURN, input: [{ type: "additional_tools", role: "developer" }, ...CODEX_OPENAI_TURN.input.slice(1)] };
    let caught: unknown;
    try {
      openaiResponses.decodeRequest(bad);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidRequestError);
    expect((caught as InvalidRequestError).message).toContain("input.0.tools");
  });

  it("goes to Chat as function tools and to Messages as tools", () => {
    const canonical = toCanonical(CODEX_OPENAI_TURN);
    const chat = openaiChat.translation!.fromCanonical(canonical, "up") as Json;
    expect(chat.tools.map((tool: Json) => tool.function.name)).toEqual(["functions__exec", "functions__wait", "clock__sleep"]);
    expect(chat.tools[1].function.parameters).toEqual(WAIT);
    const messages = anthropicMessages.translation!.fromCanonical(canonical, "up") as Json;
    expect(messages.tools.map((tool: Json) => tool.name)).toEqual(["functions__exec", "functions__wait", "clock__sleep"]);
  });

  it("answers a call of a tool declared there in the shape and namespace the client declared", () => {
    const response: CanonicalResponse = {
      id: "x",
      model: "up",
      content: [
        { type: "tool_call", id: "call_e", name: "functions__exec", arguments: JSON.stringify({ input: 'text("hi")' }) },
        { type: "tool_call", id: "call_s", name: "clock__sleep", arguments: '{"duration_ms":1}' },
      ],
      finishReason: "tool_calls",
      usage: { inputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 0 },
    };
    expect((translation.encodeResponse(response, responsesCtx(CODEX_OPENAI_TURN)) as Json).output).toEqual([
      { type: "custom_tool_call", id: expect.stringMatching(/^ctc_/), status: "completed", call_id: "call_e", name: "exec", namespace: "functions", input: 'text("hi")' },
      { type: "function_call", id: expect.stringMatching(/^fc_/), status: "completed", call_id: "call_s", name: "sleep", namespace: "clock", arguments: '{"duration_ms":1}' },
    ]);
  });
});
