import { denial, drained, PERIOD_MS, stateTtl, waitFor, type Denial } from "./gcra.ts";
import type { Grant, LeasableStore } from "./leases.ts";

/** One key's windows; mutated in place, so a request allocates nothing once its key is known. */
interface KeyWindows {
  requests: number;
  requestsAt: number;
  tokens: number;
  tokensAt: number;
  /** After this time every level has drained to zero: the entry may go. */
  until: number;
}

/**
 * Windows counted in this process: exact for one instance, and synchronous (no await on the hot path). With several
 * workers the primary process keeps the one memory store they all use (primary-store.ts), leases included: `take`
 * and `giveBack` do what redis-store.ts's scripts do (change both together).
 */
export function createMemoryStore(options: { now: () => number; sweepIntervalMs?: number }): LeasableStore & { readonly size: number } {
  const windows = new Map<string, KeyWindows>();

  const sweeper = setInterval(function sweepDrainedWindows() {
    const now = options.now();
    for (const [key, entry] of windows) if (entry.until <= now) windows.delete(key);
  }, options.sweepIntervalMs ?? PERIOD_MS);
  sweeper.unref?.();

  /** Admits one request costing `tokens` when both windows have room (and charges both), else says why not. */
  function admit(key: string, rpm: number, tpm: number, tokens: number, now: number): Denial | null {
    let entry = windows.get(key);
    const requests = entry && rpm > 0 ? drained(entry.requests, entry.requestsAt, rpm, now) : 0;
    const tokenLevel = entry && tpm > 0 ? drained(entry.tokens, entry.tokensAt, tpm, now) : 0;
    const refused = denial(rpm > 0 ? waitFor(requests, 1, rpm) : 0, tpm > 0 ? waitFor(tokenLevel, tokens, tpm) : 0);
    if (refused) return refused;
    if (!entry) {
      entry = { requests: 0, requestsAt: now, tokens: 0, tokensAt: now, until: 0 };
      windows.set(key, entry);
    }
    if (rpm > 0) {
      entry.requests = requests + PERIOD_MS;
      if (now > entry.requestsAt) entry.requestsAt = now;
    }
    if (tpm > 0) {
      entry.tokens = tokenLevel + tokens * PERIOD_MS;
      if (now > entry.tokensAt) entry.tokensAt = now;
    }
    entry.until = Math.max(entry.until, now + stateTtl(entry.tokens, tpm));
    return null;
  }

  return {
    get size() {
      return windows.size;
    },

    admit,

    take(key: string, rpm: number, tpm: number, tokens: number, requests: number, extraTokens: number, now: number): Grant {
      const refused = admit(key, rpm, tpm, tokens, now);
      if (refused) return { denial: refused, requests: 0, tokens: 0 };
      // Admitted (its entry exists): as many more units as still fit.
      const entry = windows.get(key)!;
      let taken = 1;
      let extra = 0;
      if (rpm > 0 && requests > 1) {
        const more = Math.max(0, Math.min(requests - 1, Math.floor((rpm * PERIOD_MS - entry.requests) / PERIOD_MS)));
        entry.requests += more * PERIOD_MS;
        taken += more;
      }
      if (tpm > 0 && extraTokens > 0) {
        extra = Math.max(0, Math.min(extraTokens, Math.floor((tpm * PERIOD_MS - entry.tokens) / PERIOD_MS)));
        entry.tokens += extra * PERIOD_MS;
        entry.until = Math.max(entry.until, now + stateTtl(entry.tokens, tpm));
      }
      return { denial: null, requests: taken, tokens: extra };
    },

    giveBack(key: string, rpm: number, tpm: number, requests: number, tokens: number, now: number): void {
      const entry = windows.get(key);
      if (!entry) return; // drained and swept: nothing left to give back
      if (rpm > 0 && requests > 0) {
        const level = drained(entry.requests, entry.requestsAt, rpm, now) - requests * PERIOD_MS;
        entry.requests = level > 0 ? level : 0;
        if (now > entry.requestsAt) entry.requestsAt = now;
      }
      if (tokens > 0) {
        const level = drained(entry.tokens, entry.tokensAt, tpm, now) - tokens * PERIOD_MS;
        entry.tokens = level > 0 ? level : 0;
        if (now > entry.tokensAt) entry.tokensAt = now;
      }
    },

    adjust(key: string, tpm: number, tokens: number, now: number): void {
      if (tpm <= 0 || tokens === 0) return;
      let entry = windows.get(key);
      if (!entry) {
        if (tokens < 0) return; // nothing left to give back
        entry = { requests: 0, requestsAt: now, tokens: 0, tokensAt: now, until: 0 };
        windows.set(key, entry);
      }
      const level = drained(entry.tokens, entry.tokensAt, tpm, now) + tokens * PERIOD_MS;
      entry.tokens = level > 0 ? level : 0;
      if (now > entry.tokensAt) entry.tokensAt = now;
      entry.until = Math.max(entry.until, now + stateTtl(entry.tokens, tpm));
    },

    async close() {
      clearInterval(sweeper);
      windows.clear();
    },
  };
}
