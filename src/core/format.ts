import type { CanonicalChatRequest, CanonicalRequest, CanonicalResponse, StreamEvent, Usage } from "./canonical.ts";
import type { GatewayContext } from "./context.ts";
import type { GatewayError } from "./errors.ts";
import type { SseFrame } from "./sse.ts";

/**
 * A wire format, seen from both sides: a client speaking it (ingress) and an upstream speaking it
 * natively (relay). Implementations live in src/formats and are pure: no I/O.
 */
export interface WireFormat {
  readonly name: string;

  /** Validates a client body and summarizes it. Throws InvalidRequestError naming the field. */
  decodeRequest(body: unknown): CanonicalRequest;
  /** The error response in this format. */
  errorResponse(error: GatewayError, headers?: Record<string, string>): Response;

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
  /** Per-stream state that relays upstream frames to a client of this same format. */
  createStreamRelay(ctx: GatewayContext): StreamRelay;
  /** The upstream's error message from a non-2xx answer. */
  readUpstreamError(status: number, bodyText: string): { message: string; type?: string; code?: string };
  /** An error event for a stream whose headers are already sent. */
  streamErrorFrame(error: GatewayError): string;

  /** Translation, used when the client's format and the provider's differ (absent: this format is relay-only). */
  translation?: FormatTranslation;
}

/** The pure translators of a format to and from the canonical form. */
export interface FormatTranslation {
  /** Client side: the client's body in canonical form (throws InvalidRequestError). */
  toCanonical(body: Record<string, unknown>): CanonicalChatRequest;
  /** Client side: a canonical answer in this format. */
  encodeResponse(response: CanonicalResponse, ctx: GatewayContext): unknown;
  /** Client side: canonical stream events to this format's SSE text. */
  createStreamEncoder(ctx: GatewayContext): StreamEncoder;
  /** Upstream side: the body to send an upstream of this format. */
  fromCanonical(request: CanonicalChatRequest, upstreamModel: string): Record<string, unknown>;
  /** Upstream side: an upstream answer in canonical form. */
  decodeResponse(body: Record<string, unknown>): CanonicalResponse;
  /** Upstream side: upstream SSE frames to canonical events. */
  createStreamDecoder(): StreamDecoder;
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
  /** What to send after the upstream's last frame (translating relays close the client's stream). */
  end?(): RelayedFrame;
}
