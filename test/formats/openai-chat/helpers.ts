import OpenAI from "openai";
import type { GatewayContext } from "../../../src/core/context.ts";
import type { StreamDecoder, StreamEncoder } from "../../../src/core/format.ts";
import type { StreamEvent } from "../../../src/core/canonical.ts";

/** The few context fields the chat encoders read. */
export function chatContext(options: { model?: string; wantsUsage?: boolean; body?: Record<string, unknown>; stream?: boolean } = {}): GatewayContext {
  return {
    requestId: "gen-0123456789abcdef0123456789abcdef",
    startedAt: 1_800_000_000_000,
    body: options.body ?? {},
    request: { model: options.model ?? "client-model", stream: options.stream ?? true, clientWantsStreamUsage: options.wantsUsage ?? false },
    signal: new AbortController().signal,
  } as unknown as GatewayContext;
}

/** Chat SSE frames from chunk objects (strings pass as raw data, e.g. "[DONE]"). */
export function frames(...chunks: (Record<string, unknown> | string)[]) {
  return chunks.map((chunk) => ({ data: typeof chunk === "string" ? chunk : JSON.stringify(chunk) }));
}

/** Every event a decoder gives for these frames, its end() included. */
export function decodeAll(decoder: StreamDecoder, list: { data: string }[]): StreamEvent[] {
  return [...list.flatMap((frame) => decoder.decode(frame)), ...decoder.end()];
}

/** The whole SSE text an encoder writes for these events, its end() included. */
export function encodeAll(encoder: StreamEncoder, events: StreamEvent[]): string {
  return events.map((event) => encoder.encode(event)).join("") + encoder.end();
}

/** The JSON payloads of an SSE text ("[DONE]" kept as a string). */
export function payloads(sse: string): any[] {
  return sse
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => block.slice(6))
    .map((data) => (data === "[DONE]" ? data : JSON.parse(data)));
}

/** The official openai SDK reading an SSE text as if a server had sent it (no network). */
export function sdkReading(sse: string): OpenAI {
  return new OpenAI({
    apiKey: "test",
    baseURL: "http://sdk.invalid/v1",
    maxRetries: 0,
    fetch: async () => new Response(sse, { headers: { "content-type": "text/event-stream" } }),
  });
}

/** A chat chunk with one choice. */
export function chunk(delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) {
  return { id: "chatcmpl-up", object: "chat.completion.chunk", created: 1, model: "up-model", choices: [{ index: 0, delta, finish_reason: finish }], ...extra };
}
