/**
 * The upstream transport's contract: one JSON POST out, the upstream's HTTP answer back, not consumed.
 * Bun's `fetch` is the reference implementation (fetch.ts); the pipeline reads only what is declared here.
 */
import type { AbortSignalLike } from "../core/request-signals.ts";

export interface UpstreamCall {
  url: string;
  /** From `jsonHeaders` (content type set); build it once when it does not vary per request. */
  headers: Headers;
  body: unknown;
  /** Aborted on client disconnect, the request's deadline or its upstream's silence (ctx.signal). */
  signal: AbortSignalLike;
}

/** What the pipeline reads of an upstream answer: a subset of `Response`, which satisfies it too. */
export interface UpstreamResponse {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  readonly body: { getReader(): UpstreamBodyReader } | null;
  text(): Promise<string>;
}

export type BodyRead = { done: false; value: Uint8Array } | { done: true; value?: undefined };

export interface UpstreamBodyReader {
  read(): Promise<BodyRead>;
  cancel(reason?: unknown): Promise<void>;
}

/**
 * Sends one call. It rejects with `UpstreamTimeoutError` when the call's signal fired for a deadline, with the
 * signal's reason when it fired otherwise, and with the transport's own error when the upstream could not be
 * reached. A call is sent at most once.
 */
export type UpstreamTransport = (call: UpstreamCall) => Promise<UpstreamResponse>;

/**
 * Headers of a JSON POST upstream. Build them once per upstream: fetch takes a Headers object as is (a plain
 * object was converted on every call: docs/performance.md).
 */
export function jsonHeaders(headers: Record<string, string>): Headers {
  return new Headers({ "content-type": "application/json", ...headers });
}
