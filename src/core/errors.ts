import { redact } from "./secrets.ts";

/**
 * Typed gateway errors. Each carries the HTTP status, a stable `code` clients branch on and the
 * error `type` of the OpenAI/spec shape. Wire formats map them in one place each (see `errorBody`
 * here for the OpenAI/spec shape; other formats provide their own encoder).
 */
export class GatewayError extends Error {
  readonly status: number = 500;
  readonly code: string = "internal_error";
  readonly type: string = "server_error";
  /** Extra response headers (retry-after ...). */
  headers?: Record<string, string>;
  /** The request parameter at fault, when there is one. */
  param?: string;
  constructor(message: string, options?: { param?: string; headers?: Record<string, string>; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.param = options?.param;
    this.headers = options?.headers;
  }
}

function errorClass(status: number, type: string, code: string) {
  return class extends GatewayError {
    override readonly status = status;
    override readonly type = type;
    override readonly code = code;
  };
}

export class InvalidRequestError extends errorClass(400, "invalid_request_error", "invalid_request") {}
export class UnknownModelError extends errorClass(400, "invalid_request_error", "model_not_found") {}
export class InsufficientBalanceError extends errorClass(400, "invalid_request_error", "insufficient_balance") {}
export class AuthenticationError extends errorClass(401, "authentication_error", "invalid_api_key") {}
export class PermissionError extends errorClass(403, "permission_error", "forbidden") {}
export class ModelNotAllowedError extends errorClass(403, "permission_error", "model_not_allowed") {}
export class NotFoundError extends errorClass(404, "not_found_error", "not_found") {}
export class PayloadTooLargeError extends errorClass(413, "invalid_request_error", "payload_too_large") {}
export class RateLimitError extends errorClass(429, "rate_limit_error", "rate_limit_exceeded") {}
export class KeyBudgetExceededError extends errorClass(429, "rate_limit_error", "key_budget_exceeded") {}
export class UpstreamError extends errorClass(502, "upstream_error", "upstream_error") {}
export class UpstreamTimeoutError extends errorClass(504, "upstream_error", "upstream_timeout") {}
export class ProviderUnavailableError extends errorClass(503, "server_error", "provider_unavailable") {}
export class UnavailableError extends errorClass(503, "server_error", "unavailable") {}

/** An error the upstream answered with: its status and message are passed on to the client. */
export class UpstreamHttpError extends GatewayError {
  override readonly status: number;
  override readonly type: string;
  override readonly code: string;
  constructor(status: number, message: string, type = "upstream_error", code = "upstream_error") {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
  }
}

/** Anything thrown that is not a GatewayError becomes a 500 with a generic message. */
export function asGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  // Walking a client's JSON (token count, translation, serializing it upstream) recurses per level: a
  // body nested hundreds of thousands deep overflows the stack. That is the client's input, not our fault.
  if (error instanceof RangeError && /call stack/i.test(error.message)) {
    return new InvalidRequestError("request body is nested too deeply to process", { cause: error });
  }
  return new GatewayError("internal error", { cause: error });
}

/** The OpenAI / spec error body: `{error:{message, type, code, param}}`, secrets masked (an upstream's message may echo its key). */
export function errorBody(error: GatewayError) {
  return { error: { message: redact(error.message), type: error.type, code: error.code, param: error.param ?? null } };
}

/** Builds the HTTP response for an error in the OpenAI / spec shape. */
export function errorResponse(error: GatewayError, extraHeaders?: Record<string, string>): Response {
  return Response.json(errorBody(error), {
    status: error.status,
    headers: { ...error.headers, ...extraHeaders },
  });
}

export class ConflictError extends GatewayError {
  override readonly status = 409;
  override readonly type = "invalid_request_error";
  override readonly code = "conflict";
}
