/** How long settles of one key are summed before they go to the shared windows. */
export const SETTLE_BATCH_MS = 10;

/** A key's settles summed: what goes to the shared windows as one adjustment. */
export interface SummedSettle {
  key: string;
  tpm: number;
  tokens: number;
  now: number;
}

interface Pending extends SummedSettle {
  done: PromiseWithResolvers<void>;
}

/**
 * Settles (a request's actual tokens minus its admission charge) of one key, summed and sent as one adjustment:
 * half of the shared store's commands per request were settles, and each costs the event loop more than the sum.
 * Same outcome as one adjustment per request applied in some order (a window never drops below zero either way).
 * A key's sum goes out before this process's next admission of it (`sendKey`: the connection keeps the order, so
 * that admission sees it), or after SETTLE_BATCH_MS with every other one due; another process sees them at most
 * that much later, a few tokens of a per-minute window. `send` delivers some sums (one command each, or one
 * message for all) and settles when they are applied.
 */
export function createSettleSummer(send: (due: SummedSettle[]) => Promise<void>) {
  const pending = new Map<string, Pending>();
  let timer: ReturnType<typeof setTimeout> | null = null;

  function deliver(due: Pending[]): void {
    send(due.map(({ key, tpm, tokens, now }) => ({ key, tpm, tokens, now }))).then(
      () => due.forEach((settle) => settle.done.resolve()),
      (error) => due.forEach((settle) => settle.done.reject(error)),
    );
  }

  function sendAll(): void {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (pending.size === 0) return;
    const due = [...pending.values()];
    pending.clear();
    deliver(due);
  }

  return {
    /** Adds a settle of `key`; resolves once its sum is applied (rejects when the store fails). */
    add(key: string, tpm: number, tokens: number, now: number): Promise<void> {
      let settle = pending.get(key);
      if (settle === undefined) {
        settle = { key, tpm, tokens: 0, now, done: Promise.withResolvers<void>() };
        pending.set(key, settle);
        timer ??= setTimeout(sendAll, SETTLE_BATCH_MS);
      }
      settle.tpm = tpm;
      settle.tokens += tokens;
      settle.now = Math.max(settle.now, now);
      return settle.done.promise;
    },
    /** Sends the key's sum now: before an admission of that key. */
    sendKey(key: string): void {
      const settle = pending.get(key);
      if (settle === undefined) return;
      pending.delete(key);
      deliver([settle]);
    },
    /** Sends every sum and waits (at most `timeoutMs`) until they are applied: on close. */
    async flush(timeoutMs: number): Promise<void> {
      const answered = Promise.all([...pending.values()].map((settle) => settle.done.promise.catch(() => {})));
      sendAll();
      await Promise.race([answered, Bun.sleep(timeoutMs)]);
    },
  };
}
