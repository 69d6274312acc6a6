import { UpstreamTimeoutError } from "./errors.ts";

export interface UpstreamCall {
  url: string;
  /** From `jsonHeaders` (content type set); build it once when it does not vary per request. */
  headers: Headers;
  body: unknown;
  /** Aborted on client disconnect or the request's timeout (ctx.signal). */
  signal: AbortSignal;
}

/**
 * Headers of a JSON POST upstream. A Headers object is passed to fetch as is (fetch copies it and never
 * changes it), where a plain object is converted on every call (~0.7 µs): providers keep one per upstream.
 */
export function jsonHeaders(headers: Record<string, string>): Headers {
  return new Headers({ "content-type": "application/json", ...headers });
}

/** The one upstream fetch: JSON POST, aborted with the request, timeouts reported as 504. Not async: one promise less per request. */
export function upstreamFetch(call: UpstreamCall): Promise<Response> {
  return fetch(call.url, {
    method: "POST",
    headers: call.headers,
    body: JSON.stringify(call.body),
    signal: call.signal,
  }).catch((error: unknown) => {
    if ((error as Error)?.name === "TimeoutError" || (call.signal.aborted && call.signal.reason?.name === "TimeoutError")) {
      throw new UpstreamTimeoutError("upstream did not answer in time");
    }
    throw error;
  });
}
