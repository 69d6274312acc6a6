/**
 * The reference transport: Bun's `fetch`, with a cap on the calls in flight per origin.
 *
 * What fetch does by itself, pinned by test/transport/fetch.test.ts:
 * - it never sends a POST twice: a connection reset or closed after the request went out (a reused keep-alive
 *   connection included) fails the call with ECONNRESET, and nothing is resent;
 * - it honours HTTP_PROXY / HTTPS_PROXY (and their lower-case forms) and NO_PROXY from the environment the
 *   process started with, so nothing is passed here;
 * - it keeps at most 256 requests in flight per process unless `BUN_CONFIG_MAX_HTTP_REQUESTS` is set at start-up:
 *   the per-origin cap below applies under that one.
 */
import { UpstreamTimeoutError } from "../core/errors.ts";
import { RequestSignal, type AbortSignalLike } from "../core/request-signals.ts";
import { OriginLimiter, Slot, originOf } from "./origin-limiter.ts";
import type { UpstreamBodyReader, UpstreamCall, UpstreamResponse, UpstreamTransport } from "./transport.ts";

export interface FetchTransportOptions {
  /** Calls in flight per origin, each from its send until its body is read, cancelled or failed. */
  maxConnectionsPerOrigin: number;
}

/** A transport over Bun's fetch. */
export function createFetchTransport(options: FetchTransportOptions): UpstreamTransport {
  const limiter = new OriginLimiter(options.maxConnectionsPerOrigin);
  /** Not async: one promise less per call. */
  return function upstreamFetch(call: UpstreamCall): Promise<UpstreamResponse> {
    const body = JSON.stringify(call.body); // may throw (a body too deep): before a slot is taken
    const origin = originOf(call.url);
    const slot = limiter.tryAcquire(origin);
    if (slot !== undefined) return send(call, body, slot);
    return limiter.wait(origin, call.signal).then(
      (granted) => send(call, body, granted),
      (reason: unknown) => {
        throw callError(reason, call.signal);
      },
    );
  };
}

function send(call: UpstreamCall, body: string, slot: Slot): Promise<UpstreamResponse> {
  return fetch(call.url, { method: "POST", headers: call.headers, body, signal: domSignal(call.signal) }).then(
    (response) => new LimitedResponse(response, slot),
    (error: unknown) => {
      slot.release();
      throw callError(error, call.signal);
    },
  );
}

/** A deadline reads as a timeout (504); anything else as it came. */
function callError(error: unknown, signal: AbortSignalLike): unknown {
  if ((error as Error)?.name === "TimeoutError" || (signal.aborted && (signal.reason as Error | undefined)?.name === "TimeoutError")) {
    return new UpstreamTimeoutError("upstream did not answer in time");
  }
  return error;
}

/** fetch takes a DOM AbortSignal only. */
function domSignal(signal: AbortSignalLike): AbortSignal {
  return signal instanceof RequestSignal ? signal.toAbortSignal() : (signal as AbortSignal);
}

/**
 * A slot whose answer is dropped unread (an exception between send and read) goes back when the answer is
 * collected, as fetch's own connection does; once its body has a reader, when that reader is collected.
 */
const unread = new FinalizationRegistry<Slot | ReaderHold>(function releaseCollected(held) {
  if (held instanceof ReaderHold) held.slot.release();
  else if (!held.readerTaken) held.release();
});

class ReaderHold {
  constructor(readonly slot: Slot) {}
}

/**
 * fetch's answer, holding its origin slot until the body is read to the end, cancelled or failed. The body's
 * reader is fetch's own: nothing is added per chunk, the reader's `closed` promise says when it is over.
 */
class LimitedResponse implements UpstreamResponse {
  constructor(
    private readonly response: Response,
    private readonly slot: Slot,
  ) {
    unread.register(this, slot);
  }

  get status(): number {
    return this.response.status;
  }

  get ok(): boolean {
    return this.response.ok;
  }

  get headers(): Headers {
    return this.response.headers;
  }

  get body(): { getReader(): UpstreamBodyReader } | null {
    if (this.response.body === null) {
      this.slot.release();
      return null;
    }
    return this;
  }

  getReader(): UpstreamBodyReader {
    const reader = this.response.body!.getReader();
    const slot = this.slot;
    slot.readerTaken = true;
    unread.register(reader, new ReaderHold(slot));
    const release = () => slot.release();
    reader.closed.then(release, release);
    return reader;
  }

  text(): Promise<string> {
    const slot = this.slot;
    return this.response.text().then(
      (text) => {
        slot.release();
        return text;
      },
      (error: unknown) => {
        slot.release();
        throw error;
      },
    );
  }
}
