import { GatewayError, UnavailableError } from "../../core/errors.ts";
import type { LedgerStore } from "../storage/repository.ts";

/** Past this many cached accounts the cache starts over (it only saves store reads). */
const MAX_CACHED_ACCOUNTS = 100_000;
const PAID = Number.POSITIVE_INFINITY;

/**
 * Whether an account is promotional: it never had a paid top-up (AccountTotals.paidCredits === 0;
 * card and usdt are the paid kinds). Once paid, always paid (a first paid top-up cannot be undone),
 * so a funded account is read once and then answered from memory for good; a promotional one is
 * re-read after `ttlMs` so its first paid top-up lifts the caps within that time.
 */
export function createPromotionalStatus(store: LedgerStore, now: () => number, ttlMs: number) {
  /** accountId -> until when "promotional" holds, or PAID. A number, not an object: nothing allocated per hit. */
  const cache = new Map<string, number>();
  const reading = new Map<string, Promise<boolean>>();

  function remember(accountId: string, promotional: boolean): boolean {
    if (cache.size >= MAX_CACHED_ACCOUNTS) cache.clear();
    cache.set(accountId, promotional ? now() + ttlMs : PAID);
    return promotional;
  }

  async function read(accountId: string): Promise<boolean> {
    try {
      const totals = await store.accountTotals(accountId);
      return remember(accountId, totals.paidCredits === 0);
    } catch (error) {
      if (error instanceof GatewayError) throw error;
      throw new UnavailableError("account data is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause: error });
    }
  }

  /** The cached status; undefined when it must be read (`load`). */
  function peek(accountId: string): boolean | undefined {
    const until = cache.get(accountId);
    if (until === undefined) return undefined;
    if (until === PAID) return false;
    return until > now() ? true : undefined;
  }

  return {
    peek,

    /** Reads the status from the store (one read per account at a time, however many requests wait). */
    load(accountId: string): Promise<boolean> {
      let pending = reading.get(accountId);
      if (!pending) {
        pending = read(accountId).finally(() => reading.delete(accountId));
        reading.set(accountId, pending);
      }
      return pending;
    },

    /** The status read now, bypassing the cache (and refreshing it): for the rare reads that must be exact. */
    refresh(accountId: string): Promise<boolean> {
      return peek(accountId) === false ? Promise.resolve(false) : read(accountId);
    },
  };
}

export type PromotionalStatus = ReturnType<typeof createPromotionalStatus>;
