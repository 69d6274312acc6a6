import { describe, expect, it } from "bun:test";
import { anthropicMessages } from "../../../src/formats/anthropic-messages/index.ts";
import { wrapForeignSignature } from "../../../src/formats/anthropic-messages/signature.ts";
import { messagesContext, parseSse } from "./helpers.ts";

describe("anthropic-messages relay (Messages client on an Anthropic upstream)", () => {
  it("relays frames as they came with their event lines, restoring only message_start's model", () => {
    const relay = anthropicMessages.createStreamRelay(messagesContext({ model: "claude-sonnet-5-5" }));
    const start = JSON.stringify({ type: "message_start", message: { id: "msg_1", model: "claude-sonnet-5-5-20261001", usage: { input_tokens: 5, cache_read_input_tokens: 20, output_tokens: 1 } } });
    const textDelta = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}';
    const out = [
      relay.onFrame({ event: "message_start", data: start }),
      relay.onFrame({ event: "ping", data: '{"type":"ping"}' }),
      relay.onFrame({ event: "content_block_delta", data: textDelta }),
      // A frame whose upstream left out the event line still reaches the SDK with one.
      relay.onFrame({ data: '{"type":"message_stop"}' }),
    ];
    expect(parseSse(out[0]!.out!)[0]!.data.message.model).toBe("claude-sonnet-5-5");
    expect(out[1]!.out).toBe('event: ping\ndata: {"type":"ping"}\n\n');
    expect(out[2]!.out).toBe(`event: content_block_delta\ndata: ${textDelta}\n\n`);
    expect(out[3]!.out).toBe('event: message_stop\ndata: {"type":"message_stop"}\n\n');
    expect(out[0]!.events).toContainEqual({ type: "usage", usage: { inputTokens: 25, cacheReadTokens: 20, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0 } });
    expect(relay.end?.().out ?? null).toBeNull();
  });

  it("closes a stream cut before message_stop with an in-band error event", () => {
    const relay = anthropicMessages.createStreamRelay(messagesContext());
    relay.onFrame({ event: "message_start", data: JSON.stringify({ type: "message_start", message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } } }) });
    const tail = relay.end!();
    expect(tail.out).toStartWith('event: error\ndata: {"type":"error","error":{"type":"api_error"');
    expect(tail.events[0]).toMatchObject({ type: "error" });
  });

  it("a Messages stream cut mid-text (no message_stop, no stop_reason) ends with one error event, not a finish", () => {
    const relay = anthropicMessages.createStreamRelay(messagesContext());
    relay.onFrame({ event: "message_start", data: JSON.stringify({ type: "message_start", message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } } }) });
    relay.onFrame({ event: "content_block_start", data: '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}' });
    relay.onFrame({ event: "content_block_delta", data: '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The faulty"}}' });
    const tail = relay.end!();
    expect(tail.events).toEqual([{ type: "error", message: "upstream stream ended before message_stop", status: 502 }]);
    expect(parseSse(tail.out!)).toEqual([{ event: "error", data: { type: "error", error: { type: "api_error", message: "upstream stream ended before message_stop", code: "upstream_error" } } }]);
  });

  it("a Messages stream whose message_delta carries its stop_reason ends cleanly even without message_stop", () => {
    const relay = anthropicMessages.createStreamRelay(messagesContext());
    relay.onFrame({ event: "message_start", data: JSON.stringify({ type: "message_start", message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } } }) });
    relay.onFrame({ event: "message_delta", data: '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}' });
    expect(relay.end!()).toEqual({ out: null, events: [] });
  });

  it("a Messages stream that ends with the upstream's event: error gives the client that one error event, not a second from end()", () => {
    const start = { event: "message_start", data: JSON.stringify({ type: "message_start", message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } } }) };
    const errors = [
      { event: "error", data: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}' },
      { data: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}' },
      { event: "error", data: "upstream overloaded" }, // not JSON: answered with a well-formed error event
      { event: "error", data: '"Overloaded"' },
    ];
    for (const error of errors) {
      const relay = anthropicMessages.createStreamRelay(messagesContext());
      const out = [relay.onFrame(start), relay.onFrame(error), relay.end!()].map((relayed) => relayed.out ?? "").join("");
      const frames = parseSse(out);
      expect(frames.filter((frame) => frame.event === "error")).toHaveLength(1);
      expect(frames.at(-1)!.data.type).toBe("error");
    }
  });

  it("a Messages stream the gateway itself stopped (client gone, deadline) gets no verdict from end()", () => {
    const controller = new AbortController();
    const relay = anthropicMessages.createStreamRelay({ ...messagesContext(), signal: controller.signal } as never);
    relay.onFrame({ event: "message_start", data: JSON.stringify({ type: "message_start", message: { id: "m", usage: { input_tokens: 1, output_tokens: 1 } } }) });
    controller.abort();
    expect(relay.end!()).toEqual({ out: null, events: [] });
  });

  it("renames the model upstream and drops gateway-wrapped thinking that Anthropic would refuse, keeping its own signatures", () => {
    const own = { type: "thinking", thinking: "mine", signature: "EqQBanthropic" };
    const foreign = { type: "thinking", thinking: "theirs", signature: wrapForeignSignature(undefined, { format: "openai-chat", model: "deepseek-pro" }) };
    const body = {
      model: "claude-sonnet-5-5",
      max_tokens: 100,
      thinking: { type: "enabled", budget_tokens: 2000 },
      messages: [
        { role: "user", content: "a" },
        { role: "assistant", content: [own, { type: "text", text: "b" }] },
        { role: "user", content: "c" },
        { role: "assistant", content: [foreign] },
        { role: "user", content: "d" },
      ],
    };
    const relayed = anthropicMessages.relayRequestBody(messagesContext({ body }), "claude-sonnet-5-5-20261001") as any;
    expect(relayed.model).toBe("claude-sonnet-5-5-20261001");
    expect(relayed.messages).toEqual([body.messages[0], body.messages[1], body.messages[2], body.messages[4]]);
    expect(relayed.thinking).toEqual(body.thinking);
    const untouched = { model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }] };
    expect((anthropicMessages.relayRequestBody(messagesContext({ body: untouched }), "m") as any).messages).toBe(untouched.messages);
  });

  it("turns thinking off when dropped foreign thinking leaves a tool loop without a leading thinking block", () => {
    const foreign = { type: "thinking", thinking: "theirs", signature: wrapForeignSignature("s", { format: "gemini", model: "gemini-4-argon" }) };
    const body = {
      model: "claude-sonnet-5-5",
      max_tokens: 4000,
      thinking: { type: "enabled", budget_tokens: 2000 },
      messages: [
        { role: "user", content: "go" },
        { role: "assistant", content: [foreign, { type: "tool_use", id: "call_1", name: "f", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "call_1", content: "ok" }] },
      ],
    };
    const relayed = anthropicMessages.relayRequestBody(messagesContext({ body }), "claude-sonnet-5-5") as any;
    expect(relayed.messages[1].content).toEqual([{ type: "tool_use", id: "call_1", name: "f", input: {} }]);
    expect(relayed.thinking).toBeUndefined();
  });

  it("reads non-streaming usage normalized (no id: a Messages id is no lookup key) and restores the client's model", () => {
    const body = { id: "msg_1", model: "up", usage: { input_tokens: 3, cache_creation_input_tokens: 7, cache_read_input_tokens: 90, output_tokens: 12 } };
    expect(anthropicMessages.readResponse(body)).toEqual({ usage: { inputTokens: 100, cacheReadTokens: 90, cacheWriteTokens: 7, outputTokens: 12, reasoningTokens: 0 } });
    const ctx = messagesContext({ model: "claude-sonnet-5-5" });
    expect((anthropicMessages.relayResponse({ ...body }, ctx, JSON.stringify(body)) as any).model).toBe("claude-sonnet-5-5");
    expect(anthropicMessages.relayResponse({ ...body, model: "claude-sonnet-5-5" }, ctx, "")).toBeUndefined();
  });
});
