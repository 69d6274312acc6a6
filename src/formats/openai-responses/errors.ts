import type { GatewayError } from "../../core/errors.ts";
import { sseFrame } from "../../core/sse.ts";
import { redact } from "../../core/secrets.ts";

/**
 * The `response.error.code` Codex branches on (docs/wire-formats.md#what-codex-needs): context_length_exceeded and
 * insufficient_quota are fatal, rate_limit_exceeded is retried after the delay read from the message,
 * anything else is retried.
 */
export function failedCode(info: { status?: number; code?: string; message: string }): string {
  const code = info.code ?? "";
  if (code === "context_length_exceeded" || /context (length|window)|maximum context|prompt is too long|too many tokens/i.test(info.message)) {
    return "context_length_exceeded";
  }
  if (code === "insufficient_balance" || code === "insufficient_quota" || code === "key_budget_exceeded") return "insufficient_quota";
  if (info.status === 429 || code === "rate_limit_exceeded" || code === "upstream_rate_limited" || code === "rate_limit_error") return "rate_limit_exceeded";
  if (info.status !== undefined && info.status >= 400 && info.status < 500) return code || "invalid_request_error";
  return code && code !== "upstream_error" && code !== "internal_error" ? code : "server_error";
}

/** The message of a failed response, secrets masked; rate limits say when to retry ("try again in Ns"), as Codex parses it. */
export function failedMessage(unsafe: string, code: string, retryAfterSeconds?: string): string {
  const message = redact(unsafe);
  if (code !== "rate_limit_exceeded" || /try again in/i.test(message)) return message;
  const seconds = Number(retryAfterSeconds);
  return `${message.replace(/[.\s]*$/, ".")} Please try again in ${Number.isFinite(seconds) && seconds > 0 ? seconds : 1}s.`;
}

/**
 * A `response.failed` event for a stream whose headers are already sent (docs/wire-formats.md#errors). The core calls
 * it without the stream's state, so it cannot continue the stream's numbering: sequence_number 0 only fills the
 * field.
 */
export function responsesStreamErrorFrame(error: GatewayError): string {
  const code = failedCode({ status: error.status, code: error.code, message: error.message });
  return failedFrame(code, failedMessage(error.message, code, error.headers?.["retry-after"]), 0);
}

/**
 * A `response.failed` SSE frame with the error inside `response.error`, where Codex reads it
 * (docs/wire-formats.md#what-codex-needs); secrets masked.
 */
export function failedFrame(code: string, message: string, sequence: number, response?: Record<string, unknown>): string {
  const event = {
    type: "response.failed",
    sequence_number: sequence,
    response: {
      id: `resp_failed_${crypto.randomUUID().replaceAll("-", "")}`,
      object: "response",
      created_at: Math.floor(Date.now() / 1000),
      output: [],
      usage: null,
      ...response,
      status: "failed",
      error: { code, message: redact(message) },
      incomplete_details: null,
    },
  };
  return sseFrame(JSON.stringify(event), event.type);
}
