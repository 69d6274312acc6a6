import type { CanonicalChatRequest, CanonicalRequest, StreamEvent, Usage } from "./canonical.ts";
import type { NanoUsd } from "./money.ts";
import type { AbortSignalLike } from "./request-signals.ts";
import type { AttemptRecord } from "./deployments.ts";

/**
 * What plugins read of the client's wire format: its name. The codec itself is the core's (core/format.ts), which
 * depends on this module and never the other way round.
 */
export interface FormatTag {
  readonly name: string;
}

/** Where the router sends a request: a provider (by name) and the model name upstream knows. */
export interface Target {
  provider: string;
  upstreamModel: string;
}

export type Outcome =
  | { status: "success" }
  | { status: "failed"; error: { status: number; code: string; message: string } }
  | { status: "cancelled" };

/**
 * The one object a request's plugins share. Each field has one writer (named in that plugin's
 * README); plugins add their own fields by declaration merging on this interface.
 */
export interface GatewayContext {
  readonly requestId: string;
  /** Wall-clock start, epoch milliseconds. */
  readonly startedAt: number;
  /** Monotonic start (performance.now()), for latencies. */
  readonly startedMono: number;
  /** Aborted when the client goes away or the request times out (a RequestSignal; not a DOM AbortSignal). */
  readonly signal: AbortSignalLike;
  readonly headers: Headers;
  /** The client's wire format. */
  readonly ingress: FormatTag;
  /** The client's JSON body as sent. */
  body: Record<string, unknown>;
  /** What plugins read about the request regardless of format. Writer: the core (ingress decode). */
  request: CanonicalRequest;
  /** The whole request in canonical form, built only when formats differ. Writer: the core (route.ts). */
  canonical?: CanonicalChatRequest;
  /** Writer: the router (catalog plugin); a later plugin may re-route (sandbox). */
  target?: Target;
  /**
   * Models to try, in order, when every deployment of the target's provider failed retryably before any byte
   * reached the client (the catalog's `fallbacks`; absent: none). Writer: the router (catalog).
   */
  fallbacks?: readonly string[];
  /** The model the client asked for, once a fallback replaced it in `request.model`. Writer: the router (catalog). */
  requestedModel?: string;
  /** The body sent upstream. Writer: the provider; `onUpstreamRequest` hooks may rewrite it. */
  upstreamBody?: Record<string, unknown>;
  /**
   * The output tokens the budget's hold assumed (the client's max_tokens, or what the funds can pay up to the
   * model's maximum): always sent upstream, so an honest upstream never bills more than was held.
   * Writer: budget; read by providers and metering.
   */
  upstreamOutputCap?: number;
  /** Nano-USD held for this request (absent: no budget plugin, no cap on the debit). Writer: budget; read by metering. */
  heldNano?: NanoUsd;
  /**
   * Writer: the core, from the upstream's answer; undefined when the upstream reported no usage (metering
   * then bills the counted text, and estimates it for a stream cut short).
   */
  usage?: Usage;
  /** The output text of a non-streamed answer whose upstream reported no usage (metering counts it). Writer: the core. */
  answerText?: string;
  /**
   * The id of the answer as the client got it, when it is not the request id and the request may be
   * looked up by it (a relayed Responses answer). Chat completions carry the request id itself, like
   * OpenRouter's `gen-…` ids. Writer: the core (non-streamed) or the format's stream relay.
   */
  responseId?: string;
  /**
   * Every upstream attempt of this request, in order (core/attempts.ts): the deployment, its status, why it
   * failed (null for the one that answered) and its latency. Empty when none was made. Writer: the core.
   */
  attempts: AttemptRecord[];
  /** Billed cost in nano-USD. Writer: metering. */
  cost?: NanoUsd;
  /** Monotonic time of the first upstream byte / token. Writer: the core. */
  firstTokenMono?: number;
  /** Extra headers for the client response. Writers: any plugin, in onRequest/onResponse. */
  readonly responseHeaders: Record<string, string>;
  /** Extra fields for the request's log line. Writers: any plugin. */
  readonly log: Record<string, unknown>;
}

export type { CanonicalRequest, StreamEvent, Usage };
