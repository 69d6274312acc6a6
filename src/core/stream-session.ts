import type { GatewayContext, Outcome, StreamEvent } from "./context.ts";
import { GatewayError, UpstreamError, asGatewayError } from "./errors.ts";
import type { IngressFormat, RelayedFrame, StreamRelay } from "./format.ts";
import type { RequestSignals } from "./request-signals.ts";
import { abortError, clientLeft, failure, readError } from "./request-outcome.ts";
import { SseSplitter, type SseSink } from "./sse.ts";
import type { UpstreamBodyReader } from "../transport/transport.ts";

/** What a stream session needs of its pipeline (one object per pipeline, not per stream). */
export interface StreamHost {
  readonly signals: RequestSignals;
  /** What the core reads from a stream event, then every plugin's onStreamEvent. */
  observe(ctx: GatewayContext, event: StreamEvent): void;
  /** onComplete of the stages reached, the request line. */
  complete(ctx: GatewayContext, outcome: Outcome, reached: number): Promise<void>;
  /** The request is no longer in flight. */
  leave(): void;
  logError(message: string, fields: Record<string, unknown>): void;
}

type Read = ReturnType<UpstreamBodyReader["read"]>;

/**
 * One relayed stream, from the upstream's first bytes to the request's settlement. What the upstream has already
 * sent is relayed before the headers go out (`open`): a stream whose whole body is here (a short answer) is
 * answered as one body in one write, like the bare proxy's native pipe; the rest streams frame by frame as it
 * comes (`pump`). Nothing waits for bytes that have not arrived: a read still pending a microtask after it was
 * asked for ends the first phase.
 *
 * The steps are methods of one object: a stream allocates this session, its frame sink and its stream source, nothing per frame.
 */
export class StreamSession {
  private readonly splitter = new SseSplitter();
  /** The upstream's body has ended (its last read said done). */
  private drained = false;
  /** The client went away (the stream was cancelled or a write found the socket closed). */
  private clientGone = false;
  /** The request is settled (onComplete ran, it left the in-flight count). */
  private finished = false;
  private framesSeen = false;
  /** The upstream's own error event, if it sent one: it is the stream's outcome, and the client has it already. */
  private streamError: { message: string; status?: number } | undefined;
  /** The client's text for the read being relayed. */
  private batch = "";
  /** Text relayed before the headers went out, not yet written. */
  private head = "";
  /** A read that failed after the first frames, before the headers went out: the stream ends with it. */
  private headError: GatewayError | undefined;
  /** A read asked for and not yet awaited. */
  private next: Read | undefined;

  constructor(
    private readonly host: StreamHost,
    private readonly ctx: GatewayContext,
    private readonly ingress: IngressFormat,
    private readonly relay: StreamRelay,
    private readonly reader: UpstreamBodyReader,
    /** How many request stages ran (their onComplete runs when the stream settles). */
    private readonly reached: number,
    private readonly headers: Record<string, string>,
  ) {}

  /**
   * Start: relays what is already here. A read that fails before any frame is an error response (no header has
   * gone out); after frames, those frames still go out, then the error frame, as in a stream.
   */
  async open(): Promise<Response> {
    const ctx = this.ctx;
    let next: Read | undefined = this.reader.read();
    try {
      while (next !== undefined && !ctx.signal.aborted) {
        if (Bun.peek.status(next) === "pending") {
          await undefined; // one microtask: a body that has just ended says so by then
          if (Bun.peek.status(next) === "pending") break;
        }
        let result: Awaited<Read>;
        try {
          result = await next;
        } catch (thrown) {
          throw readError(ctx, thrown);
        }
        this.head += this.relayRead(result.value, result.done);
        next = result.done ? undefined : this.reader.read();
      }
    } catch (thrown) {
      await this.stopUpstream();
      if (ctx.firstTokenMono === undefined) throw thrown;
      this.headError = asGatewayError(thrown);
      next = undefined;
    }
    // A read left pending is awaited by the stream's pull, unless the client is gone first: never unhandled.
    next?.catch(() => {});
    this.next = next;
    if (this.drained && !this.framesSeen) throw new UpstreamError(`upstream ${ctx.target!.provider} ended the stream without sending an event`);
    if (!this.drained && ctx.signal.aborted && ctx.firstTokenMono === undefined) {
      await this.stopUpstream();
      throw abortError(ctx);
    }
    if (this.drained) {
      const { out, outcome } = this.closing();
      await this.finish(outcome);
      return new Response(this.head + out, { status: 200, headers: this.headers });
    }

    // The rest streams. Bun's direct stream: frames are written straight to the socket (no queue, no
    // per-frame encode) and flushed as they come, so the client sees each one at once.
    const stream = new ReadableStream({
      type: "direct",
      pull: (controller: ReadableStreamDirectController) => this.pump(controller),
      // The client went away: stop the upstream, bill what was generated.
      cancel: () => this.clientLeftStep(),
    });
    return new Response(stream, { status: 200, headers: this.headers });
  }

  /** Pump: the stream's pull. The frames of one upstream read go out in one write. */
  private async pump(controller: ReadableStreamDirectController): Promise<void> {
    const ctx = this.ctx;
    try {
      if (this.head !== "") {
        const written = controller.write(this.head);
        this.head = "";
        if (written === 0) return await this.abandon();
      }
      if (this.headError) throw this.headError;
      while (!this.drained && !this.clientGone && !ctx.signal.aborted) {
        const pending = this.next ?? this.reader.read();
        this.next = undefined;
        let result: Awaited<Read>;
        try {
          result = await pending;
        } catch (thrown) {
          throw readError(ctx, thrown);
        }
        if (this.clientGone) break;
        const out = this.relayRead(result.value, result.done);
        if (out !== "") {
          const written = controller.write(out);
          if (written === 0) return await this.abandon(); // the client went away
          if (typeof written !== "number") {
            await written; // backpressure: wait for the socket to drain
            this.host.signals.touch(ctx.signal); // the client's pace, not the upstream's silence
          }
        }
      }
      if (this.clientGone) return;
      if (!this.drained) await this.onStopped();
      const { out, outcome } = this.closing();
      if (out) controller.write(out);
      await this.finish(outcome);
      await controller.end();
    } catch (thrown) {
      await this.onError(controller, thrown);
    }
  }

  /** Pump one frame batch: the client's text for one upstream read (the frames it completes). */
  private relayRead(value: Uint8Array | undefined, done: boolean): string {
    this.batch = "";
    if (done) {
      this.drained = true;
      for (const frame of this.splitter.end()) this.sink.frame(frame);
    } else {
      this.host.signals.touch(this.ctx.signal);
      this.splitter.feed(value!, this.sink);
    }
    const out = this.batch;
    this.batch = "";
    return out;
  }

  /** The frames of one read, relayed as the splitter cuts them: their client text gathers in `batch`. */
  private readonly sink: SseSink = {
    data: (text, start, end) => {
      this.frameSeen();
      const relay = this.relay;
      this.relayed(relay.onData ? relay.onData(text, start, end) : relay.onFrame({ data: text.slice(start, end) }));
    },
    frame: (frame) => {
      this.frameSeen();
      this.relayed(this.relay.onFrame(frame));
    },
  };

  private frameSeen(): void {
    this.framesSeen = true;
    this.ctx.firstTokenMono ??= performance.now();
  }

  private relayed(relayed: RelayedFrame): void {
    this.observeAll(relayed.events);
    if (relayed.out !== null) this.batch += relayed.out;
  }

  private observeAll(events: readonly StreamEvent[]): void {
    for (const event of events) {
      if (event.type === "error") this.streamError = event;
      this.host.observe(this.ctx, event);
    }
  }

  /**
   * On idle: the pump stopped with the upstream not drained, its deadline passed or its silence ran too long
   * (or the client left, as the sweep saw). The upstream is stopped; a timeout is the client's error event.
   */
  private async onStopped(): Promise<void> {
    await this.stopUpstream();
    if (!clientLeft(this.ctx)) throw abortError(this.ctx); // the upstream timed out: the client gets the error event
    if (!this.framesSeen) throw new UpstreamError(`upstream ${this.ctx.target!.provider} ended the stream without sending an event`);
  }

  /** On upstream error (or our own deadline): one error event to the client, then the stream ends. */
  private async onError(controller: ReadableStreamDirectController, thrown: unknown): Promise<void> {
    await this.stopUpstream();
    const error = thrown instanceof GatewayError ? thrown : readError(this.ctx, thrown);
    try {
      // One error event per stream: an upstream's own error event may have gone out already.
      if (this.streamError === undefined) controller.write(this.ingress.streamErrorFrame(error));
    } catch {}
    await this.finish(this.clientGone || clientLeft(this.ctx) ? { status: "cancelled" } : failure(error));
    try {
      await controller.end();
    } catch {}
  }

  /** On client left: the stream was cancelled. */
  private clientLeftStep(): Promise<void> {
    return this.abandon().catch((error: unknown) =>
      this.host.logError("stream cancel failed", { request_id: this.ctx.requestId, error: String((error as Error)?.stack ?? error) }),
    );
  }

  private async abandon(): Promise<void> {
    this.clientGone = true;
    await this.stopUpstream();
    await this.finish({ status: "cancelled" });
  }

  /** Stops reading the upstream (a drained body needs nothing: releasing it costs a streaming gateway measurable CPU). */
  private async stopUpstream(): Promise<void> {
    if (!this.drained) await this.reader.cancel().catch(() => {});
  }

  /** The relay's last words once the upstream is drained or stopped, and the stream's outcome. */
  private closing(): { out: string; outcome: Outcome } {
    // Only a drained upstream gets the relay's verdict on how it ended; one stopped for a client that left has none.
    const tail = this.drained ? this.relay.end?.() : undefined;
    this.observeAll(tail?.events ?? []);
    const outcome: Outcome = this.streamError
      ? { status: "failed", error: { status: this.streamError.status ?? 502, code: "upstream_error", message: this.streamError.message } }
      : clientLeft(this.ctx)
        ? { status: "cancelled" }
        : { status: "success" };
    return { out: tail?.out ?? "", outcome };
  }

  /** Settle: onComplete and the request line, once, then the request leaves the in-flight count. */
  private async finish(outcome: Outcome): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    try {
      await this.host.complete(this.ctx, outcome, this.reached);
    } finally {
      this.host.leave();
    }
  }
}
