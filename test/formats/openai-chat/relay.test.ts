import { describe, expect, it } from "bun:test";
import { openaiChat } from "../../../src/formats/openai-chat/index.ts";
import { chatContext } from "./helpers.ts";

const REQUEST_ID = "gen-0123456789abcdef0123456789abcdef";

describe("openai-chat relay (chat client on a chat upstream)", () => {
  it("gives every chunk the request id in place of the upstream's, the rest of the frame byte for byte", () => {
    const relay = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    const upstream = '{"id": "chatcmpl-up9", "object":"chat.completion.chunk","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":"\\"id\\": chatcmpl-up9"}}]}';
    const out = relay.onFrame({ data: upstream });
    expect(out.out).toBe(`data: ${upstream.replace('"chatcmpl-up9"', `"${REQUEST_ID}"`)}\n\n`);
    expect(out.events[0]).toEqual({ type: "message_start", id: REQUEST_ID });
    expect(JSON.parse(out.out!.slice(6)).choices[0].delta.content).toBe('"id": chatcmpl-up9');
    // The compact form (what upstreams send) takes the same splice.
    const compact = '{"id":"chatcmpl-up9","object":"chat.completion.chunk","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":"x"}}]}';
    expect(relay.onFrame({ data: compact }).out).toBe(`data: ${compact.replace("chatcmpl-up9", REQUEST_ID)}\n\n`);
  });

  it("rewrites a chunk whose top-level id it cannot splice safely (nested id first, odd characters, none at all)", () => {
    const relay = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    const nestedFirst = { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: "" } }] } }], id: "call_1", model: "gpt-6-luna" };
    const escaped = { id: 'up"\\id', model: "gpt-6-luna", choices: [{ index: 0, delta: { content: "x" } }] };
    const missing = { model: "gpt-6-luna", choices: [{ index: 0, delta: { content: "y" } }] };
    for (const chunk of [nestedFirst, escaped, missing]) {
      const out = relay.onFrame({ data: JSON.stringify(chunk) }).out!;
      const relayed = JSON.parse(out.slice(6));
      expect(relayed).toEqual({ ...chunk, id: REQUEST_ID });
    }
  });

  it("answers a non-streamed completion with the request id and the client's model", () => {
    const body = { id: "chatcmpl-up1", object: "chat.completion", model: "gpt-6-luna-2026-09-01", choices: [] };
    const relayed = openaiChat.relayResponse({ ...body }, chatContext({ model: "gpt-6-luna" }), JSON.stringify(body));
    expect(relayed).toEqual({ ...body, id: REQUEST_ID, model: "gpt-6-luna" });
    // Only the id differs: the upstream's text with the id spliced in, not re-serialized.
    const text = '{ "id" : "chatcmpl-up1",\n "object": "chat.completion", "model": "gpt-6-luna", "choices": [] }';
    expect(openaiChat.relayResponse(JSON.parse(text), chatContext({ model: "gpt-6-luna" }), text)).toBe(text.replace("chatcmpl-up1", REQUEST_ID));
    expect(openaiChat.readResponse(body)).toEqual({ usage: { inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 } });
  });
});
