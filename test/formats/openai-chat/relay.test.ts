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
    // Ids written with escapes in the compact form: the text after `{"id":"` is never the parsed id itself.
    for (const text of ['{"id":"up\\u0041","model":"gpt-6-luna","choices":[]}', '{"id":"up\\"A","model":"gpt-6-luna","choices":[]}']) {
      const out = relay.onFrame({ data: text }).out!;
      expect(JSON.parse(out.slice(6))).toEqual({ ...JSON.parse(text), id: REQUEST_ID });
    }
  });

  it("a chat stream cut before its finish_reason ends with an error event, not a finish", () => {
    const relay = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    relay.onFrame({ data: '{"id":"chatcmpl-up","object":"chat.completion.chunk","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":"The faulty"}}]}' });
    const tail = relay.end!();
    expect(tail.events).toEqual([{ type: "error", message: "upstream stream ended before finish_reason", status: 502 }]);
    // The chat format's own error chunk, no [DONE]: the openai SDK throws an APIError, never a JSON parse error.
    expect(tail.out).toBe('data: {"error":{"message":"upstream stream ended before finish_reason","type":"upstream_error","code":"upstream_error","param":null}}\n\n');
  });

  it("a chat stream that sent its finish_reason, [DONE] or an error chunk owes nothing at its end", () => {
    const finished = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    finished.onFrame({ data: '{"id":"c","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}' });
    finished.onFrame({ data: '{"id":"c","model":"gpt-6-luna","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}' });
    expect(finished.end!()).toEqual({ out: null, events: [] }); // no [DONE] after the finish: still a clean end
    const done = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    done.onFrame({ data: "[DONE]" });
    expect(done.end!()).toEqual({ out: null, events: [] });
    const failed = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    expect(failed.onFrame({ data: '{"error":{"message":"boom"}}' }).events).toEqual([{ type: "error", message: "boom" }]);
    expect(failed.end!()).toEqual({ out: null, events: [] }); // one error event only
  });

  it("a chat stream the gateway itself stopped (client gone, deadline) gets no verdict from end()", () => {
    const controller = new AbortController();
    const relay = openaiChat.createStreamRelay({ ...chatContext({ model: "gpt-6-luna" }), signal: controller.signal } as never);
    relay.onFrame({ data: '{"id":"c","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":"Hi"}}]}' });
    controller.abort();
    expect(relay.end!()).toEqual({ out: null, events: [] });
  });

  it("answers a non-streamed completion with the request id and the client's model", () => {
    const body = { id: "chatcmpl-up1", object: "chat.completion", model: "gpt-6-luna-2026-09-01", choices: [] };
    const relayed = openaiChat.relayResponse({ ...body }, chatContext({ model: "gpt-6-luna" }), JSON.stringify(body));
    expect(relayed).toEqual({ ...body, id: REQUEST_ID, model: "gpt-6-luna" });
    // Only the id differs: the upstream's text with the id spliced in, not re-serialized.
    const text = '{ "id" : "chatcmpl-up1",\n "object": "chat.completion", "model": "gpt-6-luna", "choices": [] }';
    expect(openaiChat.relayResponse(JSON.parse(text), chatContext({ model: "gpt-6-luna" }), text)).toBe(text.replace("chatcmpl-up1", REQUEST_ID));
    // No usage reported: undefined (metering bills the counted text), never zeros.
    expect(openaiChat.readResponse(body)).toEqual({ usage: undefined });
  });

  it("relays a chunk the same whether its id is spliced into the text or the chunk is re-serialized", () => {
    // The same random streams twice: compact (as upstreams send them: the id is spliced in, the text kept) and
    // indented (re-serialized when the model or usage changes). Relayed chunks and events must be the same JSON.
    const texts = ["Hello", " world", "", '"quoted"', "back\\slash", "ünïcödé 😀", "line\nbreak", 'x"}', '"delta":{"content":"', '"usage":{"prompt_tokens":1}', "\u0000"];
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    const pick = <T>(list: readonly T[]): T => list[random(list.length)]!;
    for (let round = 0; round < 300; round++) {
      const clientModel = pick(["gpt-6-luna", "openai/gpt-6-luna"]);
      const upstreamModel = pick([clientModel, "gpt-6-luna-2026-09-01", undefined]);
      const wantsUsage = random(2) === 0;
      const id = pick(["chatcmpl-up9", "chatcmpl-9.x:y"]);
      const chunks: Record<string, unknown>[] = [];
      const base = (choice: unknown[], extra: Record<string, unknown> = {}) => ({
        id: random(20) === 0 ? "chatcmpl-other" : id,
        object: "chat.completion.chunk",
        created: 1,
        ...(upstreamModel === undefined ? {} : { model: upstreamModel }),
        choices: choice,
        ...(random(3) === 0 ? {} : { usage: null }),
        ...extra,
      });
      chunks.push(base([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]));
      for (let i = 0; i < 12; i++) {
        const kind = random(10);
        const delta =
          kind === 0 ? { reasoning_content: pick(texts) }
          : kind === 1 ? { tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: pick(texts) } }] }
          : kind === 2 ? {}
          : { content: pick(texts) };
        const choice = { index: 0, delta, ...(random(4) === 0 ? {} : { logprobs: null }), finish_reason: random(8) === 0 ? "stop" : null };
        chunks.push(base(random(15) === 0 ? [choice, { ...choice, index: 1 }] : [choice]));
      }
      if (random(10) === 0) chunks.push({ error: { message: "boom" } });
      chunks.push(base([], { usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } }));
      const compact = openaiChat.createStreamRelay(chatContext({ model: clientModel, wantsUsage }));
      const indented = openaiChat.createStreamRelay(chatContext({ model: clientModel, wantsUsage }));
      for (const chunk of chunks) {
        const fast = compact.onFrame({ data: JSON.stringify(chunk) });
        const parsed = indented.onFrame({ data: JSON.stringify(chunk, null, 1) });
        expect(fast.events).toEqual(parsed.events);
        expect(fast.out === null ? null : JSON.parse(fast.out.slice(6))).toEqual(parsed.out === null ? null : JSON.parse(parsed.out.slice(6)));
      }
    }
  });

  it("relays content chunks shaped like one it read without reading them, exactly as if it had read them", () => {
    // Compact chunks as upstreams send them: after the first content chunk, the others differ only in their content.
    const chunk = (delta: string, finish = "null", usage = "null") =>
      `{"id":"chatcmpl-up9","object":"chat.completion.chunk","created":1,"model":"gpt-6-luna","choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish}}],"usage":${usage}}`;
    const content = (text: string) => chunk(`{"content":${JSON.stringify(text)}}`);
    const texts = ["Hello", " world", "", '"usage":{"prompt_tokens":999,"completion_tokens":999}', "usage", 'x"}]}', "\\u0041", "ünï 😀", "line\nbreak", '"finish_reason":"stop"'];
    const stream = [
      chunk('{"role":"assistant","content":""}'),
      ...texts.map(content),
      chunk('{"content":"\\u0041\\/"}'), // escapes the gateway would not write: read as text all the same
      chunk('{"content":"raw\tcontrol"}').replace("\\t", "\t"), // a raw tab: not JSON, relayed redacted as any such frame
      chunk('{"content":"more"}', "null", '{"prompt_tokens":3,"completion_tokens":4}'), // usage beside the content: read
      content("after"),
      chunk('{"content":"x","role":"assistant"}'),
      content("last"),
      chunk("{}", '"stop"'),
      chunk("{}").replace('"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":null}]', '"choices":[]').replace('"usage":null', '"usage":{"prompt_tokens":5,"completion_tokens":7}'),
      "[DONE]",
    ];
    for (const wantsUsage of [false, true]) {
      const relay = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna", wantsUsage }));
      const inPlace = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna", wantsUsage }));
      const allRead = stream.map((data) => openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna", wantsUsage })));
      let text = "";
      stream.forEach((data, i) => {
        const relayed = relay.onFrame({ data });
        // A relay that reads every chunk: a fresh one, started, for each frame (no shape to go by).
        const reference = allRead[i]!;
        if (i > 0) reference.onFrame({ data: stream[0]! });
        const read = reference.onFrame({ data });
        expect(relayed).toEqual(read);
        // In place, from the text of a whole read: the same.
        const around = `data: ${stream[0]}\n\ndata: ${data}\n\n`;
        expect(inPlace.onData!(around, around.length - 2 - data.length, around.length - 2)).toEqual(relayed);
        for (const event of relayed.events) if (event.type === "text_delta") text += event.text;
      });
      expect(text).toBe(texts.join("") + "\\u0041\\/".replace("\\u0041", "A").replace("\\/", "/") + "moreafterxlast");
      expect(relay.end!()).toEqual({ out: null, events: [] });
    }
  });

  it("relays a chunk shaped like the last one read but carrying an error or another id as a read chunk", () => {
    const relay = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    const content = (text: string, id = "chatcmpl-up9") => `{"id":"${id}","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":${JSON.stringify(text)}}}]}`;
    relay.onFrame({ data: content("a") });
    relay.onFrame({ data: content("b") });
    expect(relay.onFrame({ data: content("c", "chatcmpl-other") }).out).toBe(`data: ${content("c", REQUEST_ID)}\n\n`);
    expect(relay.onFrame({ data: content("d") }).events).toEqual([{ type: "text_delta", text: "d" }]);
    const error = `{"error":{"message":"upstream key sk-upstream-openai rejected"}}`;
    const failed = relay.onFrame({ data: error });
    expect(failed.events).toEqual([{ type: "error", message: "upstream key sk-upstream-openai rejected" }]);
    expect(relay.end!()).toEqual({ out: null, events: [] });
    // A content key found first that is not the one read (JSON's last duplicate wins): no shape is taken from it.
    const twice = openaiChat.createStreamRelay(chatContext({ model: "gpt-6-luna" }));
    const duplicate = (first: string) => `{"id":"c","model":"gpt-6-luna","choices":[{"index":0,"delta":{"content":"${first}","content":"kept"}}]}`;
    twice.onFrame({ data: duplicate("a") });
    twice.onFrame({ data: duplicate("b") });
    expect(twice.onFrame({ data: duplicate("c") }).events).toEqual([{ type: "text_delta", text: "kept" }]);
  });
});
