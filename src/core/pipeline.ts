import type { GatewayContext, Outcome, StreamEvent } from "./context.ts";
import type { Gateway, LocalAnswer, PluginInstance, Provider } from "./plugin.ts";
import type { Logger } from "./log.ts";
import type { ServerConfig } from "./config.ts";
import { GatewayError, ProviderUnavailableError, UpstreamError, asGatewayError } from "./errors.ts";
import type { CanonicalResponse } from "./canonical.ts";
import { RequestBodies } from "./request-body.ts";
import { StreamSession, type StreamHost } from "./stream-session.ts";
import { clientLeft, failure, readError } from "./request-outcome.ts";
import { routeFor, type TranslatedRoute, type UpstreamRoute } from "./route.ts";
import { buildUpstreamBody } from "./upstream.ts";
import { endAttempts, isProviderFailure, sendWithAttempts, upstreamFailure, type Answered, type AttemptHost } from "./attempts.ts";
import { isDeploymentHealth } from "./deployments.ts";
import type { IngressFormat, RelayedFrame, StreamRelay, UpstreamCodec, UpstreamTranslation, WireFormat } from "./format.ts";
import { nanoToUsd } from "./money.ts";
import { RequestSignals } from "./request-signals.ts";
import { afterTurn, requestEnded, requestStarted } from "./turn-end.ts";
import { ClientAddresses } from "./client-ip.ts";
import { errorFields, requestOrigin } from "./request-line.ts";
import type { UpstreamResponse } from "../transport/transport.ts";

export interface Stage {
  name: string;
  instance: PluginInstance;
}

export const REQUEST_ID_HEADER = "x-gateway-request-id";

/** The upstream's answer and the route it came by (relayed or translated). */
interface Upstream {
  response: UpstreamResponse;
  route: UpstreamRoute;
}

/** A request ready for one provider's attempt loop. */
interface Prepared {
  providerName: string;
  provider: Provider;
  route: UpstreamRoute;
  body: Record<string, unknown>;
}


/** Runs plugin hooks around one upstream call per request: the core of the gateway. */
export class Pipeline implements Gateway {
  private active = 0;
  private receivedCount = 0;
  private readonly requestStages: Stage[];
  private readonly headerStages: Stage[];
  private readonly localStages: Stage[];
  private readonly bodies: RequestBodies;
  private readonly providers = new Map<string, Provider>();
  private readonly upstreamHooks: Stage[];
  private readonly fallbackHooks: Stage[];
  private readonly responseHooks: Stage[];
  private readonly streamHooks: Stage[];
  private readonly signals: RequestSignals;
  /** What each stream's session reads of this pipeline (one object, shared by every stream). */
  private readonly streamHost: StreamHost;
  /** Client addresses (the server is attached once it listens: `attachServer`). */
  private readonly addresses: ClientAddresses;
  /** What the attempt loop reads (core/attempts.ts): the settings and a plugin's DeploymentHealth, if any. */
  private readonly attemptHost: AttemptHost;
  /** The observers of every request's start and end (onRequestStart, onRequestEnd). */
  private readonly startHooks: Stage[];
  private readonly endHooks: Stage[];
  /** The attempt that answered each request in flight, told to the health keeper when it is over (only with one). */
  private readonly answering = new WeakMap<GatewayContext, Answered>();

  constructor(
    private readonly stages: Stage[],
    private readonly server: ServerConfig,
    private readonly log: Logger,
    /** Wall clock for request times (injectable for tests of time windows). */
    private readonly now: () => number = Date.now,
  ) {
    this.requestStages = stages;
    this.headerStages = stages.filter((s) => s.instance.onHeaders);
    this.localStages = stages.filter((s) => s.instance.onLocalRequest);
    this.bodies = new RequestBodies(server.max_body_bytes, server.max_body_bytes_in_flight);
    this.signals = new RequestSignals(server.upstream_timeout_ms, { idleMs: server.upstream_idle_timeout_ms });
    this.addresses = new ClientAddresses(server.trusted_proxies);
    this.startHooks = stages.filter((s) => s.instance.onRequestStart);
    this.endHooks = stages.filter((s) => s.instance.onRequestEnd);
    this.attemptHost = {
      observers: stages.flatMap((s) => (s.instance.onUpstreamAttempt ? [s.instance.onUpstreamAttempt.bind(s.instance)] : [])),
      settings: {
        firstByteTimeoutMs: server.upstream_first_byte_timeout_ms,
        firstByteTimeoutNonStreamMs: server.upstream_first_byte_timeout_non_stream_ms,
        maxAttempts: server.upstream_max_attempts, budgetMs: server.upstream_attempts_budget_ms },
      health: stages.map((stage) => stage.instance.provides).find(isDeploymentHealth),
      log,
      now,
    };
    this.streamHost = {
      signals: this.signals,
      observe: (ctx, event) => this.observe(ctx, event),
      complete: (ctx, outcome, reached) => this.complete(ctx, outcome, reached),
      leave: () => this.leave(),
      logError: (message, fields) => this.log.error(message, fields),
    };
    this.upstreamHooks = stages.filter((s) => s.instance.onUpstreamRequest);
    this.fallbackHooks = stages.filter((s) => s.instance.onFallback);
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

  get upstreams(): ReadonlyMap<string, Provider> {
    return this.providers;
  }

  /** The listening server: where the socket peers of requests are read. */
  attachServer(server: { requestIP(request: Request): { address: string } | null }): void {
    this.addresses.listenOn(server);
  }

  clientIp(request: Request): string {
    return this.addresses.of(request);
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

  async handle(request: Request, ingress: IngressFormat): Promise<Response> {
    this.enter(); // in flight from here: a graceful stop waits for it
    this.receivedCount++;
    // The requests that came in this turn of the event loop are handled together once it ends (turn-end.ts).
    await afterTurn(undefined);
    const ctx = this.createContext(request, ingress);
    if (this.startHooks.length > 0) this.started(ctx);
    let reached = 0;
    let streaming = false;
    try {
      // Who is asking, from the headers alone: no byte of the body is read for a caller that is refused.
      for (const stage of this.headerStages) {
        const pending = stage.instance.onHeaders!(ctx);
        if (pending) await pending;
      }
      ctx.body = await this.bodies.readJson(request);
      ctx.request = ingress.decodeRequest(ctx.body);
      for (const stage of this.requestStages) {
        reached++;
        // Most hooks are synchronous: await only a promise (each await costs a microtask turn).
        const pending = stage.instance.onRequest?.(ctx);
        if (pending) await pending;
      }
      const upstream = await this.callUpstream(ctx, ingress);
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
      await this.complete(ctx, clientLeft(ctx) ? { status: "cancelled" } : failure(error), reached);
      return ingress.errorResponse(error, { ...ctx.responseHeaders, [REQUEST_ID_HEADER]: ctx.requestId });
    } finally {
      if (!streaming) this.leave();
    }
  }

  async answerLocally(request: Request, ingress: IngressFormat, local: LocalAnswer): Promise<Response> {
    this.enter();
    this.receivedCount++;
    const ctx = this.createContext(request, ingress);
    if (this.startHooks.length > 0) this.started(ctx);
    let outcome: Outcome = { status: "success" };
    try {
      for (const stage of this.headerStages) {
        const pending = stage.instance.onHeaders!(ctx);
        if (pending) await pending;
      }
      ctx.body = await this.bodies.readJson(request);
      ctx.request = local.decode(ctx.body);
      for (const stage of this.localStages) {
        const pending = stage.instance.onLocalRequest!(ctx);
        if (pending) await pending;
      }
      return Response.json(local.answer(ctx), { headers: { ...ctx.responseHeaders, [REQUEST_ID_HEADER]: ctx.requestId } });
    } catch (thrown) {
      const error = asGatewayError(thrown);
      outcome = failure(error);
      return ingress.errorResponse(error, { ...ctx.responseHeaders, [REQUEST_ID_HEADER]: ctx.requestId });
    } finally {
      // No stage's onRequest ran, so no onComplete: only the signal's release and the request line.
      await this.complete(ctx, outcome, 0);
      this.leave();
    }
  }

  readJson(request: Request): Promise<Record<string, unknown>> {
    return this.bodies.readJson(request);
  }

  private createContext(request: Request, ingress: IngressFormat): GatewayContext {
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
      attempts: [],
      // Read now: at a stream's end the socket may be gone. Not at all when no line is written.
      log: this.log.quiet ? {} : (requestOrigin(request, this.addresses.of(request)) as unknown as Record<string, unknown>),
    };
  }

  /**
   * The upstream's answer: from the target's provider (the attempt loop over its deployments), else, when every
   * deployment failed retryably before any byte reached the client, from each of the model's fallbacks in turn
   * (ctx.fallbacks, the catalog's `fallbacks`), each after the onFallback hooks pointed ctx at it.
   */
  private async callUpstream(ctx: GatewayContext, ingress: IngressFormat): Promise<Upstream> {
    const fallbacks = ctx.fallbacks ?? [];
    const firstProvider = ctx.target?.provider;
    let next = 0;
    let failure: unknown;
    let prepared: Prepared | undefined = await this.prepareUpstream(ctx, ingress, false);
    for (;;) {
      if (prepared) {
        try {
          return await this.sendPrepared(ctx, prepared);
        } catch (error) {
          if (!isProviderFailure(error) || ctx.signal.aborted) throw error;
          failure = error;
        }
      }
      if (next >= fallbacks.length) throw failure;
      const model = fallbacks[next++]!;
      prepared = await this.enterFallback(ctx, ingress, model, firstProvider);
    }
  }

  /** Points ctx at a fallback model and builds its request; undefined (ctx back as it was) when it cannot be tried. */
  private async enterFallback(ctx: GatewayContext, ingress: IngressFormat, model: string, firstProvider: string | undefined): Promise<Prepared | undefined> {
    const previous = ctx.request.model;
    try {
      for (const stage of this.fallbackHooks) {
        const pending = stage.instance.onFallback!(ctx, model);
        if (pending) await pending;
      }
      const prepared = await this.prepareUpstream(ctx, ingress, ctx.target?.provider !== firstProvider);
      this.log.warn("every deployment failed; trying a fallback model", { request_id: ctx.requestId, from: previous, model, provider: ctx.target?.provider });
      return prepared;
    } catch (error) {
      this.log.warn("fallback model skipped", { request_id: ctx.requestId, model, reason: (error as Error)?.message ?? String(error) });
      try {
        for (const stage of this.fallbackHooks) await stage.instance.onFallback!(ctx, previous);
      } catch {
        // Back to the model that was tried: its hold was taken already, nothing can refuse it.
      }
      return undefined;
    }
  }

  /**
   * The route and the upstream body for ctx.target. `crossProvider` (a fallback served by another provider than
   * the first): translated through the canonical request when the formats allow it, never relayed, so no state
   * bound to the first provider (a thinking block's signature, an encrypted reasoning item) reaches the second.
   */
  private async prepareUpstream(ctx: GatewayContext, ingress: IngressFormat, crossProvider: boolean): Promise<Prepared> {
    const target = ctx.target;
    if (!target) throw new GatewayError("no plugin routed the request (is the catalog plugin enabled?)");
    const provider = this.providers.get(target.provider);
    if (!provider) {
      throw new ProviderUnavailableError(`model "${ctx.request.model}" is served by provider "${target.provider}", which is not enabled in this gateway's configuration`);
    }
    let route = routeFor(ingress, provider.codecs, ctx.request.model);
    if (crossProvider && route.relayed && ingress.translation && route.codec.translation) {
      route = { relayed: false, ingress: ingress as TranslatedRoute["ingress"], codec: route.codec as TranslatedRoute["codec"] };
    }
    ctx.upstreamBody = buildUpstreamBody(ctx, provider, route);
    for (const stage of this.upstreamHooks) {
      const pending = stage.instance.onUpstreamRequest!(ctx);
      if (pending) await pending;
    }
    return { providerName: target.provider, provider, route, body: ctx.upstreamBody };
  }

  private async sendPrepared(ctx: GatewayContext, prepared: Prepared): Promise<Upstream> {
    const { providerName, provider, route, body } = prepared;
    const { response, answered } = await sendWithAttempts(this.attemptHost, ctx, providerName, provider, route, body);
    this.signals.touch(ctx.signal); // the upstream answered: from now on its silence is timed
    if (!response.ok) throw await upstreamFailure(response, route.codec, providerName);
    if (answered) this.answering.set(ctx, answered);
    return { response, route };
  }

  private async relayResponse(ctx: GatewayContext, upstream: Upstream, reached: number): Promise<Response> {
    const text = await this.readAnswer(ctx, upstream);
    ctx.firstTokenMono = performance.now();
    const body = parseAnswer(ctx, text);
    const route = upstream.route;
    const translated = route.relayed ? undefined : decodeAnswer(ctx, route.codec, body);
    // A translated answer's id is made from the request id: only a relayed one may keep its own.
    const { usage, id } = route.relayed ? route.codec.readResponse(body) : translated!;
    ctx.usage = usage;
    if (route.relayed) ctx.responseId = id;
    // No usage reported: metering bills the answer's text as counted (an estimate).
    if (usage === undefined) ctx.answerText = answerText(translated ?? tryDecodeAnswer(route.codec, body));
    for (const stage of this.responseHooks) {
      const pending = stage.instance.onResponse!(ctx);
      if (pending) await pending;
    }
    const relayed = route.relayed ? route.codec.relayResponse(body, ctx, text) : route.ingress.translation.encodeResponse(translated!, ctx);
    await this.complete(ctx, { status: "success" }, reached);
    const headers = { ...ctx.responseHeaders, [REQUEST_ID_HEADER]: ctx.requestId, "content-type": "application/json" };
    const out = relayed === undefined ? text : typeof relayed === "string" ? relayed : JSON.stringify(relayed);
    return new Response(out, { status: 200, headers });
  }

  /**
   * A non-streamed answer's whole body; a broken or silent upstream body is a 502 / 504, never a 500.
   * A body of declared length is read whole by the transport (no stream is made for it: ~9 µs less a request,
   * docs/performance.md): its sender has every byte of it, so the idle clock its headers started bounds all of it.
   * A body without a length is read chunk by chunk, each restarting that clock: an upstream may keep it open for
   * minutes while the model thinks (DeepSeek writes an empty line every few seconds until its JSON).
   */
  private async readAnswer(ctx: GatewayContext, upstream: Upstream): Promise<string> {
    if (upstream.response.headers.get("content-length") !== null) {
      try {
        return await upstream.response.text();
      } catch (thrown) {
        throw readError(ctx, thrown);
      }
    }
    const body = upstream.response.body;
    if (!body) return "";
    const reader = body.getReader();
    const chunks: Uint8Array[] = [];
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.signals.touch(ctx.signal);
        chunks.push(value);
      }
    } catch (thrown) {
      reader.cancel().catch(() => {});
      throw readError(ctx, thrown);
    }
    return chunks.length === 1 ? Buffer.from(chunks[0]!.buffer, chunks[0]!.byteOffset, chunks[0]!.byteLength).toString("utf8") : Buffer.concat(chunks).toString("utf8");
  }

  /**
   * An upstream that answers a stream request with one JSON answer (some do when they cannot stream): the
   * client still gets a well-formed stream of its format, made of that answer's events, and it is billed.
   */
  private async jsonAnswerAsStream(ctx: GatewayContext, upstream: Upstream, reached: number, headers: Record<string, string>): Promise<Response> {
    const text = await this.readAnswer(ctx, upstream);
    ctx.firstTokenMono = performance.now();
    const body = parseAnswer(ctx, text);
    const { ingress, codec } = upstream.route;
    if (!codec.translation || !ingress.translation) {
      throw new UpstreamError(`upstream ${ctx.target!.provider} answered a stream request with a JSON body`);
    }
    const answer = decodeAnswer(ctx, codec as TranslatedRoute["codec"], body);
    const encoder = ingress.translation.createStreamEncoder(ctx);
    let out = "";
    for (const event of answerEvents(answer)) {
      this.observe(ctx, event);
      out += encoder.encode(event);
    }
    out += encoder.end();
    await this.complete(ctx, { status: "success" }, reached);
    return new Response(out, { status: 200, headers });
  }

  /** Relays a stream: an event stream goes through a StreamSession (stream-session.ts), a JSON answer is made one. */
  private async relayStream(ctx: GatewayContext, upstream: Upstream, reached: number): Promise<Response> {
    const route = upstream.route;
    const headers = {
      ...ctx.responseHeaders,
      [REQUEST_ID_HEADER]: ctx.requestId,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      // No `connection` header: keep-alive is HTTP/1.1's default (Bun spent time per response on the header),
      // and a hop-by-hop header from the app is wrong behind an HTTP/2 proxy.
    };
    const contentType = upstream.response.headers.get("content-type");
    if (contentType !== null && !contentType.includes("event-stream")) {
      if (contentType.includes("json")) return this.jsonAnswerAsStream(ctx, upstream, reached, headers);
      if (contentType.includes("html")) {
        upstream.response.body?.getReader().cancel().catch(() => {});
        throw new UpstreamError(`upstream ${ctx.target!.provider} answered a stream request with ${contentType.split(";")[0]}, not an event stream`);
      }
    }
    const relay = route.relayed ? relayOf(ctx, route.codec.createStreamRelay) : translatingRelay(ctx, route);
    const body = upstream.response.body;
    if (!body) throw new UpstreamError(`upstream ${ctx.target!.provider} answered a stream without a body`);
    return new StreamSession(this.streamHost, ctx, route.ingress, relay, body.getReader(), reached, headers).open();
  }

  /** What the core reads from each stream event, then every plugin's onStreamEvent. */
  private observe(ctx: GatewayContext, event: StreamEvent): void {
    if (event.type === "usage") ctx.usage = event.usage;
    for (const stage of this.streamHooks) stage.instance.onStreamEvent!(ctx, event);
  }

  private started(ctx: GatewayContext): void {
    for (const stage of this.startHooks) {
      try {
        stage.instance.onRequestStart!(ctx);
      } catch (error) {
        this.log.error("onRequestStart failed", { plugin: stage.name, request_id: ctx.requestId, error: String(error) });
      }
    }
  }

  /** onComplete for every plugin whose onRequest stage was reached (reverse order), the observers' onRequestEnd, then the access log. */
  private async complete(ctx: GatewayContext, outcome: Outcome, reached: number): Promise<void> {
    this.signals.release(ctx.signal);
    // Before onComplete: the generation record keeps the attempts as they ended.
    if (ctx.attempts.length > 0) endAttempts(ctx, outcome, this.attemptHost.health, this.attemptHost.health ? this.answering.get(ctx) : undefined);
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
    for (const stage of this.endHooks) {
      try {
        stage.instance.onRequestEnd!(ctx, outcome);
      } catch (error) {
        this.log.error("onRequestEnd failed", { plugin: stage.name, request_id: ctx.requestId, error: String(error) });
      }
    }
    if (this.log.quiet) return;
    const { method, path, client_ip, ...extra } = ctx.log;
    this.log.request({
      request_id: ctx.requestId,
      method,
      path,
      client_ip,
      model: ctx.request.model || null,
      ingress: ctx.ingress.name,
      stream: ctx.request.stream,
      status: outcome.status === "failed" ? outcome.error.status : outcome.status === "cancelled" ? 499 : 200,
      outcome: outcome.status,
      ...errorFields(outcome.status === "failed" ? outcome.error : undefined),
      latency_ms: Math.round(performance.now() - ctx.startedMono),
      cost_usd: ctx.cost === undefined ? null : nanoToUsd(ctx.cost),
      ...extra,
    });
  }
}

/** A request id: "gen-" and 32 hex characters of a time-ordered UUIDv7 (cheap to index in the store). */
export function newRequestId(): string {
  return "gen-" + Bun.randomUUIDv7().replaceAll("-", "");
}

export const REQUEST_ID_PATTERN = /^gen-[0-9a-f]{32}$/;

/** A relay that decodes the upstream's frames to canonical events and encodes them in the client's format. */
function translatingRelay(ctx: GatewayContext, route: TranslatedRoute): StreamRelay & { end(): RelayedFrame } {
  const decoder = route.codec.translation.createStreamDecoder();
  const encoderOut = route.ingress.translation.createStreamEncoder(ctx);
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

/** The relay of a format that streams (one that does not refuses `stream` when it decodes the request). */
function relayOf(ctx: GatewayContext, create: ((ctx: GatewayContext) => StreamRelay) | undefined): StreamRelay {
  if (!create) throw new GatewayError(`internal error: the ${ctx.ingress.name} format has no stream relay`);
  return create(ctx);
}

/** The upstream's answer as JSON; anything else (an HTML page, a truncated body) is a 502. */
function parseAnswer(ctx: GatewayContext, text: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new UpstreamError(`upstream ${ctx.target!.provider} answered with a body that is not JSON`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new UpstreamError(`upstream ${ctx.target!.provider} answered with JSON that is not an object`);
  return body as Record<string, unknown>;
}

/** The upstream's answer in canonical form; one that is no answer of its format (an error body, `{}`) is a 502. */
function decodeAnswer(ctx: GatewayContext, format: UpstreamCodec & { translation: UpstreamTranslation }, body: Record<string, unknown>): CanonicalResponse {
  if (typeof body.error === "object" && body.error !== null) {
    throw new UpstreamError(`upstream ${ctx.target!.provider} answered with an error: ${format.readUpstreamError(200, JSON.stringify(body)).message}`);
  }
  try {
    return format.translation.decodeResponse(body);
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    throw new UpstreamError(`upstream ${ctx.target!.provider} answered with JSON that is not a ${format.name} answer`, { cause: error });
  }
}

function tryDecodeAnswer(format: UpstreamCodec, body: Record<string, unknown>): CanonicalResponse | undefined {
  try {
    return format.translation?.decodeResponse(body);
  } catch {
    return undefined;
  }
}

/** What an answer generated, as text: for billing an answer whose upstream reported no usage. */
function answerText(answer: CanonicalResponse | undefined): string {
  let text = "";
  for (const part of answer?.content ?? []) {
    if (part.type === "text" || part.type === "reasoning") text += part.text;
    else if (part.type === "tool_call") text += part.name + part.arguments;
  }
  return text;
}

/** A whole answer as the stream events that would have carried it. */
function answerEvents(answer: CanonicalResponse): StreamEvent[] {
  const events: StreamEvent[] = [{ type: "message_start", id: answer.id, model: answer.model }];
  let tool = 0;
  for (const part of answer.content) {
    if (part.type === "text") events.push({ type: "text_delta", text: part.text });
    else if (part.type === "reasoning") {
      events.push({ type: "reasoning_delta", text: part.text });
      if (part.signature) events.push({ type: "reasoning_signature", signature: part.signature, origin: part.origin });
    } else if (part.type === "tool_call") {
      events.push({ type: "tool_call_start", index: tool, id: part.id, name: part.name });
      events.push({ type: "tool_call_delta", index: tool++, arguments: part.arguments });
    }
  }
  if (answer.usage) events.push({ type: "usage", usage: answer.usage });
  events.push({ type: "message_end", finishReason: answer.finishReason });
  return events;
}
