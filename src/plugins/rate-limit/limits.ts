import { RateLimitError, UnavailableError } from "../../core/errors.ts";
import type { Denial } from "./gcra.ts";

/** The stricter of a key's own limit (null = none) and a cap (0 = none); 0 = no limit. */
export function stricter(own: number | null, cap: number): number {
  if (own === null || own <= 0) return cap;
  return cap > 0 && cap < own ? cap : own;
}

/** Whether the promotional cap, not the key's own limit, is the one in force. */
export function capBinds(own: number | null, cap: number, promotional: boolean): boolean {
  return promotional && cap > 0 && (own === null || own <= 0 || cap < own);
}

const PROMOTIONAL_NOTE = " (the cap of an account without a paid top-up; a card or USDT top-up lifts it)";

/** 429 for a request that must wait; retry-after in whole seconds, at least 1. */
export function limitExceeded(refused: Denial, rpm: number, tpm: number, tokens: number, promotionalCap: boolean): RateLimitError {
  const seconds = Math.max(1, Math.ceil(refused.retryAfterMs / 1000));
  const note = promotionalCap ? PROMOTIONAL_NOTE : "";
  const message =
    refused.limit === "rpm"
      ? `rate limit exceeded: this key may send ${rpm} requests per minute (RPM)${note}; retry after ${seconds} s`
      : `rate limit exceeded: this key may use ${tpm} tokens per minute (TPM)${note}, and this request's prompt counts up to ${tokens} tokens; retry after ${seconds} s`;
  return new RateLimitError(message, { headers: { "retry-after": String(seconds) } });
}

/** 429 for a prompt that alone exceeds the token limit: waiting cannot help, so no retry-after. */
export function promptTooLarge(tokens: number, tpm: number, promotionalCap: boolean): RateLimitError {
  const remedy = promotionalCap ? "shorten the prompt or make a paid top-up, which lifts the cap" : "shorten the prompt or raise the key's TPM limit";
  return new RateLimitError(
    `this request's prompt counts up to ${tokens} tokens, more than this key's whole limit of ${tpm} tokens per minute (TPM)${promotionalCap ? PROMOTIONAL_NOTE : ""}; no retry can succeed: ${remedy}`,
    { headers: { "x-should-retry": "false" } },
  );
}

/** 503 when the shared windows cannot be reached (Redis, or the primary of several workers): fail closed, never admit uncounted. */
export function countersUnavailable(cause: unknown): never {
  throw new UnavailableError("rate limiting is briefly unavailable (its shared counter cannot be reached); retry in a few seconds", {
    headers: { "retry-after": "2" },
    cause,
  });
}
