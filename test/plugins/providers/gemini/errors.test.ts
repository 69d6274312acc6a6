import { describe, expect, it } from "bun:test";
import { gemini } from "../../../../src/plugins/providers/gemini/codec.ts";
import { httpStatusOf } from "../../../../src/plugins/providers/gemini/errors.ts";

describe("gemini errors", () => {
  it("reads Gemini's message and RPC status from an error body", () => {
    const body = JSON.stringify({ error: { code: 400, message: "Request contains an invalid argument.", status: "INVALID_ARGUMENT" } });
    expect(gemini.readUpstreamError(400, body)).toEqual({ message: "Request contains an invalid argument.", type: "INVALID_ARGUMENT", code: undefined });
    const array = JSON.stringify([{ error: { code: 429, message: "Resource has been exhausted", status: "RESOURCE_EXHAUSTED" } }]);
    expect(gemini.readUpstreamError(429, array).type).toBe("RESOURCE_EXHAUSTED");
    expect(gemini.readUpstreamError(502, "<html>bad gateway</html>")).toEqual({ message: "<html>bad gateway</html>" });
  });

  it("recognizes a prompt over the context window", () => {
    const body = JSON.stringify({
      error: { code: 400, message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", status: "INVALID_ARGUMENT" },
    });
    expect(gemini.readUpstreamError(400, body).code).toBe("context_length_exceeded");
  });

  it("maps RPC statuses to HTTP statuses", () => {
    expect(httpStatusOf({ status: "FAILED_PRECONDITION" })).toBe(400);
    expect(httpStatusOf({ status: "UNAUTHENTICATED" })).toBe(401);
    expect(httpStatusOf({ status: "PERMISSION_DENIED" })).toBe(403);
    expect(httpStatusOf({ status: "NOT_FOUND" })).toBe(404);
    expect(httpStatusOf({ status: "RESOURCE_EXHAUSTED" })).toBe(429);
    expect(httpStatusOf({ status: "INTERNAL" })).toBe(500);
    expect(httpStatusOf({ status: "UNAVAILABLE" })).toBe(503);
    expect(httpStatusOf({ status: "DEADLINE_EXCEEDED" })).toBe(504);
    expect(httpStatusOf({ code: 418 })).toBe(418);
  });
});
