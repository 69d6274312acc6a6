import type { CanonicalChatRequest, CanonicalRequest, CanonicalResponse, StreamEvent, Usage } from "./canonical.ts";
import type { GatewayContext } from "./context.ts";
import type { GatewayError } from "./errors.ts";
import type { SseFrame } from "./sse.ts";

/**
 * What an ingress needs of a wire format: the client's request decoded, and answers, stream events and errors
 * written in the client's format. Implementations live in src/formats and are pure: no I/O.
 */
export interface IngressFormat {
  readonly name: string;
  /** Validates a client body and summarizes it. Throws InvalidRequestError naming the field. */
  decodeRequest(body: unknown): CanonicalRequest;
  /** The error response in this format. */
  errorResponse(error: GatewayError, headers?: Record<string, string>): Response;
  /** An error event for a stream whose headers are already sent. */
  streamErrorFrame(error: GatewayError): string;
  /** Translation, client side (absent: clients of this format are only ever relayed). */
  readonly translation?: IngressTranslation;
}

/** The client side of translation: the client's body to canonical form, canonical answers and events back. */
export interface IngressTranslation {
  /** The client's body in canonical form (throws InvalidRequestError). */
  toCanonical(body: Record<string, unknown>): CanonicalChatRequest;
  /** A canonical answer in this format. */
  encodeResponse(response: CanonicalResponse, ctx: GatewayContext): unknown;
  /** Canonical stream events to this format's SSE text. */
  createStreamEncoder(ctx: GatewayContext): StreamEncoder;
}

/**
 * What an upstream needs of a wire format: the canonical request encoded, answers and stream events decoded,
 * errors read. A protocol only upstreams speak is an UpstreamCodec alone and lives in its provider's folder.
 */
export interface UpstreamCodec {
  readonly name: string;
  /** The upstream's error message from a non-2xx answer. */
  readUpstreamError(status: number, bodyText: string): UpstreamErrorInfo;
  /** Translation, upstream side (absent: this upstream is only ever sent a client's own body). */
  readonly translation?: UpstreamTranslation;
}

export interface UpstreamErrorInfo {
  message: string;
  type?: string;
  code?: string;
}

/** The upstream side of translation. */
export interface UpstreamTranslation {
  /** The body to send an upstream of this format. */
  fromCanonical(request: CanonicalChatRequest, upstreamModel: string): Record<string, unknown>;
  /** An upstream answer in canonical form. */
  decodeResponse(body: Record<string, unknown>): CanonicalResponse;
  /** Upstream SSE frames to canonical events. */
  createStreamDecoder(): StreamDecoder;
}

/** Both sides of translation, for a format that clients and upstreams speak. */
export type FormatTranslation = IngressTranslation & UpstreamTranslation;

/**
 * A format clients speak and upstreams speak natively: a client of it on such an upstream is relayed, its
 * body and frames passed on as they came (model renamed) and only usage and ids read from them.
 */
export interface WireFormat extends IngressFormat, UpstreamCodec {
  readonly translation?: FormatTranslation;
  /** The upstream body for a client of this same format (model renamed, usage requested). */
  relayRequestBody(ctx: GatewayContext, upstreamModel: string): Record<string, unknown>;
  /**
   * Reads usage from a non-streaming upstream answer (undefined when the upstream reported none: metering
   * then bills the counted text), and its id when the client gets that id as is and may look the request
   * up by it (see GatewayContext.responseId; absent: the request id serves).
   */
  readResponse(body: Record<string, unknown>): { usage?: Usage; id?: string };
  /**
   * The client's body from the upstream's answer (same format, `text` its raw JSON): a string is sent
   * as is, undefined sends `text` unchanged, anything else is serialized.
   */
  relayResponse(body: Record<string, unknown>, ctx: GatewayContext, text: string): unknown;
  /** Per-stream state that relays upstream frames to a client of this same format (absent: the format does not stream). */
  createStreamRelay?(ctx: GatewayContext): StreamRelay;
}

/** A wire format whose clients may ask for a stream. */
export interface StreamingWireFormat extends WireFormat {
  createStreamRelay(ctx: GatewayContext): StreamRelay;
}

export interface StreamEncoder {
  /** SSE text for one event ("" when the event shows nothing in this format). */
  encode(event: StreamEvent): string;
  /** Text that closes the stream after the last event (e.g. `data: [DONE]`). */
  end(): string;
}

export interface StreamDecoder {
  decode(frame: SseFrame): StreamEvent[];
  /** Events owed when the upstream stream ends (e.g. a finish never sent). */
  end(): StreamEvent[];
}

export interface RelayedFrame {
  /** Text to send to the client (a whole SSE frame), or null to drop the frame. */
  out: string | null;
  /** What the frame carried, for plugins and metering. */
  events: StreamEvent[];
}

export interface StreamRelay {
  onFrame(frame: SseFrame): RelayedFrame;
  /** The same as onFrame({ data: text.slice(start, end) }), for a relay that can read the data in place. */
  onData?(text: string, start: number, end: number): RelayedFrame;
  /** What to send after the upstream's last frame (translating relays close the client's stream). */
  end?(): RelayedFrame;
}
