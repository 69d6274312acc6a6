/**
 * Cache writes by lifetime (issue 31): the 1-hour part of the writes is read in every usage shape (Messages,
 * chat, Responses; non-streamed answers, streams, relayed and translated) and written back where a format has a
 * place for it. https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
 */
import { describe, expect, it } from "bun:test";
import type { StreamEvent, Usage } from "../../src/core/canonical.ts";
import { mergeMessagesUsage, readMessagesUsage, writeMessagesUsage } from "../../src/formats/anthropic-messages/usage.ts";
import { createMessagesStreamDecoder } from "../../src/formats/anthropic-messages/stream-decoder.ts";
import { createMessagesStreamRelay, readMessagesResponse } from "../../src/formats/anthropic-messages/relay.ts";
import { createMessagesStreamEncoder } from "../../src/formats/anthropic-messages/translation/stream-encoder.ts";
import { createChatStreamRelay, readChatUsage } from "../../src/formats/openai-chat/relay.ts";
import { chatUsage } from "../../src/formats/openai-chat/translation/response.ts";
import { createChatStreamDecoder } from "../../src/formats/openai-chat/translation/stream-decoder.ts";
import { readResponsesUsage, writeResponsesUsage } from "../../src/formats/openai-responses/usage.ts";
import { createResponsesEventReader } from "../../src/formats/openai-responses/events.ts";
import { readResponsesResponse } from "../../src/formats/openai-responses/relay.ts";
import { decodeResponsesResponse } from "../../src/formats/openai-responses/translation/upstream.ts";
import { decodeAll, messagesContext, parseSse, sseFrames } from "./anthropic-messages/helpers.ts";
import { chatContext, frames } from "./openai-chat/helpers.ts";

/** 300 uncached + 5000 read + 1000 written (400 for 5 minutes, 600 for 1 hour), 200 out. */
const ANTHROPIC_WIRE = {
  input_tokens: 300,
  cache_read_input_tokens: 5000,
  cache_creation_input_tokens: 1000,
  cache_creation: { ephemeral_5m_input_tokens: 400, ephemeral_1h_input_tokens: 600 },
  output_tokens: 200,
};
const CANONICAL: Usage = { inputTokens: 6300, cacheReadTokens: 5000, cacheWriteTokens: 1000, cacheWrite1hTokens: 600, outputTokens: 200, reasoningTokens: 0 };
const SPLIT = { ephemeral_5m_input_tokens: 400, ephemeral_1h_input_tokens: 600 };

const usageEvents = (events: StreamEvent[]) => events.filter((e): e is Extract<StreamEvent, { type: "usage" }> => e.type === "usage").map((e) => e.usage);

describe("Anthropic Messages usage by lifetime", () => {
  it("reads the 1-hour part of the writes; the total stays cache_creation_input_tokens", () => {
    expect(readMessagesUsage(ANTHROPIC_WIRE)).toEqual(CANONICAL);
  });

  it("takes every write as a 5-minute one when only cache_creation_input_tokens is reported", () => {
    const usage = readMessagesUsage({ ...ANTHROPIC_WIRE, cache_creation: undefined })!;
    expect(usage.cacheWriteTokens).toBe(1000);
    expect(usage.cacheWrite1hTokens ?? 0).toBe(0);
    expect(usage).not.toHaveProperty("cacheWrite1hTokens"); // absent = 0: the canonical shape of other upstreams
  });

  it("sums the lifetimes when the total is missing, and never lets the 1-hour part exceed the total", () => {
    const noTotal = readMessagesUsage({ input_tokens: 10, output_tokens: 1, cache_creation: { ephemeral_5m_input_tokens: 5, ephemeral_1h_input_tokens: 7 } })!;
    expect(noTotal).toMatchObject({ inputTokens: 22, cacheWriteTokens: 12, cacheWrite1hTokens: 7 });
    const over = readMessagesUsage({ input_tokens: 10, output_tokens: 1, cache_creation_input_tokens: 4, cache_creation: { ephemeral_1h_input_tokens: 9 } })!;
    expect(over).toMatchObject({ cacheWriteTokens: 4, cacheWrite1hTokens: 4 });
  });

  it("ignores a lifetime split that is not usable (negative, absurd, not a number): all 5-minute, the total kept", () => {
    for (const bad of [{ ephemeral_1h_input_tokens: -5 }, { ephemeral_1h_input_tokens: 1e15 }, { ephemeral_1h_input_tokens: "600" }, null, "x"]) {
      const usage = readMessagesUsage({ ...ANTHROPIC_WIRE, cache_creation: bad })!;
      expect(usage.cacheWriteTokens).toBe(1000);
      expect(usage.cacheWrite1hTokens ?? 0).toBe(0);
    }
  });

  it("keeps the lifetimes across message_start and message_delta (a later split replaces an earlier one)", () => {
    const start = { input_tokens: 300, cache_creation_input_tokens: 1000, cache_creation: SPLIT, output_tokens: 1 };
    const merged = mergeMessagesUsage(start, { output_tokens: 200 });
    expect(merged.cache_creation).toEqual(SPLIT);
    expect(readMessagesUsage(merged)).toMatchObject({ cacheWriteTokens: 1000, cacheWrite1hTokens: 600, outputTokens: 200 });
    const replaced = mergeMessagesUsage(merged, { output_tokens: 200, cache_creation_input_tokens: 1000, cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 1000 } });
    expect(readMessagesUsage(replaced)!.cacheWrite1hTokens).toBe(1000);
  });

  it("reads it from a stream: message_start's split survives a message_delta without one; a delta-only split is read too", () => {
    const start = (usage: Record<string, unknown>) => ["message_start", { type: "message_start", message: { id: "m", model: "claude-up", usage } }] as [string, Record<string, unknown>];
    const delta = (usage: Record<string, unknown>) => ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage }] as [string, Record<string, unknown>];
    const stop = ["message_stop", { type: "message_stop" }] as [string, Record<string, unknown>];
    const { output_tokens: _, ...startUsage } = ANTHROPIC_WIRE;
    const fromStart = usageEvents(decodeAll(createMessagesStreamDecoder(), sseFrames(start({ ...startUsage, output_tokens: 1 }), delta({ output_tokens: 200 }), stop)));
    expect(fromStart.at(-1)).toEqual(CANONICAL);
    const fromDelta = usageEvents(decodeAll(createMessagesStreamDecoder(), sseFrames(start({ input_tokens: 300, output_tokens: 1 }), delta(ANTHROPIC_WIRE), stop)));
    expect(fromDelta.at(-1)).toEqual(CANONICAL);
  });

  it("reads it from a relayed answer and a relayed stream (the client's bytes untouched)", () => {
    expect(readMessagesResponse({ usage: ANTHROPIC_WIRE }).usage).toEqual(CANONICAL);
    const relay = createMessagesStreamRelay(messagesContext({ model: "claude-up" }));
    const startFrame = { event: "message_start", data: JSON.stringify({ type: "message_start", message: { id: "m", model: "claude-up", usage: { ...ANTHROPIC_WIRE, output_tokens: 1 } } }) };
    const deltaFrame = { event: "message_delta", data: JSON.stringify({ type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 200 } }) };
    const relayed = [relay.onFrame(startFrame), relay.onFrame(deltaFrame)];
    expect(relayed[0]!.out).toContain('"ephemeral_1h_input_tokens":600');
    expect(usageEvents(relayed.flatMap((r) => r.events)).at(-1)).toEqual(CANONICAL);
  });

  it("writes the split back as cache_creation when the prompt wrote to the cache, in answers and streams", () => {
    expect(writeMessagesUsage(CANONICAL)).toEqual({ ...ANTHROPIC_WIRE });
    expect(writeMessagesUsage({ ...CANONICAL, cacheWrite1hTokens: undefined }).cache_creation).toEqual({ ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 0 });
    expect(writeMessagesUsage({ ...CANONICAL, cacheWriteTokens: 0, cacheWrite1hTokens: undefined, inputTokens: 5300 })).not.toHaveProperty("cache_creation");
    const encoder = createMessagesStreamEncoder(messagesContext({ model: "claude-up" }));
    const sse = [{ type: "text_delta", text: "x" }, { type: "usage", usage: CANONICAL }, { type: "message_end", finishReason: "stop" }]
      .map((event) => encoder.encode(event as StreamEvent))
      .join("") + encoder.end();
    const delta = parseSse(sse).find((frame) => frame.event === "message_delta")!.data;
    expect(delta.usage.cache_creation).toEqual(SPLIT);
    expect(readMessagesUsage(delta.usage)).toEqual(CANONICAL);
  });
});

describe("chat completions usage by lifetime", () => {
  const CHAT_WIRE = {
    prompt_tokens: 6300,
    completion_tokens: 200,
    total_tokens: 6500,
    prompt_tokens_details: { cached_tokens: 5000, cache_write_tokens: 1000, cache_creation: SPLIT },
    completion_tokens_details: { reasoning_tokens: 0 },
  };

  it("writes prompt_tokens_details.cache_creation and reads it back exactly", () => {
    expect(chatUsage(CANONICAL)).toEqual(CHAT_WIRE);
    expect(readChatUsage(CHAT_WIRE)).toEqual(CANONICAL);
  });

  it("reads a chat usage without the split as all 5-minute writes (OpenAI, OpenRouter, compatible vendors)", () => {
    const { cache_creation: _, ...details } = CHAT_WIRE.prompt_tokens_details;
    const usage = readChatUsage({ ...CHAT_WIRE, prompt_tokens_details: details })!;
    expect(usage.cacheWriteTokens).toBe(1000);
    expect(usage).not.toHaveProperty("cacheWrite1hTokens");
    expect(chatUsage({ ...CANONICAL, cacheWriteTokens: 0, cacheWrite1hTokens: undefined }).prompt_tokens_details).toEqual({ cached_tokens: 5000, cache_write_tokens: 0 });
  });

  it("reads it from a translated stream (chat upstream) and a relayed stream", () => {
    const chunk = { id: "c", object: "chat.completion.chunk", model: "m", choices: [], usage: CHAT_WIRE };
    const finish = { id: "c", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] };
    const decoded = decodeAllChat(createChatStreamDecoder(), frames(finish, chunk, "[DONE]"));
    expect(usageEvents(decoded).at(-1)).toEqual(CANONICAL);
    const relay = createChatStreamRelay(chatContext({ model: "m", wantsUsage: true }));
    const relayed = frames(finish, chunk, "[DONE]").map((frame) => relay.onFrame(frame));
    expect(usageEvents(relayed.flatMap((r) => r.events)).at(-1)).toEqual(CANONICAL);
  });
});

describe("Responses usage by lifetime", () => {
  const RESPONSES_WIRE = {
    input_tokens: 6300,
    input_tokens_details: { cached_tokens: 5000, cache_write_tokens: 1000, cache_creation: SPLIT },
    output_tokens: 200,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 6500,
  };

  it("writes input_tokens_details.cache_creation and reads it back exactly", () => {
    expect(writeResponsesUsage(CANONICAL)).toEqual(RESPONSES_WIRE);
    expect(readResponsesUsage(RESPONSES_WIRE)).toEqual(CANONICAL);
    expect(writeResponsesUsage({ ...CANONICAL, cacheWriteTokens: 0, cacheWrite1hTokens: undefined }).input_tokens_details).toEqual({ cached_tokens: 5000, cache_write_tokens: 0 });
  });

  it("reads it from a relayed answer, a translated answer and a stream's terminal event", () => {
    expect(readResponsesResponse({ usage: RESPONSES_WIRE }).usage).toEqual(CANONICAL);
    expect(decodeResponsesResponse({ id: "r", model: "m", status: "completed", output: [], usage: RESPONSES_WIRE }).usage).toEqual(CANONICAL);
    const reader = createResponsesEventReader();
    const events = reader.read({ type: "response.completed", response: { id: "r", status: "completed", output: [], usage: RESPONSES_WIRE } });
    expect(usageEvents(events)).toEqual([CANONICAL]);
  });
});

function decodeAllChat(decoder: ReturnType<typeof createChatStreamDecoder>, list: { data: string }[]): StreamEvent[] {
  return [...list.flatMap((frame) => decoder.decode(frame)), ...decoder.end()];
}
