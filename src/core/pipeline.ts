import type { GatewayContext, Outcome, StreamEvent } from "./context.ts";
import type { Gateway, PluginInstance, Provider } from "./plugin.ts";
import type { Logger } from "./log.ts";
import type { ServerConfig } from "./config.ts";
import {
  GatewayError,
  InvalidRequestError,
  PayloadTooLargeError,
  ProviderUnavailableError,
  UpstreamError,
  UpstreamHttpError,
  asGatewayError,
} from "./errors.ts";
import { SseSplitter, type SseFrame } from "./sse.ts";
import { assertTranslatable, crossesFormats } from "./translate.ts";
import type { RelayedFrame, StreamRelay, WireFormat } from "./format.ts";
import { nanoToUsd } from "./money.ts";
import { RequestSignals } from "./request-signals.ts";
import { afterTurn, requestEnded, requestStarted } from "./turn-end.ts";
import type { UpstreamResponse } from "./upstream-client.ts";

export interface Stage {
  name: string;
  instance: PluginInstance;
}

export const REQUEST_ID_HEADER = "x-gateway-request-id";

/** The upstream's answer and the format it speaks. */
interface Upstream {
  response: UpstreamResponse;
  format: WireFormat;
}


/** Runs plugin hooks around one upstream call per request: the core of the gateway. */
export class Pipeline implements Gateway {
  private active = 0;
  private receivedCount = 0;
  private readonly requestStages: Stage[];
  private readonly providers = new Map<string, Provider>();
  private readonly upstreamHooks: Stage[];
  private readonly responseHooks: Stage[];
  private readonly streamHooks: Stage[];
  private readonly signals: RequestSignals;

  constructor(
    private readonly stages: Stage[],
    private readonly server: ServerConfig,
    private readonly log: Logger,
    /** Wall clock for request times (injectable for tests of time windows). */
    private readonly now: () => number = Date.now,
  ) {
    this.requestStages = stages;
    this.signals = new RequestSignals(server.upstream_timeout_ms);
    this.upstreamHooks = stages.filter((s) => s.instance.onUpstreamRequest);
    this.responseHooks = stages.filter((s) => s.instance.onResponse).reverse();
    this.streamHooks = stages.filter((s) => s.instance.onStreamEvent).reverse();
    for (const { name, instance } of stages) {
      for (const [providerName, provider] of Object.entries(instance.providers ?? {})) {
        if (this.providers.has(providerName)) throw new Error(`provider "${providerName}" is served by two plugins (second: ${name})`);
        this.providers.set(providerName, provider);
      }
    }
  }

  get inFlight(): number {
    return this.active;
  }

  /** Requests received since start. */
  get received(): number {
    return this.receivedCount;
  }

  /** A request in flight: this pipeline's count (graceful stop) and the process's (turn-end.ts). */
  private enter(): void {
    this.active++;
    requestStarted();
  }

  private leave(): void {
    this.active--;
    requestEnded();
  }

  async handle(request: Request, ingress: WireFormat): Promise<Response> {
    this.enter(); // in flight from here: a graceful stop waits for it
    this.receivedCount++;
    // The requests that came in this turn of the event loop are handled together once it ends (turn-end.ts).
    await afterTurn(undefined);
    const ctx = this.createContext(request, ingress);
    let reached = 0;
    let streaming = false;
    try {
      ctx.body = await readJsonBody(request, this.server.max_body_bytes);
      ctx.request = ingress.decodeRequest(ctx.body);
      for (const stage of this.requestStages) {
        reached++;
        // Most hooks are synchronous: await only a promise (each await costs a microtask turn).
        const pending = stage.instance.onRequest?.(ctx);
        if (pending) await pending;
      }
      const upstream = await this.callUpstream(ctx);
      // The answer goes out with the others of this turn of the event loop (turn-end.ts).
      if (ctx.request.stream) {
        const response = await this.relayStream(ctx, upstream, reached);
        streaming = true; // from here the stream's own end counts it out
        return await afterTurn(response);
      }
      return await afterTurn(await this.relayResponse(ctx, upstream, reached));
    } catch (thrown) {
      const error = asGatewayError(thrown);
      if (!(thrown instanceof GatewayError)) {
        this.log.error("unexpected error", { request_id: ctx.requestId, error: String((thrown as Error)?.stack ?? thrown) });
      }
      await this.complete(ctx, failure(error), reached);
      return ingress.errorResponse(error, { ...ctx.responseHeaders, [REQUEST_ID_HEADER]: ctx.requestId });
    } finally {
      if (!streaming) this.leave();
    }
  }

  private createContext(request: Request, ingress: WireFormat): GatewayContext {
    return {
      requestId: newRequestId(),
      startedAt: this.now(),
      startedMono: performance.now(),
      signal: this.signals.open(request),
      headers: request.headers,
      ingress,
      body: {},
      request: { model: "", stream: false, clientWantsStreamUsage: false },
      responseHeaders: {},
      log: {},
    };
  }

  private async callUpstream(ctx: GatewayContext): Promise<Upstream> {
    const target = ctx.target;
    if (!target) throw new GatewayError("no plugin routed the request (is the catalog plugin enabled?)");
    const provider = this.providers.get(target.provider);
    if (!provider) {
      throw new ProviderUnavailableError(`model "${ctx.request.model}" is served by provider "${target.provider}", which is not enabled in this gateway's configuration`);
    }
    const format = provider.formats.includes(ctx.ingress) ? ctx.ingress : provider.formats[0]!;
    if (crossesFormats(ctx, format)) assertTranslatable(ctx.ingress, format, ctx.request.model);
    ctx.upstreamBody = provider.buildBody(ctx, format);
    for (const stage of this.upstreamHooks) {
      const pending = stage.instance.onUpstreamRequest!(ctx);
      if (pending) await pending;
    }
    let response: UpstreamResponse;
    try {
      response = await provider.send(ctx, ctx.upstreamBody, format);
    } catch (error) {
      if (error instanceof GatewayError) throw error;
      throw new UpstreamError(`upstream ${target.provider} could not be reached: ${(error as Error).message}`, { cause: error });
    }
    if (!response.ok) throw await upstreamFailure(response, format, target.provider);
    return { response, format };
  }

  private async relayResponse(ctx: GatewayContext, upstream: Upstream, reached: number): Promise<Response> {
    const text = await upstream.response.text();
    ctx.firstTokenMono = performance.now();
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text);
    } catch {
      throw new UpstreamError(`upstream ${ctx.target!.provider} answered with a body that is not JSON`);
    }
    const format = upstream.format;
    const translated = crossesFormats(ctx, format) ? format.translation!.decodeResponse(body) : undefined;
    // A translated answer's id is made from the request id: only a relayed one may keep its own.
    const { usage, id } = translated ?? format.readResponse(body);
    ctx.usage = usage;
    if (!translated) ctx.responseId = id;
    for (const stage of this.responseHooks) {
      const pending = stage.instance.onResponse!(ctx);
      if (pending) await pending;
    }
    const relayed = translated ? ctx.ingress.translation!.encodeResponse(translated, ctx) : format.relayResponse(body, ctx, text);
    await this.complete(ctx, { status: "success" }, reached);
    const headers = { ...ctx.responseHeaders, [REQUEST_ID_HEADER]: ctx.requestId, "content-type": "application/json" };
    const out = relayed === undefined ? text : typeof relayed === "string" ? relayed : JSON.stringify(relayed);
    return new Response(out, { status: 200, headers });
  }

  /**
   * Relays a stream. What the upstream has already sent is relayed before the headers go out: a stream whose
   * whole body is here (a short answer) is answered as one body in one write, like the bare proxy's native
   * pipe; the rest streams frame by frame as it comes. Nothing waits for bytes that have not arrived: a read
   * still pending a microtask after it was asked for ends this phase.
   */
  private async relayStream(ctx: GatewayContext, upstream: Upstream, reached: number): Promise<Response> {
    const format = upstream.format;
    const relay = crossesFormats(ctx, format) ? translatingRelay(ctx, format) : format.createStreamRelay(ctx);
    const body = upstream.response.body;
    if (!body) throw new UpstreamError(`upstream ${ctx.target!.provider} answered a stream without a body`);
    const reader = body.getReader();
    const splitter = new SseSplitter();
    let drained = false;
    let clientGone = false;
    let finished = false;
    let streamError: { message: string; status?: number } | undefined;
    const finish = async (outcome: Outcome) => {
      if (finished) return;
      finished = true;
      try {
        await this.complete(ctx, outcome, reached);
      } finally {
        this.leave();
      }
    };
    /** Stops reading the upstream (a drained body needs nothing: releasing it costs ~2% of a streaming gateway's CPU). */
    const stopUpstream = async () => {
      if (!drained) await reader.cancel().catch(() => {});
    };
    const abandon = async () => {
      clientGone = true;
      await stopUpstream();
      await finish({ status: "cancelled" });
    };
    const observeAll = (events: readonly StreamEvent[]) => {
      for (const event of events) {
        if (event.type === "error") streamError = event;
        this.observe(ctx, event);
      }
    };
    /** The client's text for one upstream read (the frames it completes). */
    const relayRead = (value: Uint8Array | undefined, done: boolean): string => {
      if (done) drained = true;
      const frames = done ? splitter.end() : splitter.push(value!);
      if (frames.length === 0) return "";
      ctx.firstTokenMono ??= performance.now();
      let out = "";
      for (const frame of frames) {
        const relayed = relay.onFrame(frame);
        observeAll(relayed.events);
        if (relayed.out !== null) out += relayed.out;
      }
      return out;
    };
    /** What a failed upstream read is to the client: the upstream's failure, or our own deadline or disconnect. */
    const readFailure = (thrown: unknown): GatewayError => {
      if (thrown instanceof GatewayError) return thrown;
      if (ctx.signal.aborted) return new UpstreamError("upstream stream aborted (timeout or client disconnect)");
      return new UpstreamError(`upstream ${ctx.target!.provider} stream failed: ${(thrown as Error)?.message ?? String(thrown)}`, { cause: thrown });
    };
    /** The relay's last words once the upstream is drained or stopped, and the stream's outcome. */
    const closing = (): { out: string; outcome: Outcome } => {
      const tail = relay.end?.();
      observeAll(tail?.events ?? []);
      const outcome: Outcome = streamError
        ? { status: "failed", error: { status: streamError.status ?? 502, code: "upstream_error", message: streamError.message } }
        : ctx.signal.aborted
          ? { status: "cancelled" }
          : { status: "success" };
      return { out: tail?.out ?? "", outcome };
    };
    const headers = {
      ...ctx.responseHeaders,
      [REQUEST_ID_HEADER]: ctx.requestId,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      // No `connection` header: keep-alive is HTTP/1.1's default (Bun spent ~0.5 µs per response on the header),
      // and a hop-by-hop header from the app is wrong behind an HTTP/2 proxy.
    };

    // What is already here. A read that fails before any frame is an error response (no header has gone out);
    // after frames, those frames still go out, then the error frame, as in a stream.
    let head = "";
    let headError: GatewayError | undefined;
    let next: ReturnType<typeof reader.read> | undefined = reader.read();
    try {
      while (next !== undefined && !ctx.signal.aborted) {
        if (Bun.peek.status(next) === "pending") {
          await undefined; // one microtask: a body that has just ended says so by then
          if (Bun.peek.status(next) === "pending") break;
        }
        let result: Awaited<typeof next>;
        try {
          result = await next;
        } catch (thrown) {
          throw readFailure(thrown);
        }
        head += relayRead(result.value, result.done);
        next = result.done ? undefined : reader.read();
      }
    } catch (thrown) {
      await stopUpstream();
      if (ctx.firstTokenMono === undefined) throw thrown;
      headError = asGatewayError(thrown);
      next = undefined;
    }
    if (drained) {
      const { out, outcome } = closing();
      await finish(outcome);
      return new Response(head + out, { status: 200, headers });
    }

    // The rest streams. Bun's direct stream: frames are written straight to the socket (no queue, no
    // per-frame encode) and flushed as they come, so the client sees each one at once.
    const stream = new ReadableStream({
      type: "direct",
      pull: async (controller: ReadableStreamDirectController) => {
        try {
          if (head !== "") {
            const written = controller.write(head);
            head = "";
            if (written === 0) return await abandon();
          }
          if (headError) throw headError;
          // The frames of one upstream read go out in one write.
          while (!drained && !clientGone && !ctx.signal.aborted) {
            const pending = next ?? reader.read();
            next = undefined;
            let result: Awaited<typeof pending>;
            try {
              result = await pending;
            } catch (thrown) {
              throw readFailure(thrown);
            }
            const { value, done } = result;
            if (clientGone) break;
            const out = relayRead(value, done);
            if (out !== "") {
              const written = controller.write(out);
              if (written === 0) return await abandon(); // the client went away
              if (typeof written !== "number") await written; // backpressure: wait for the socket to drain
            }
          }
          if (clientGone) return;
          if (!drained) await stopUpstream(); // deadline passed or client gone (seen by the sweep)
          const { out, outcome } = closing();
          if (out) controller.write(out);
          await finish(outcome);
          await controller.end();
        } catch (thrown) {
          await stopUpstream();
          const error = ctx.signal.aborted && !(thrown instanceof GatewayError)
            ? new UpstreamError("upstream stream aborted (timeout or client disconnect)")
            : asGatewayError(thrown);
          try {
            controller.write(ctx.ingress.streamErrorFrame(error));
          } catch {}
          await finish(ctx.signal.aborted || clientGone ? { status: "cancelled" } : failure(error));
          try {
            await controller.end();
          } catch {}
        }
      },
      // The client went away: stop the upstream, bill what was generated.
      cancel: abandon,
    });
    return new Response(stream, { status: 200, headers });
  }

  /** What the core reads from each stream event, then every plugin's onStreamEvent. */
  private observe(ctx: GatewayContext, event: StreamEvent): void {
    if (event.type === "usage") ctx.usage = event.usage;
    for (const stage of this.streamHooks) stage.instance.onStreamEvent!(ctx, event);
  }

  /** onComplete for every plugin whose onRequest stage was reached (reverse order), then the access log. */
  private async complete(ctx: GatewayContext, outcome: Outcome, reached: number): Promise<void> {
    this.signals.release(ctx.signal);
    for (let index = reached - 1; index >= 0; index--) {
      const stage = this.requestStages[index]!;
      if (!stage.instance.onComplete) continue;
      try {
        const pending = stage.instance.onComplete(ctx, outcome);
        if (pending) await pending;
      } catch (error) {
        this.log.error("onComplete failed", { plugin: stage.name, request_id: ctx.requestId, error: String(error) });
      }
    }
    if (this.log.quiet) return;
    this.log.request({
      request_id: ctx.requestId,
      model: ctx.request.model || null,
      ingress: ctx.ingress.name,
      stream: ctx.request.stream,
      status: outcome.status === "failed" ? outcome.error.status : outcome.status === "cancelled" ? 499 : 200,
      outcome: outcome.status,
      latency_ms: Math.round(performance.now() - ctx.startedMono),
      cost_usd: ctx.cost === undefined ? null : nanoToUsd(ctx.cost),
      ...ctx.log,
    });
  }
}

function failure(error: GatewayError): Outcome {
  return { status: "failed", error: { status: error.status, code: error.code, message: error.message } };
}

/** Maps an upstream's non-2xx answer to what the client should see. */
async function upstreamFailure(response: UpstreamResponse, format: WireFormat, name: string): Promise<GatewayError> {
  const text = await response.text().catch(() => "");
  const info = format.readUpstreamError(response.status, text);
  const message = `upstream ${name} answered ${response.status}: ${info.message}`;
  if (response.status === 400 || response.status === 413 || response.status === 422) {
    return new UpstreamHttpError(response.status === 422 ? 400 : response.status, message, "invalid_request_error", info.code ?? "upstream_invalid_request");
  }
  if (response.status === 429) {
    const error = new UpstreamHttpError(429, message, "rate_limit_error", "upstream_rate_limited");
    const retryAfter = response.headers.get("retry-after");
    if (retryAfter) error.headers = { "retry-after": retryAfter };
    return error;
  }
  if (response.status === 503 || response.status === 529) {
    return new UpstreamHttpError(503, message, "overloaded_error", "upstream_overloaded");
  }
  // 401/403 upstream mean the gateway's own provider key is wrong: never a client-key problem.
  return new UpstreamHttpError(502, message, "upstream_error", "upstream_error");
}

/** Reads the client's JSON body; 413 past the limit, 400 when it is not a JSON object. */
async function readJsonBody(request: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > maxBytes) throw new PayloadTooLargeError(`request body is ${declared} bytes; the limit is ${maxBytes} bytes`);
  const text = await request.text();
  if (text.length > maxBytes / 4 && Buffer.byteLength(text) > maxBytes) {
    throw new PayloadTooLargeError(`request body exceeds the limit of ${maxBytes} bytes`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new InvalidRequestError(`request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new InvalidRequestError("request body must be a JSON object");
  return body as Record<string, unknown>;
}

/** A request id: "gen-" and 32 hex characters of a time-ordered UUIDv7 (cheap to index in the store). */
export function newRequestId(): string {
  return "gen-" + Bun.randomUUIDv7().replaceAll("-", "");
}

export const REQUEST_ID_PATTERN = /^gen-[0-9a-f]{32}$/;

/** A relay that decodes the upstream's frames to canonical events and encodes them in the client's format. */
function translatingRelay(ctx: GatewayContext, upstream: WireFormat): StreamRelay & { end(): RelayedFrame } {
  const decoder = upstream.translation!.createStreamDecoder();
  const encoderOut = ctx.ingress.translation!.createStreamEncoder(ctx);
  const encodeAll = (events: StreamEvent[]): RelayedFrame => {
    let out = "";
    for (const event of events) out += encoderOut.encode(event);
    return { out: out === "" ? null : out, events };
  };
  return {
    onFrame: (frame) => encodeAll(decoder.decode(frame)),
    end() {
      const last = encodeAll(decoder.end());
      return { out: (last.out ?? "") + encoderOut.end() || null, events: last.events };
    },
  };
}
