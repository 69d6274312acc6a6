import { expect } from "bun:test";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import type { GatewayContext } from "../../../src/core/context.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";

export type Json = Record<string, any>;

/** A request context as the core builds it, for a Responses client whose request went to `upstreamModel`. */
export function responsesCtx(body: Json, upstreamModel = "upstream-model"): GatewayContext {
  return {
    requestId: "gen-0123456789abcdef0123456789abcdef",
    startedAt: Date.now(),
    startedMono: performance.now(),
    signal: new AbortController().signal,
    headers: new Headers(),
    ingress: openaiResponses,
    body,
    request: openaiResponses.decodeRequest(body),
    target: { provider: "test", upstreamModel },
    responseHeaders: {},
    attempts: [],
    log: {},
  };
}

export interface SseEvent {
  /** The SSE `event:` line. */
  event: string | undefined;
  data: Json;
}

/** SSE text -> events; every frame must be JSON (a Responses stream has no [DONE]). */
export function parseSse(text: string): SseEvent[] {
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      let event: string | undefined;
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      return { event, data: JSON.parse(data) };
    });
}

/**
 * Folds a stream's events through the openai SDK's own accumulator (it throws on unknown events or bad
 * indexes). Takes the SSE text: Bun's toMatchObject writes its matchers into the objects it checked.
 */
export function sdkFinalResponse(sse: string): Json {
  let snapshot: any;
  for (const { data } of parseSse(sse)) snapshot = accumulateResponse(data as never, snapshot);
  return snapshot;
}

/**
 * Codex's strict parse of a stream (docs/wire-formats.md#what-codex-needs): response.created first; every item that
 * is added is also done; response.completed carries a string id and, unless usage is null, integer usage with
 * total_tokens and details holding cached_tokens / reasoning_tokens; sequence numbers count up from 0 on every event;
 * the `event:` line matches the type. Returns the done items (what Codex keeps in its history).
 */
export function expectCodexCompatible(events: SseEvent[]): Json[] {
  expect(events[0]!.data.type).toBe("response.created");
  expect(typeof events[0]!.data.response.id).toBe("string");
  events.forEach((event, index) => {
    expect(event.event).toBe(event.data.type);
    expect(event.data.sequence_number).toBe(index);
  });
  const added = events.filter((e) => e.data.type === "response.output_item.added").map((e) => e.data.output_index);
  const done = events.filter((e) => e.data.type === "response.output_item.done");
  expect(done.map((e) => e.data.output_index).sort()).toEqual([...added].sort());
  const last = events.at(-1)!.data;
  expect(["response.completed", "response.incomplete"]).toContain(last.type);
  expect(typeof last.response.id).toBe("string");
  const usage = last.response.usage;
  if (usage !== null) {
    for (const field of ["input_tokens", "output_tokens", "total_tokens"]) expect(Number.isInteger(usage[field])).toBe(true);
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    if (usage.input_tokens_details) expect(Number.isInteger(usage.input_tokens_details.cached_tokens)).toBe(true);
    if (usage.output_tokens_details) expect(Number.isInteger(usage.output_tokens_details.reasoning_tokens)).toBe(true);
  }
  for (const event of done) {
    const item = event.data.item;
    if (item.type === "function_call") for (const field of ["call_id", "name", "arguments"]) expect(typeof item[field]).toBe("string");
  }
  return done.map((event) => event.data.item);
}
