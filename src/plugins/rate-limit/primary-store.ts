import type { PrimaryHost, WorkerLink } from "../../core/workers.ts";
import type { Denial } from "./gcra.ts";
import type { Grant, LeasableStore } from "./leases.ts";
import { countersUnavailable } from "./limits.ts";
import { createMemoryStore } from "./memory-store.ts";
import { createSettleSummer } from "./settles.ts";

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
  // Settles summed per key and sent together in one message: one IPC message per request would make the
  // primary's one thread the limit of every worker together (settles.ts).
  const settles = createSettleSummer((due) =>
    link.call(due.length === 1 ? TOPICS.adjust : TOPICS.adjustMany, due.length === 1 ? due[0] : due, timeoutMs).then(ignore, countersUnavailable),
  );

  return {
    admit(key, rpm, tpm, tokens, now) {
      settles.sendKey(key);
      const payload: AdmitPayload = { key, rpm, tpm, tokens, now };
      return link.call<Denial | null>(TOPICS.admit, payload, timeoutMs).catch(countersUnavailable);
    },
    take(key, rpm, tpm, tokens, requests, extraTokens, now) {
      settles.sendKey(key);
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
      return settles.add(key, tpm, tokens, now);
    },
    async close() {
      // The windows live in the primary; settles still summing go out first.
      await settles.flush(timeoutMs);
    },
  };
}

function ignore(): void {}
