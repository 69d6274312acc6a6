import type { UpstreamErrorInfo } from "../../../core/format.ts";

/**
 * Google RPC status -> HTTP status (docs/wire-formats.md#google-gemini,
 * https://ai.google.dev/gemini-api/docs/troubleshooting).
 */
const HTTP_BY_STATUS: Record<string, number> = {
  INVALID_ARGUMENT: 400,
  FAILED_PRECONDITION: 400,
  OUT_OF_RANGE: 400,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  ABORTED: 409,
  RESOURCE_EXHAUSTED: 429,
  CANCELLED: 499,
  INTERNAL: 500,
  UNKNOWN: 500,
  DATA_LOSS: 500,
  UNIMPLEMENTED: 501,
  UNAVAILABLE: 503,
  DEADLINE_EXCEEDED: 504,
};

const STATUS_BY_HTTP: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  409: "ABORTED",
  413: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  501: "UNIMPLEMENTED",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

/** Gemini's own words for a prompt over the context window. */
const CONTEXT_TOO_LONG = /input token count.*exceeds the maximum|exceeds the maximum number of tokens/i;

export interface GeminiErrorObject {
  code?: number;
  message?: string;
  status?: string;
}

/** The Google RPC status name for an HTTP status. */
function googleStatusFor(httpStatus: number): string {
  return STATUS_BY_HTTP[httpStatus] ?? (httpStatus >= 400 && httpStatus < 500 ? "INVALID_ARGUMENT" : "INTERNAL");
}

/** The HTTP status of a Gemini error object: its RPC status first, then its numeric code. */
export function httpStatusOf(error: GeminiErrorObject): number {
  const byStatus = typeof error.status === "string" ? HTTP_BY_STATUS[error.status] : undefined;
  if (byStatus !== undefined) return byStatus;
  return typeof error.code === "number" && error.code >= 400 && error.code < 600 ? error.code : 502;
}

/** The `error` object of a Gemini error body (`{error}` or, from non-SSE streams, `[{error}]`). */
export function geminiErrorObject(body: unknown): GeminiErrorObject | undefined {
  const candidate = Array.isArray(body) ? body[0] : body;
  const error = (candidate as { error?: unknown } | null | undefined)?.error;
  return error !== null && typeof error === "object" ? (error as GeminiErrorObject) : undefined;
}

/** The upstream's message, RPC status and, for context overflow, the code chat clients branch on. */
export function readGeminiUpstreamError(status: number, text: string): UpstreamErrorInfo {
  let error: GeminiErrorObject | undefined;
  try {
    error = geminiErrorObject(JSON.parse(text));
  } catch {}
  if (!error || typeof error.message !== "string") return { message: text.slice(0, 500) || `HTTP ${status}` };
  return {
    message: error.message,
    type: typeof error.status === "string" ? error.status : googleStatusFor(status),
    code: CONTEXT_TOO_LONG.test(error.message) ? "context_length_exceeded" : undefined,
  };
}
