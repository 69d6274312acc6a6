import type { ErrorClass } from "./deployments.ts";

/**
 * Which failed attempts are worth another deployment (core/attempts.ts): those the deployment is to blame for
 * (overloaded, failing, rate limited, its key refused), never those the request is to blame for (other 4xx).
 */
export const DEFAULT_RETRY_ON: readonly number[] = [401, 403, 408, 429, 500, 502, 503, 504, 529];

/** The longest Retry-After believed: an upstream asking for an hour is treated as asking for this. */
export const RETRY_AFTER_CAP_MS = 60_000;

/** Why an upstream's non-2xx answer failed, as the retry policy and the health keeper see it. */
export function classifyStatus(status: number): ErrorClass {
  if (status === 429) return "rate_limited";
  if (status === 503 || status === 529) return "overloaded";
  if (status === 401 || status === 403) return "auth";
  if (status === 408 || status >= 500) return "server_error";
  return "client_error";
}

/** Whether an answer with `status` sends the request on to the next deployment (`retryOn`: the provider's own list). */
export function isRetried(status: number, retryOn: readonly number[] = DEFAULT_RETRY_ON): boolean {
  return retryOn.includes(status);
}

/**
 * A Retry-After header in milliseconds from `now`: delta-seconds or an HTTP-date, capped at `capMs`. Undefined
 * when absent or unreadable; 0 for a date already past.
 */
export function parseRetryAfter(value: string | null | undefined, now: number, capMs = RETRY_AFTER_CAP_MS): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (text === "") return undefined;
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(text)) ms = Math.round(Number(text) * 1000);
  else {
    if (!/^[A-Za-z]{3},/.test(text)) return undefined; // an IMF-fixdate starts with the day's name
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - now);
  }
  return Math.min(ms, capMs);
}

/** A retry-after header value (whole seconds, at least 1) for a wait of `ms`. */
export function retryAfterSeconds(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}
