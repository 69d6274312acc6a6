import { describe, expect, it } from "bun:test";
import { readOpenAIError } from "../../../src/formats/openai-chat/errors.ts";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";
import { openaiImages } from "../../../src/formats/openai-images/index.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";

describe("openai-chat errors", () => {
  it("reads OpenAI's error body (message, type, code), else the first 500 characters or the status", () => {
    const body = JSON.stringify({ error: { message: "bad model", type: "invalid_request_error", code: null } });
    expect(readOpenAIError(400, body)).toEqual({ message: "bad model", type: "invalid_request_error", code: undefined });
    expect(readOpenAIError(502, "<html>bad gateway</html>")).toEqual({ message: "<html>bad gateway</html>" });
    expect(readOpenAIError(503, "")).toEqual({ message: "HTTP 503" });
  });

  it("is the one reader of the three OpenAI formats", () => {
    expect(openaiChat.readUpstreamError).toBe(readOpenAIError);
    expect(openaiImages.readUpstreamError).toBe(readOpenAIError);
    expect(openaiResponses.readUpstreamError).toBe(readOpenAIError);
  });
});
