/**
 * At most `max` calls in flight per origin (scheme, host and port): a call holds its slot from the moment it is
 * sent until its answer's body is read to the end, cancelled or failed. Past the cap a call waits its turn (first
 * come, first served) and gives its place up when its request's signal fires.
 */
import type { AbortSignalLike } from "../core/request-signals.ts";

/** One call's hold on its origin; `release` is idempotent. */
export class Slot {
  private released = false;
  /** Set once the answer's body has a reader: from then on the reader's end releases it. */
  readerTaken = false;
  constructor(private readonly origin: OriginQueue) {}

  release(): void {
    if (this.released) return;
    this.released = true;
    this.origin.handOn();
  }
}

interface Waiter {
  resolve(slot: Slot): void;
  reject(reason: unknown): void;
  signal: AbortSignalLike;
  onAbort: () => void;
}

class OriginQueue {
  active = 0;
  readonly waiters: Waiter[] = [];

  /** A slot was released: the next waiter takes it over, or it is free again. */
  handOn(): void {
    const next = this.waiters.shift();
    if (next === undefined) {
      this.active--;
      return;
    }
    next.signal.removeEventListener("abort", next.onAbort);
    next.resolve(new Slot(this));
  }
}

export class OriginLimiter {
  private readonly origins = new Map<string, OriginQueue>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`connections per origin must be an integer of at least 1, not ${max}`);
  }

  /** A slot now when one is free (no promise on the common path), else undefined: then `wait`. */
  tryAcquire(origin: string): Slot | undefined {
    let queue = this.origins.get(origin);
    if (queue === undefined) this.origins.set(origin, (queue = new OriginQueue()));
    if (queue.active >= this.max) return undefined;
    queue.active++;
    return new Slot(queue);
  }

  /** Waits for a slot of `origin`; rejects with the signal's reason, leaving the queue, when the signal fires first. */
  wait(origin: string, signal: AbortSignalLike): Promise<Slot> {
    const queue = this.origins.get(origin)!;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: function leaveQueue() {
          const at = queue.waiters.indexOf(waiter);
          if (at >= 0) queue.waiters.splice(at, 1);
          reject(signal.reason);
        },
      };
      queue.waiters.push(waiter);
      signal.addEventListener("abort", waiter.onAbort, { once: true });
    });
  }

  /** Calls in flight and waiting for `origin` (for tests and diagnostics). */
  load(origin: string): { active: number; waiting: number } {
    const queue = this.origins.get(origin);
    return { active: queue?.active ?? 0, waiting: queue?.waiters.length ?? 0 };
  }
}

/** The origin of an absolute http(s) URL, without parsing it: "https://api.example.com:8443". */
export function originOf(url: string): string {
  const hostStart = url.indexOf("//") + 2;
  const pathStart = url.indexOf("/", hostStart);
  return pathStart < 0 ? url : url.slice(0, pathStart);
}
