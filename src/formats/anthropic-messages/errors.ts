import type { GatewayError } from "../../core/errors.ts";
import { redact } from "../../core/secrets.ts";

/**
 * Anthropic's error type for an HTTP status (docs/wire-formats.md#anthropic-messages, docs/wire-formats.md#errors).
 */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

/**
 * The Anthropic error object, plus our stable `code` (an extra field the SDKs ignore) so clients can
 * branch on insufficient_balance, model_not_allowed ... whatever the format. Secrets in the message are masked.
 */
export function anthropicErrorObject(error: GatewayError): { type: string; message: string; code: string } {
  return { type: anthropicErrorType(error.status), message: redact(error.message), code: error.code };
}

/** The HTTP error answer: `{type:"error", error:{type, message, code}, request_id}`. */
export function anthropicErrorResponse(error: GatewayError, headers?: Record<string, string>): Response {
  const all: Record<string, string> = { ...error.headers, ...headers };
  const requestId = all["x-gateway-request-id"];
  // The Anthropic SDK reads `request-id` into error.requestID: give it the id GET /v1/generation knows.
  if (requestId) all["request-id"] = requestId;
  const body: Record<string, unknown> = { type: "error", error: anthropicErrorObject(error) };
  if (requestId) body.request_id = requestId;
  return Response.json(body, { status: error.status, headers: all });
}

/** An in-band error for a stream whose 200 is already sent: `event: error`. */
export function anthropicStreamErrorFrame(error: GatewayError): string {
  return `event: error\ndata: ${JSON.stringify({ type: "error", error: anthropicErrorObject(error) })}\n\n`;
}

/** The message of an Anthropic upstream's non-2xx answer. */
export function readAnthropicUpstreamError(status: number, text: string): { message: string; type?: string; code?: string } {
  try {
    const parsed = JSON.parse(text);
    const error = parsed?.error;
    if (error && typeof error.message === "string") return { message: error.message, type: typeof error.type === "string" ? error.type : undefined };
  } catch {}
  return { message: text.slice(0, 500) || `HTTP ${status}` };
}
