import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";

const decode = (body: unknown) => openaiResponses.decodeRequest(body);

function refusal(body: unknown): InvalidRequestError {
  try {
    decode(body);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return error as InvalidRequestError;
  }
  throw new Error("decodeRequest accepted the body");
}

describe("openai-responses decodeRequest", () => {
  it("summarizes a Codex-style request: stream, output cap, usage always reported, features used", () => {
    const summary = decode({
      model: "gpt-6-luna",
      instructions: "You are Codex.",
      input: [
        { type: "message", role: "developer", content: [{ type: "input_text", text: "sandbox: workspace-write" }] },
        { role: "user", content: [{ type: "input_text", text: "look" }, { type: "input_image", image_url: "data:image/png;base64,AAAA" }] },
      ],
      tools: [{ type: "function", name: "shell", parameters: { type: "object", properties: {} }, strict: false }],
      tool_choice: "auto",
      parallel_tool_calls: false,
      reasoning: { effort: "medium", summary: "auto" },
      include: ["reasoning.encrypted_content"],
      store: false,
      stream: true,
      prompt_cache_key: "thread-1",
      max_output_tokens: 4096,
    });
    expect(summary).toEqual({
      model: "gpt-6-luna",
      stream: true,
      maxOutputTokens: 4096,
      clientWantsStreamUsage: true,
      // Codex sends a reasoning effort on every turn: a hint, never a capability requirement.
      uses: { tools: true, images: true, jsonOutput: false, reasoning: false },
      // Codex's thread id: keeps the conversation on one deployment (where its prompt cache is).
      cacheKey: "thread-1",
    });
  });

  it("reads a plain string input and a json_schema text format", () => {
    const summary = decode({ model: "m", input: "hi", text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } }, reasoning: { effort: "none" } });
    expect(summary).toMatchObject({ stream: false, maxOutputTokens: undefined, uses: { tools: false, images: false, jsonOutput: true, reasoning: false } });
  });

  it("counts images inside tool outputs as image input", () => {
    const input = [
      { type: "function_call", call_id: "c1", name: "screenshot", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: [{ type: "input_image", image_url: "https://x/y.png" }] },
    ];
    expect(decode({ model: "m", input }).uses!.images).toBe(true);
  });

  it("refuses previous_response_id with a clear 400: the gateway is stateless and never drops it silently", () => {
    const error = refusal({ model: "m", input: "next", previous_response_id: "resp_123" });
    expect(error.status).toBe(400);
    expect(error.param).toBe("previous_response_id");
    expect(error.message).toContain("does not store responses");
    expect(error.message).toContain("input");
  });

  it("refuses a stored conversation and background mode for the same reason", () => {
    expect(refusal({ model: "m", input: "x", conversation: "conv_1" }).param).toBe("conversation");
    expect(refusal({ model: "m", input: "x", background: true }).param).toBe("background");
  });

  it("names the field at fault", () => {
    expect(refusal({ input: "x" }).param).toBe("model");
    expect(refusal({ model: "m" }).param).toBe("input");
    expect(refusal({ model: "m", input: "x", max_output_tokens: 0 }).param).toBe("max_output_tokens");
    expect(refusal({ model: "m", input: "x", tools: [{ name: "no type" }] }).param).toBe("tools.0.type");
    expect(refusal({ model: "m", input: [{ role: "wizard", content: "x" }] }).param).toBe("input.0.role");
    expect(refusal({ model: "m", input: [{ type: "function_call", call_id: "c", name: "f" }] }).param).toBe("input.0.arguments");
    expect(refusal({ model: "m", input: [{ type: "function_call_output", output: "x" }] }).param).toBe("input.0.call_id");
    expect(refusal({ model: "m", input: [{ content: "no role, no type" }] }).param).toBe("input.0");
  });

  it("lets item types it does not know through (the upstream or the translator decides)", () => {
    expect(() => decode({ model: "m", input: [{ type: "web_search_call", id: "ws_1", status: "completed" }] })).not.toThrow();
  });
});
