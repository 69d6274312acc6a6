/**
 * What the gateway needs of an abort signal: whether and why it fired, and a listener on it. A DOM
 * AbortSignal is one; a request's own signal is a RequestSignal (below).
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/**
 * A request's abort signal: fires once, when its client goes away or its deadline passes. Not a DOM
 * AbortSignal: an AbortController per request and its event listener cost a measurable share of the event
 * loop's CPU per stream (the upstream call listens on every request; docs/performance.md). `toAbortSignal` makes a DOM one for fetch.
 */
export class RequestSignal implements AbortSignalLike {
  aborted = false;
  reason: unknown = undefined;
  /** Its place in RequestSignals while watched, else -1. */
  slot = -1;
  /** When the upstream's silence ends the request (performance.now() ms); 0 = no idle clock yet (see RequestSignals.touch). */
  idleDeadline = 0;
  /** The one listener nearly every request has (the upstream call); any others after it. */
  private listener: (() => void) | undefined;
  private others: (() => void)[] | undefined;

  addEventListener(_type: "abort", listener: () => void): void {
    if (this.listener === undefined) this.listener = listener;
    else (this.others ??= []).push(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    if (this.listener === listener) this.listener = undefined;
    else if (this.others) this.others = this.others.filter((other) => other !== listener);
  }

  /** Fires it: each listener once, then none. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = [this.listener, ...(this.others ?? [])];
    this.listener = this.others = undefined;
    for (const listener of listeners) listener?.();
  }

  /** A DOM AbortSignal that fires with this one. */
  toAbortSignal(): AbortSignal {
    const controller = new AbortController();
    if (this.aborted) controller.abort(this.reason);
    else this.addEventListener("abort", () => controller.abort(this.reason));
    return controller.signal;
  }
}

/**
 * One abort signal per request that fires when the client goes away or the request outlives its
 * deadline, whichever comes first. It replaces `AbortSignal.any([request.signal, AbortSignal.timeout(ms)])`,
 * which cost the event loop more per request and kept every request's timer (and what it holds) alive
 * until the deadline: here each request costs one RequestSignal and a slot in flat arrays (no object per
 * request in a long-lived map: that cost more too), and one shared sweep every `sweepMs` checks the
 * requests in flight. A disconnect or deadline is therefore seen up to `sweepMs` late.
 * The client's `request.signal` is read by the sweep only, so a request that ends before one never makes it.
 */
export class RequestSignals {
  /** The client's request per slot: its `signal` is read by the sweep only (Bun makes it on first access, at a cost). */
  private readonly clientRequests: (Request | undefined)[] = [];
  private readonly signals: (RequestSignal | undefined)[] = [];
  private readonly deadlines: number[] = [];
  private readonly freeSlots: number[] = [];
  private watched = 0;
  private timer: ReturnType<typeof setInterval> | null = null;

  private readonly idleMs: number;
  private readonly sweepMs: number;

  constructor(
    private readonly timeoutMs: number,
    /** idleMs: longest silence of an upstream that has started answering (0 = none), see `touch`; sweepMs: how often signals are checked. */
    options: { idleMs?: number; sweepMs?: number } = {},
  ) {
    this.idleMs = options.idleMs ?? 0;
    this.sweepMs = options.sweepMs ?? Math.min(100, Math.max(10, Math.floor(Math.min(timeoutMs, this.idleMs || timeoutMs) / 10)));
  }

  /**
   * The upstream sent something (its headers, a body chunk): its idle clock restarts. A request whose upstream
   * then stays silent for `idleMs` is aborted with a TimeoutError, as at its deadline. One number per call: no timer.
   */
  touch(signal: AbortSignalLike): void {
    if (this.idleMs > 0 && signal instanceof RequestSignal) signal.idleDeadline = performance.now() + this.idleMs;
  }

  /** A signal for this request; give it back with `release` when the request is over. */
  open(request: Request): RequestSignal {
    const signal = new RequestSignal();
    const slot = this.freeSlots.pop() ?? this.signals.length;
    signal.slot = slot;
    this.clientRequests[slot] = request;
    this.signals[slot] = signal;
    this.deadlines[slot] = performance.now() + this.timeoutMs;
    this.watched++;
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.sweepMs);
      this.timer.unref?.();
    }
    return signal;
  }

  /** Stops watching a signal of `open` (anything else is ignored). */
  release(signal: AbortSignalLike): void {
    if (!(signal instanceof RequestSignal) || signal.slot < 0 || this.signals[signal.slot] !== signal) return;
    const slot = signal.slot;
    signal.slot = -1;
    this.clientRequests[slot] = undefined;
    this.signals[slot] = undefined;
    this.freeSlots.push(slot);
    this.watched--;
  }

  /** Requests being watched (for tests). */
  get size(): number {
    return this.watched;
  }

  private sweep(): void {
    const now = performance.now();
    for (let slot = 0; slot < this.signals.length; slot++) {
      const signal = this.signals[slot];
      if (signal === undefined) continue;
      const client = this.clientRequests[slot]!.signal; // aborted too when the client left before this first read
      let reason: unknown;
      if (client.aborted) reason = client.reason;
      else if (now >= this.deadlines[slot]!) reason = new DOMException(`the request took longer than ${this.timeoutMs} ms`, "TimeoutError");
      else if (signal.idleDeadline !== 0 && now >= signal.idleDeadline) {
        reason = new DOMException(`the upstream sent nothing for ${this.idleMs} ms`, "TimeoutError");
      } else continue;
      this.release(signal);
      signal.abort(reason);
    }
    if (this.watched === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }
}
