import type { PrimaryHost, WorkerLink } from "../../core/workers.ts";

/**
 * The edge limit across several workers (docs/workers.md): one count per client address per second, kept by the
 * primary. A worker takes units of it in small leases and admits from a lease without a round trip; the primary
 * never grants more than the limit in a second, so the workers together never admit more than one process would.
 */
export const TAKE_TOPIC = "edge-rate-limit.take";

/** A worker's ask: `units` more for `ip` in the primary's current second. */
interface TakePayload {
  ip: string;
  units: number;
}

/** The primary's answer: the second the units belong to (epoch seconds) and how many it granted (0: none left). */
export interface EdgeGrant {
  second: number;
  granted: number;
}

/** The primary's part: the count of the current second, per address; what it grants is never given back. */
export function serveEdgeCounts(host: PrimaryHost, limit: number): Record<string, never> {
  let second = -1;
  let used = new Map<string, number>();
  host.serve(TAKE_TOPIC, (payload): EdgeGrant => {
    const { ip, units } = payload as TakePayload;
    const now = Math.floor(host.now() / 1000);
    if (now !== second) {
      second = now;
      used = new Map();
    }
    const taken = used.get(ip) ?? 0;
    const granted = Math.max(0, Math.min(units, limit - taken));
    if (granted > 0) used.set(ip, taken + granted);
    return { second, granted };
  });
  return {};
}

/** Units of one address this worker holds for the current second (the map of leases is new each second). */
interface Lease {
  left: number;
  /** The primary granted none: every other request of the second is refused here, without asking again. */
  spent: boolean;
}

export interface SharedEdgeCounterOptions {
  /** This worker's own count, used while the primary does not answer (each worker then counts alone). */
  fallback: (ip: string) => boolean;
  now?: () => number;
  /** How long a take waits for the primary before the fallback decides (ms). */
  timeoutMs?: number;
  onUnreachable?: (error: unknown) => void;
}

/**
 * A worker's edge counter: whether a request of `ip` is within the limit, at once while this worker holds units of
 * the current second, else after one round trip to the primary. A lease is at most an eighth of the limit shared
 * out over the workers (one unit when the limit is small: then every request asks), so the units a client leaves
 * in other workers' leases at the end of a second are a small part of its limit.
 */
export function createSharedEdgeCounter(link: Pick<WorkerLink, "call" | "count">, limit: number, options: SharedEdgeCounterOptions): (ip: string) => boolean | Promise<boolean> {
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? 500;
  const leaseUnits = Math.max(1, Math.floor(limit / (8 * link.count)));
  let leases = new Map<string, Lease>();
  let leasesSecond = -1;
  /** Addresses whose take is in flight: their other requests wait for it, then decide again. */
  const taking = new Map<string, Promise<unknown>>();

  function admit(ip: string): boolean | Promise<boolean> {
    const second = Math.floor(now() / 1000);
    if (second !== leasesSecond) {
      leasesSecond = second;
      leases = new Map();
    }
    const lease = leases.get(ip);
    if (lease !== undefined) {
      if (lease.left > 0) {
        lease.left -= 1;
        return true;
      }
      if (lease.spent) return false;
    }
    const inFlight = taking.get(ip);
    if (inFlight !== undefined) return inFlight.then(() => admit(ip));
    const take = link.call<EdgeGrant>(TAKE_TOPIC, { ip, units: leaseUnits } satisfies TakePayload, timeoutMs).then(
      (grant) => granted(ip, grant),
      (error: unknown) => {
        options.onUnreachable?.(error);
        return options.fallback(ip);
      },
    );
    taking.set(ip, take);
    return take.finally(() => taking.delete(ip));
  }

  /** The primary's grant: this request takes one unit of it, the rest is the lease. */
  function granted(ip: string, grant: EdgeGrant): boolean {
    if (grant.second === leasesSecond) leases.set(ip, { left: Math.max(0, grant.granted - 1), spent: grant.granted === 0 });
    return grant.granted > 0;
  }

  return admit;
}
