import Anthropic from "@anthropic-ai/sdk";
import type { GatewayContext } from "../../../src/core/context.ts";
import type { StreamDecoder, StreamEncoder } from "../../../src/core/format.ts";
import type { SseFrame } from "../../../src/core/sse.ts";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/canonical.ts";

/** The few context fields the Messages encoders and relay read. */
export function messagesContext(
  options: { model?: string; upstreamModel?: string; body?: Record<string, unknown>; uses?: CanonicalRequest["uses"]; promptTokenBound?: number } = {},
): GatewayContext {
  return {
    requestId: "gen-0123456789abcdef0123456789abcdef",
    startedAt: 1_800_000_000_000,
    headers: new Headers(),
    body: options.body ?? {},
    request: { model: options.model ?? "client-model", stream: true, clientWantsStreamUsage: true, uses: options.uses },
    target: { provider: "up", upstreamModel: options.upstreamModel ?? "up-model" },
    promptTokenBound: options.promptTokenBound,
    signal: new AbortController().signal,
  } as unknown as GatewayContext;
}

/** Anthropic SSE frames (named events) from [event, payload] pairs. */
export function sseFrames(...pairs: [string, Record<string, unknown>][]): SseFrame[] {
  return pairs.map(([event, data]) => ({ event, data: JSON.stringify(data) }));
}

export function decodeAll(decoder: StreamDecoder, list: SseFrame[]): StreamEvent[] {
  return [...list.flatMap((frame) => decoder.decode(frame)), ...decoder.end()];
}

export function encodeAll(encoder: StreamEncoder, events: StreamEvent[]): string {
  return events.map((event) => encoder.encode(event)).join("") + encoder.end();
}

/** The frames of an SSE text as {event, data} (data parsed). */
export function parseSse(sse: string): { event: string; data: any }[] {
  return sse
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((line) => line.startsWith("event: "))?.slice(7) ?? "";
      const data = lines.find((line) => line.startsWith("data: "))!.slice(6);
      return { event, data: JSON.parse(data) };
    });
}

/** The official Anthropic SDK reading an SSE text (or JSON body) as if a server had sent it (no network). */
export function sdkReading(body: string, contentType = "text/event-stream"): Anthropic {
  return new Anthropic({
    apiKey: "test",
    baseURL: "http://sdk.invalid",
    maxRetries: 0,
    fetch: async () => new Response(body, { headers: { "content-type": contentType } }),
  });
}

/**
 * The invariants (docs/wire-formats.md#anthropic-messages) every Messages stream must keep; returns the frames for
 * further checks.
 */
export function assertMessagesStreamInvariants(sse: string): { event: string; data: any }[] {
  const frames = parseSse(sse);
  const problems: string[] = [];
  for (const frame of frames) if (frame.event !== frame.data.type) problems.push(`event line ${frame.event} != data.type ${frame.data.type}`);
  if (frames[0]?.event !== "message_start") problems.push("message_start is not first");
  if (frames.filter((f) => f.event === "message_start").length !== 1) problems.push("message_start not exactly once");
  if (frames.at(-1)?.event !== "message_stop") problems.push("message_stop is not last");
  const deltas = frames.map((f, i) => [f.event, i] as const).filter(([e]) => e === "message_delta");
  if (deltas.length !== 1 || deltas[0]![1] !== frames.length - 2) problems.push("not exactly one message_delta right before message_stop");
  let next = 0;
  let open: number | null = null;
  let openType = "";
  let text = "";
  for (const { event, data } of frames) {
    if (event === "content_block_start") {
      if (open !== null) problems.push(`block ${data.index} starts while ${open} is open`);
      if (data.index !== next) problems.push(`block index ${data.index}, expected ${next}`);
      open = data.index;
      openType = data.content_block.type;
      text = "";
      next++;
    } else if (event === "content_block_delta") {
      if (data.index !== open) problems.push(`delta for ${data.index} while ${open} is open`);
      if (data.delta.type === "text_delta") text += data.delta.text;
    } else if (event === "content_block_stop") {
      if (data.index !== open) problems.push(`stop for ${data.index} while ${open} is open`);
      if (openType === "text" && text === "") problems.push(`empty text block ${data.index}`);
      open = null;
    }
  }
  if (open !== null) problems.push(`block ${open} never stopped`);
  if (problems.length > 0) throw new Error("Messages stream invariants broken:\n" + problems.join("\n") + "\n" + sse);
  return frames;
}
