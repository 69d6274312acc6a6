import { describe, expect, it } from "bun:test";
import {
  AuthenticationError,
  InsufficientBalanceError,
  InvalidRequestError,
  ModelNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  ProviderUnavailableError,
  RateLimitError,
  UpstreamError,
  UpstreamHttpError,
  UpstreamTimeoutError,
} from "../../../src/core/errors.ts";
import { anthropicMessages } from "../../../src/formats/anthropic-messages/index.ts";
import { fromAnthropicToolId, toAnthropicToolId } from "../../../src/formats/anthropic-messages/ids.ts";

describe("anthropic-messages errors", () => {
  it("answers in Anthropic's shape with Anthropic's error types, plus our stable code", async () => {
    const cases = [
      [new InvalidRequestError("bad"), 400, "invalid_request_error", "invalid_request"],
      [new InsufficientBalanceError("poor"), 400, "invalid_request_error", "insufficient_balance"],
      [new AuthenticationError("who"), 401, "authentication_error", "invalid_api_key"],
      [new ModelNotAllowedError("no"), 403, "permission_error", "model_not_allowed"],
      [new NotFoundError("none"), 404, "not_found_error", "not_found"],
      [new PayloadTooLargeError("big"), 413, "request_too_large", "payload_too_large"],
      [new RateLimitError("slow"), 429, "rate_limit_error", "rate_limit_exceeded"],
      [new UpstreamError("up"), 502, "api_error", "upstream_error"],
      [new ProviderUnavailableError("off"), 503, "overloaded_error", "provider_unavailable"],
      [new UpstreamHttpError(529, "busy"), 529, "overloaded_error", "upstream_error"],
      [new UpstreamTimeoutError("late"), 504, "timeout_error", "upstream_timeout"],
    ] as const;
    for (const [error, status, type, code] of cases) {
      const response = anthropicMessages.errorResponse(error, { "x-gateway-request-id": "gen-1" });
      expect(response.status).toBe(status);
      expect(await response.json()).toEqual({ type: "error", error: { type, message: error.message, code }, request_id: "gen-1" });
      expect(response.headers.get("request-id")).toBe("gen-1");
    }
  });

  it("keeps retry-after and the gateway's headers", () => {
    const response = anthropicMessages.errorResponse(new RateLimitError("slow", { headers: { "retry-after": "3" } }), { "x-gateway-request-id": "gen-2" });
    expect(response.headers.get("retry-after")).toBe("3");
    expect(response.headers.get("x-gateway-request-id")).toBe("gen-2");
  });

  it("writes in-band stream errors as `event: error` and reads upstream error bodies", () => {
    expect(anthropicMessages.streamErrorFrame(new UpstreamError("cut"))).toBe(
      'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"cut","code":"upstream_error"}}\n\n',
    );
    expect(anthropicMessages.readUpstreamError(529, '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')).toEqual({
      message: "Overloaded",
      type: "overloaded_error",
    });
    expect(anthropicMessages.readUpstreamError(502, "<html>")).toEqual({ message: "<html>" });
  });
});

describe("anthropic-messages tool ids", () => {
  it("keeps valid ids, and maps others to valid ids deterministically and reversibly", () => {
    for (const id of ["toolu_01A", "call_abc-1", "Bash:0", "functions.read:3", "id with spaces/ü", "", "toolu_gw_x"]) {
      const mapped = toAnthropicToolId(id);
      expect(mapped).toMatch(/^[a-zA-Z0-9_-]+$/);
      expect(toAnthropicToolId(id)).toBe(mapped);
      expect(fromAnthropicToolId(mapped)).toBe(id);
    }
    expect(toAnthropicToolId("toolu_01A")).toBe("toolu_01A");
    expect(toAnthropicToolId("Bash:0")).not.toBe(toAnthropicToolId("Bash_0"));
    expect(fromAnthropicToolId("toolu_gw_abc")).toBe("toolu_gw_abc");
  });
});
