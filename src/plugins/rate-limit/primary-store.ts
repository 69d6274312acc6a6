import type { PrimaryHost, WorkerLink } from "../../core/workers.ts";
import type { Denial } from "./gcra.ts";
import type { Grant, LeasableStore } from "./leases.ts";
import { countersUnavailable } from "./limits.ts";
import { createMemoryStore } from "./memory-store.ts";

/**
 * Several workers without Redis (core/primary.ts): the primary process keeps the one memory store of every
 * worker's windows and answers these topics; a worker's store asks it over the IPC channel. The payloads,
 * structured-cloned, carry the worker's clock (`now`) as the Redis scripts' ARGV do.
 */
export const TOPICS = {
  admit: "rate-limit.admit",
  take: "rate-limit.take",
  giveBack: "rate-limit.giveBack",
  adjust: "rate-limit.adjust",
  adjustMany: "rate-limit.adjustMany",
} as const;

/** "rate-limit.admit" → Denial | null */
export interface AdmitPayload {
  key: string;
  rpm: number;
  tpm: number;
  tokens: number;
  now: number;
}
/** "rate-limit.take" → Grant */
export interface TakePayload extends AdmitPayload {
  requests: number;
  extraTokens: number;
}
/** "rate-limit.giveBack" → null */
export interface GiveBackPayload {
  key: string;
  rpm: number;
  tpm: number;
  requests: number;
  tokens: number;
  now: number;
}
/** "rate-limit.adjust" → null */
export interface AdjustPayload {
  key: string;
  tpm: number;
  tokens: number;
  now: number;
}

/** How long settles of one key are summed before they go to the primary (with the others due): as redis-store.ts does. */
const SETTLE_BATCH_MS = 10;

/**
 * How long a worker waits for the primary. It answers from memory in microseconds; a primary this slow is
 * stuck or gone, and the request fails closed (503) rather than wait.
 */
const CALL_TIMEOUT_MS = 1_000;

/** The primary's part: one memory store for every worker, serving the topics above. */
export function serveSharedWindows(host: PrimaryHost): { close(): Promise<void> } {
  const windows = createMemoryStore({ now: host.now });
  host.serve(TOPICS.admit, (payload) => {
    const { key, rpm, tpm, tokens, now } = payload as AdmitPayload;
    return windows.admit(key, rpm, tpm, tokens, now);
  });
  host.serve(TOPICS.take, (payload) => {
    const { key, rpm, tpm, tokens, requests, extraTokens, now } = payload as TakePayload;
    return windows.take(key, rpm, tpm, tokens, requests, extraTokens, now);
  });
  host.serve(TOPICS.giveBack, (payload) => {
    const { key, rpm, tpm, requests, tokens, now } = payload as GiveBackPayload;
    windows.giveBack(key, rpm, tpm, requests, tokens, now);
    return null;
  });
  host.serve(TOPICS.adjust, (payload) => {
    const { key, tpm, tokens, now } = payload as AdjustPayload;
    windows.adjust(key, tpm, tokens, now);
    return null;
  });
  host.serve(TOPICS.adjustMany, (payload) => {
    for (const { key, tpm, tokens, now } of payload as AdjustPayload[]) windows.adjust(key, tpm, tokens, now);
    return null;
  });
  return { close: () => windows.close() };
}

/**
 * A worker's windows: every method asks the primary (put behind createLeasedStore, as the Redis store is).
 * A call that fails (no answer in time, the primary gone) fails the request closed with 503, as Redis lost does.
 */
export function createPrimaryStore(link: Pick<WorkerLink, "call">, timeoutMs = CALL_TIMEOUT_MS): LeasableStore {
  /**
   * Settles of one key summed, and sent together every SETTLE_BATCH_MS in one message: one IPC message per
   * request would make the primary's one thread the limit of every worker together. A key's own settle goes out
   * before this worker's next admission of it (the channel keeps the order, so that admission sees it).
   */
  const settles = new Map<string, AdjustPayload & { done: PromiseWithResolvers<void> }>();
  let settleTimer: ReturnType<typeof setTimeout> | null = null;
  function sendSettleOf(key: string): void {
    const settle = settles.get(key);
    if (settle === undefined) return;
    settles.delete(key);
    sent(TOPICS.adjust, { key, tpm: settle.tpm, tokens: settle.tokens, now: settle.now }, [settle.done]);
  }
  function sendSettles(): void {
    if (settleTimer !== null) clearTimeout(settleTimer);
    settleTimer = null;
    if (settles.size === 0) return;
    const due = [...settles.values()];
    settles.clear();
    sent(TOPICS.adjustMany, due.map(({ key, tpm, tokens, now }) => ({ key, tpm, tokens, now })), due.map((settle) => settle.done));
  }
  function sent(topic: string, payload: unknown, done: PromiseWithResolvers<void>[]): void {
    link
      .call(topic, payload, timeoutMs)
      .then(ignore, countersUnavailable)
      .then(
        () => done.forEach((d) => d.resolve()),
        (error) => done.forEach((d) => d.reject(error)),
      );
  }

  return {
    admit(key, rpm, tpm, tokens, now) {
      sendSettleOf(key);
      const payload: AdmitPayload = { key, rpm, tpm, tokens, now };
      return link.call<Denial | null>(TOPICS.admit, payload, timeoutMs).catch(countersUnavailable);
    },
    take(key, rpm, tpm, tokens, requests, extraTokens, now) {
      sendSettleOf(key);
      const payload: TakePayload = { key, rpm, tpm, tokens, requests, extraTokens, now };
      return link.call<Grant>(TOPICS.take, payload, timeoutMs).catch(countersUnavailable);
    },
    giveBack(key, rpm, tpm, requests, tokens, now) {
      if (requests <= 0 && tokens <= 0) return Promise.resolve();
      const payload: GiveBackPayload = { key, rpm, tpm, requests, tokens, now };
      return link.call(TOPICS.giveBack, payload, timeoutMs).then(ignore, countersUnavailable);
    },
    adjust(key, tpm, tokens, now) {
      if (tpm <= 0 || tokens === 0) return;
      let settle = settles.get(key);
      if (settle === undefined) {
        settle = { key, tpm, tokens: 0, now, done: Promise.withResolvers<void>() };
        settles.set(key, settle);
        settleTimer ??= setTimeout(sendSettles, SETTLE_BATCH_MS);
      }
      settle.tpm = tpm;
      settle.tokens += tokens;
      settle.now = Math.max(settle.now, now);
      return settle.done.promise;
    },
    async close() {
      // The windows live in the primary; settles still summing go out first.
      const answered = Promise.all([...settles.values()].map((settle) => settle.done.promise.catch(ignore)));
      sendSettles();
      await Promise.race([answered, Bun.sleep(timeoutMs)]);
    },
  };
}

function ignore(): void {}
