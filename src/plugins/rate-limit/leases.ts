import { PERIOD_MS, type Denial, type WindowStore } from "./gcra.ts";

/** What one admission with a lease took from the shared windows. */
export interface Grant {
  /** Refused (nothing taken; its wait comes from the shared windows), or null: admitted. */
  denial: Denial | null;
  /** Request units taken, this request's one included (1 when the key has no RPM limit). */
  requests: number;
  /** Tokens taken beyond this request's own. */
  tokens: number;
}

/**
 * A store that can take several units in one admission and give unused ones back: redis-store.ts (shared by
 * instances), memory-store.ts (in the primary of several workers) and primary-store.ts (a worker's view of it).
 */
export interface LeasableStore extends WindowStore {
  /** `admit`, taking up to `requests` request units in all and up to `extraTokens` more tokens, as many as fit. */
  take(key: string, rpm: number, tpm: number, tokens: number, requests: number, extraTokens: number, now: number): Grant | Promise<Grant>;
  /** Gives back unused request units and tokens (each window floored at zero). */
  giveBack(key: string, rpm: number, tpm: number, requests: number, tokens: number, now: number): void | Promise<void>;
}

/** Units of one key taken from the shared windows and not yet used by this instance. */
interface Lease {
  rpm: number;
  tpm: number;
  /** Request units left (Infinity when the key has no RPM limit). */
  requests: number;
  /** Tokens left. */
  tokens: number;
  /** The lease ends at this time (the gateway's clock): nothing is admitted from it afterwards. */
  until: number;
}

export interface LeaseOptions {
  /** How long a lease lives; it holds what the limits drain in that time. */
  leaseMs: number;
  now: () => number;
  /** A give-back that could not reach the store (the units then drain on their own within a minute). */
  onGiveBackFailed?: (error: unknown) => void;
}

/**
 * Local leases in front of a shared store. For a key whose limits drain at least 2 requests in `leaseMs`
 * (n = ⌊rpm × leaseMs / 60 s⌋, and m = ⌊tpm × leaseMs / 60 s⌋ tokens when it has a TPM limit), one admission
 * takes a lease of up to n requests and m tokens from the shared windows, as many as they have room for; the
 * instance then admits from it synchronously, without a round trip, until it is used up or `leaseMs` has
 * passed, and gives back what is left. The shared windows are never exceeded: every unit is taken before it
 * is used. Smaller limits go to the store on every request (exact and fair across instances). Denials always
 * come from the store (their wait included). Settles (`adjust`) go to the store as before. When the store
 * cannot be reached, a live lease serves until it ends, then requests fail as the store fails (503).
 */
export function createLeasedStore(inner: LeasableStore, options: LeaseOptions): WindowStore & { readonly leases: number } {
  const leaseMs = options.leaseMs;
  const leases = new Map<string, Lease>();
  /** Keys whose lease is being taken: their other admissions meanwhile go to the store one by one. */
  const taking = new Set<string>();

  function end(key: string, lease: Lease, now: number): void {
    leases.delete(key);
    const requests = lease.rpm > 0 ? lease.requests : 0;
    if (requests <= 0 && lease.tokens <= 0) return;
    giveBack(key, lease.rpm, lease.tpm, requests, lease.tokens, now).catch(giveBackFailed);
  }
  /** The inner store's giveBack as a promise (a store in this process answers at once). */
  function giveBack(key: string, rpm: number, tpm: number, requests: number, tokens: number, now: number): Promise<void> {
    return Promise.try(() => inner.giveBack(key, rpm, tpm, requests, tokens, now));
  }
  function giveBackFailed(error: unknown): void {
    options.onGiveBackFailed?.(error);
  }

  // Leases of keys that stopped sending end on time too, so their leftovers return to the other instances.
  const sweeper = setInterval(function endLeases() {
    const now = options.now();
    for (const [key, lease] of leases) if (lease.until <= now) end(key, lease, now);
  }, Math.max(leaseMs, 50));
  sweeper.unref?.();

  function takeLease(key: string, rpm: number, tpm: number, tokens: number, requests: number, extra: number, now: number): Promise<Denial | null> {
    taking.add(key);
    return Promise.try(() => inner.take(key, rpm, tpm, tokens, requests, extra, now)).then(
      (grant) => {
        taking.delete(key);
        if (grant.denial !== null) return grant.denial;
        const left = rpm > 0 ? grant.requests - 1 : Infinity;
        if (left > 0 || grant.tokens > 0) {
          const lease: Lease = { rpm, tpm, requests: left, tokens: grant.tokens, until: now + leaseMs };
          // Taken while another lease of this key arrived (limits changed mid-way): keep one, give the other back.
          const previous = leases.get(key);
          if (previous !== undefined) end(key, previous, now);
          leases.set(key, lease);
        }
        return null;
      },
      (error) => {
        taking.delete(key);
        throw error;
      },
    );
  }

  return {
    get leases() {
      return leases.size;
    },

    admit(key: string, rpm: number, tpm: number, tokens: number, now: number): Denial | null | Promise<Denial | null> {
      const lease = leases.get(key);
      if (lease !== undefined) {
        if (now < lease.until && lease.rpm === rpm && lease.requests >= 1 && (tpm === 0 || (lease.tpm === tpm && lease.tokens >= tokens))) {
          lease.requests -= 1;
          if (tpm > 0) lease.tokens -= tokens;
          if (lease.requests < 1 && lease.tokens <= 0) leases.delete(key);
          return null;
        }
        end(key, lease, now);
      }
      const requests = rpm > 0 ? Math.floor((rpm * leaseMs) / PERIOD_MS) : 0;
      const extra = tpm > 0 ? Math.floor((tpm * leaseMs) / PERIOD_MS) : 0;
      // No lease for small limits (they stay exact and fair), nor for a prompt the lease's tokens would not cover twice.
      const leasable = (rpm === 0 || requests >= 2) && (tpm === 0 || extra >= 2 * Math.max(tokens, 1));
      if (!leasable || taking.has(key)) return inner.admit(key, rpm, tpm, tokens, now);
      return takeLease(key, rpm, tpm, tokens, rpm > 0 ? requests : 1, extra, now);
    },

    adjust(key: string, tpm: number, tokens: number, now: number) {
      return inner.adjust(key, tpm, tokens, now);
    },

    async close() {
      clearInterval(sweeper);
      const now = options.now();
      const givenBack = [...leases].map(([key, lease]) => {
        leases.delete(key);
        const requests = lease.rpm > 0 ? lease.requests : 0;
        return requests > 0 || lease.tokens > 0 ? giveBack(key, lease.rpm, lease.tpm, requests, lease.tokens, now).catch(giveBackFailed) : undefined;
      });
      await Promise.all(givenBack);
      await inner.close();
    },
  };
}
