/**
 * The process's upstream transport: what providers send through. Process-wide, like fetch's own connection
 * pool, so providers sharing an origin share its cap.
 */
import { ConfigError } from "../core/config.ts";
import { createFetchTransport } from "./fetch.ts";
import type { UpstreamTransport } from "./transport.ts";

export { jsonHeaders, type UpstreamCall, type UpstreamResponse, type UpstreamBodyReader, type UpstreamTransport } from "./transport.ts";

export const DEFAULT_MAX_CONNECTIONS_PER_ORIGIN = 1024;

/** `UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN`: calls in flight per upstream origin; a call past it waits for a slot. */
export function maxConnectionsPerOrigin(env: Record<string, string | undefined>): number {
  const raw = env.UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN;
  if (raw === undefined || raw.trim() === "") return DEFAULT_MAX_CONNECTIONS_PER_ORIGIN;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigError(`UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN must be a whole number of at least 1, not "${raw}"`);
  }
  return value;
}

/** The one upstream call: JSON POST, aborted with the request, a deadline reported as 504, sent at most once. */
export const upstreamFetch: UpstreamTransport = createFetchTransport({ maxConnectionsPerOrigin: maxConnectionsPerOrigin(process.env) });
