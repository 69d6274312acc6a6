import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { anthropicMessages } from "../../../src/formats/anthropic-messages/index.ts";
import { validateCountTokensRequest } from "../../../src/formats/anthropic-messages/request.ts";

const decode = (body: unknown) => anthropicMessages.decodeRequest(body);

function refusal(body: unknown): InvalidRequestError {
  try {
    decode(body);
  } catch (error) {
    return error as InvalidRequestError;
  }
  throw new Error("accepted");
}

describe("anthropic-messages request decoding", () => {
  it("summarizes a request for plugins: model, stream, max_tokens as the output cap, features used", () => {
    const summary = decode({
      model: "claude-sonnet-5-5",
      max_tokens: 512,
      stream: true,
      system: [{ type: "text", text: "be brief", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }, { type: "text", text: "what?" }] },
      ],
      tools: [{ name: "f", input_schema: { type: "object" } }],
      thinking: { type: "enabled", budget_tokens: 2048 },
      output_config: { format: { type: "json_schema", schema: { type: "object" } } },
      context_management: { edits: [] },
    });
    expect(summary).toEqual({
      model: "claude-sonnet-5-5",
      stream: true,
      maxOutputTokens: 512,
      clientWantsStreamUsage: true,
      uses: { tools: true, images: true, jsonOutput: true, reasoning: true },
    });
  });

  it("sees images inside tool results, and treats disabled thinking as no reasoning", () => {
    const summary = decode({
      model: "m",
      max_tokens: 1,
      thinking: { type: "disabled" },
      messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA" } }] }] }],
    });
    expect(summary.uses).toEqual({ tools: false, images: true, jsonOutput: false, reasoning: false });
  });

  it("requires max_tokens and names it the way Anthropic does", () => {
    const error = refusal({ model: "claude-sonnet-5-5", messages: [{ role: "user", content: "x" }] });
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error.message).toBe("max_tokens: Field required");
    expect(error.param).toBe("max_tokens");
  });

  it("names the field at fault", () => {
    expect(refusal({ model: "m", max_tokens: 0, messages: [{ role: "user", content: "x" }] }).param).toBe("max_tokens");
    expect(refusal({ model: "m", max_tokens: 1.5, messages: [{ role: "user", content: "x" }] }).param).toBe("max_tokens");
    expect(refusal({ model: "m", max_tokens: 1, messages: [{ role: "system", content: "x" }] }).message).toContain("messages.0.role");
    expect(refusal({ model: "m", max_tokens: 1, messages: [{ role: "user", content: 3 }] }).message).toContain("messages.0.content");
    expect(refusal({ model: "m", max_tokens: 1, messages: [] }).param).toBe("messages");
    expect(refusal({ max_tokens: 1, messages: [{ role: "user", content: "x" }] }).message).toBe("model: Field required");
    expect(refusal({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }], stop_sequences: "STOP" }).param).toBe("stop_sequences");
    expect(refusal({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }], system: [{ type: "image" }] }).param).toStartWith("system");
    expect(refusal([1, 2]).message).toBe("request body must be a JSON object");
  });

  it("validates count_tokens bodies the same way but without max_tokens", () => {
    expect(validateCountTokensRequest({ model: "m", messages: [{ role: "user", content: "x" }] }).model).toBe("m");
    expect(() => validateCountTokensRequest({ model: "m" })).toThrow("messages: Field required");
  });
});
