import type { CanonicalRequest, StreamEvent, Usage } from "../formats/canonical.ts";
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
  /** Reads usage and id from a non-streaming upstream answer. */
  readResponse(body: Record<string, unknown>): { usage: Usage; id?: string };
  /** The client's body from the upstream's answer (same format): model name restored. */
  relayResponse(body: Record<string, unknown>, ctx: GatewayContext): unknown;
  /** Per-stream state that relays upstream frames to a client of this same format. */
  createStreamRelay(ctx: GatewayContext): StreamRelay;
  /** The upstream's error message from a non-2xx answer. */
  readUpstreamError(status: number, bodyText: string): { message: string; type?: string; code?: string };
  /** An error event for a stream whose headers are already sent. */
  streamErrorFrame(error: GatewayError): string;
}

export interface RelayedFrame {
  /** Text to send to the client (a whole SSE frame), or null to drop the frame. */
  out: string | null;
  /** What the frame carried, for plugins and metering. */
  events: StreamEvent[];
}

export interface StreamRelay {
  onFrame(frame: SseFrame): RelayedFrame;
}
