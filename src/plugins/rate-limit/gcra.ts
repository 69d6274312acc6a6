/**
 * GCRA (the generic cell rate algorithm, a leaky bucket without a timer) over one minute.
 *
 * A window's state is a level and the time it was last written. The level is kept in unit·ms:
 * admitting one request (or one token) adds PERIOD_MS, and a limit of L per minute drains L per
 * millisecond, so everything stays an exact integer (no float drift, also in Redis' Lua) and the
 * level survives a change of limit (a promotional cap lifted). A request fits while
 * `level + cost·PERIOD ≤ L·PERIOD`; otherwise it fits again after `(level + cost·PERIOD − L·PERIOD) / L` ms.
 * `redis-store.ts` mirrors these functions in Lua: change both together.
 */
export const PERIOD_MS = 60_000;

/** The level at `now`, after draining since `at`; a clock behind `at` (another instance's) drains nothing. */
export function drained(level: number, at: number, limit: number, now: number): number {
  if (now <= at) return level;
  const next = level - (now - at) * limit;
  return next > 0 ? next : 0;
}

/** Milliseconds until `cost` more units fit under `limit` per minute; 0 when they fit now. */
export function waitFor(level: number, cost: number, limit: number): number {
  const excess = level + (cost - limit) * PERIOD_MS;
  return excess <= 0 ? 0 : Math.ceil(excess / limit);
}

/** How long a window's state matters: at least a period (the request level), longer while tokens are in debt. */
export function stateTtl(tokenLevel: number, tpm: number): number {
  const tokens = tpm > 0 ? Math.ceil(tokenLevel / tpm) : 0;
  return (tokens > PERIOD_MS ? tokens : PERIOD_MS) + 1_000;
}

/** Why a request was refused: the limit that binds longest and when enough capacity is free for it. */
export interface Denial {
  limit: "rpm" | "tpm";
  retryAfterMs: number;
}

/** The denial for the waits of both limits (retry when both fit), or null when neither waits. */
export function denial(requestWait: number, tokenWait: number): Denial | null {
  if (requestWait <= 0 && tokenWait <= 0) return null;
  return requestWait >= tokenWait ? { limit: "rpm", retryAfterMs: requestWait } : { limit: "tpm", retryAfterMs: tokenWait };
}

/**
 * Per-key windows of requests and tokens per minute. A limit of 0 means none (that window is not
 * read or written). Implementations: `memory-store.ts` (one process), `redis-store.ts` (shared).
 */
export interface WindowStore {
  /** Admits one request costing `tokens` when both windows have room (and charges both), else says why not. */
  admit(key: string, rpm: number, tpm: number, tokens: number, now: number): Denial | null | Promise<Denial | null>;
  /** Adds tokens to the key's token window, or removes them (negative: an estimate corrected down). */
  adjust(key: string, tpm: number, tokens: number, now: number): void | Promise<void>;
  close(): Promise<void>;
}
