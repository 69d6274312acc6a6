import type { GatewayContext } from "../../core/context.ts";
import type { RelayedFrame, StreamRelay } from "../../core/format.ts";
import { sseFrame, type SseFrame } from "../../core/sse.ts";
import type { Usage } from "../../core/canonical.ts";
import { createResponsesEventReader } from "./events.ts";
import { readResponsesUsage } from "./usage.ts";
import { failedFrame } from "./errors.ts";
import { redact } from "../../core/secrets.ts";
import { isJsonObject } from "../json.ts";

/**
 * The upstream body for a Responses client on a Responses upstream (OpenAI): the client's body with the
 * model renamed. `store`, `include` and everything else go as sent; the Responses API always reports usage.
 */
export function relayResponsesRequestBody(ctx: GatewayContext, upstreamModel: string): Record<string, unknown> {
  return { ...ctx.body, model: upstreamModel };
}

/** Usage and id of a non-streamed response object. */
export function readResponsesResponse(body: Record<string, unknown>): { usage?: Usage; id?: string } {
  return {
    usage: readResponsesUsage(body.usage),
    id: typeof body.id === "string" ? body.id : undefined,
  };
}

/** The client's body: the model the client asked for; undefined when the upstream text can go as is. */
export function relayResponsesResponse(body: Record<string, unknown>, ctx: GatewayContext): unknown {
  if (body.model === undefined || body.model === ctx.request.model) return undefined;
  body.model = ctx.request.model;
  return body;
}

/**
 * Relays Responses events as they came (their `event:` lines kept), reading usage, deltas, tool calls and
 * the terminal event for metering and plugins. Only the lifecycle events that carry the response object
 * are rewritten, and only when the upstream names the model differently from the client. A stream that
 * ends without a terminal event gets a `response.failed`, so the client knows (Codex retries it).
 * A failure event (`response.failed`, `error`), or a frame that is not JSON, may echo the upstream's key: those
 * (never the others) are redacted.
 */
export function createResponsesStreamRelay(ctx: GatewayContext): StreamRelay {
  const clientModel = ctx.request.model;
  const reader = createResponsesEventReader();
  let lastSequence = -1;
  return {
    onFrame(frame: SseFrame): RelayedFrame {
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(frame.data);
      } catch {
        return { out: sseFrame(redact(frame.data), frame.event), events: [] };
      }
      if (typeof event?.sequence_number === "number") lastSequence = event.sequence_number;
      const events = reader.read(event);
      const response = event?.response;
      let data = frame.data;
      if (isJsonObject(response)) {
        if (typeof response.id === "string") ctx.responseId = response.id;
        if (response.model !== undefined && response.model !== clientModel) {
          response.model = clientModel;
          data = JSON.stringify(event);
        }
      }
      if (event?.type === "response.failed" || event?.type === "error") data = redact(data);
      return { out: sseFrame(data, frame.event), events };
    },
    end(): RelayedFrame {
      if (reader.finished || ctx.signal.aborted) return { out: null, events: [] };
      const message = "upstream stream ended before response.completed";
      const out = failedFrame("server_error", message, lastSequence + 1, { ...(ctx.responseId ? { id: ctx.responseId } : {}), model: clientModel });
      return { out, events: [{ type: "error", message, status: 502 }] };
    },
  };
}
