import { describe, expect, it } from "bun:test";
import { RateLimitError, UpstreamError } from "../../../src/core/errors.ts";
import type { StreamEvent } from "../../../src/core/canonical.ts";
import { openaiResponses } from "../../../src/formats/openai-responses/index.ts";
import { computeResponsesUsage } from "../../fake-upstream/responses.ts";
import { parseSse, responsesCtx, type Json } from "./helpers.ts";

/** The fake upstream's stream for a body, as SSE frames (event + data), the way the core hands them over. */
async function upstreamFrames(body: Json): Promise<{ event?: string; data: string }[]> {
  const { startFakeUpstream } = await import("../../fake-upstream/server.ts");
  const fake = await startFakeUpstream();
  try {
    const response = await fetch(`${fake.url}/v1/responses`, { method: "POST", headers: { authorization: "Bearer k" }, body: JSON.stringify(body) });
    return parseSse(await response.text()).map(({ event, data }) => ({ event, data: JSON.stringify(data) }));
  } finally {
    await fake.stop();
  }
}

function relayAll(body: Json, frames: { event?: string; data: string }[], clientModel = body.model) {
  const ctx = responsesCtx({ ...body, model: clientModel });
  const relay = openaiResponses.createStreamRelay(ctx);
  let out = "";
  const events: StreamEvent[] = [];
  for (const frame of frames) {
    const relayed = relay.onFrame(frame);
    out += relayed.out ?? "";
    events.push(...relayed.events);
  }
  const tail = relay.end?.();
  out += tail?.out ?? "";
  events.push(...(tail?.events ?? []));
  return { out, events };
}

describe("openai-responses relay (Responses client on an OpenAI Responses upstream)", () => {
  const directive = { reasoning: "Thinking it over", tool_calls: [{ name: "shell", arguments: { command: ["ls"] } }], text: "Checking.", usage: { cached_tokens: 3 } };
  const body = { model: "gpt-6-luna", input: `go [[fake ${JSON.stringify(directive)}]]`, stream: true, include: ["reasoning.encrypted_content"] };

  it("re-emits every frame as it came, event lines included, and reads usage, deltas and tool calls", async () => {
    const frames = await upstreamFrames(body);
    const { out, events } = relayAll(body, frames);
    expect(out).toBe(frames.map((frame) => `event: ${frame.event}\ndata: ${frame.data}\n\n`).join(""));
    const usage = computeResponsesUsage(body, directive as never);
    expect(events.find((event) => event.type === "usage")).toEqual({
      type: "usage",
      usage: { inputTokens: usage.input_tokens, cacheReadTokens: 3, cacheWriteTokens: 0, outputTokens: usage.output_tokens, reasoningTokens: usage.output_tokens_details.reasoning_tokens },
    });
    expect(events.filter((event) => event.type === "text_delta").map((event) => (event as { text: string }).text).join("")).toBe("Checking.");
    expect(events.filter((event) => event.type === "reasoning_delta").map((event) => (event as { text: string }).text).join("")).toBe("Thinking it over");
    expect(events).toContainEqual({ type: "tool_call_start", index: 0, id: "call_fake0", name: "shell" });
    expect(events.filter((event) => event.type === "tool_call_delta").map((event) => (event as { arguments: string }).arguments).join("")).toBe('{"command":["ls"]}');
    expect(events.at(-1)).toEqual({ type: "message_end", finishReason: "tool_calls" });
    expect(events[0]).toMatchObject({ type: "message_start", id: expect.stringMatching(/^resp_/) });
  });

  it("restores the client's model name in the events that carry the response object", async () => {
    const frames = await upstreamFrames({ ...body, model: "gpt-6-luna-2026-09-22" });
    const { out } = relayAll(body, frames, "gpt-6-luna");
    expect(out).not.toContain("gpt-6-luna-2026-09-22");
    const completed = parseSse(out).at(-1)!.data;
    expect(completed.response.model).toBe("gpt-6-luna");
  });

  it("reports arguments an upstream sends only in the .done events", () => {
    const frames = [
      { event: "response.created", data: JSON.stringify({ type: "response.created", sequence_number: 0, response: { id: "resp_1", model: "m" } }) },
      { data: JSON.stringify({ type: "response.output_item.added", sequence_number: 1, output_index: 0, item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: "" } }) },
      { data: JSON.stringify({ type: "response.function_call_arguments.done", sequence_number: 2, item_id: "fc_1", output_index: 0, arguments: '{"a":1}' }) },
      { data: JSON.stringify({ type: "response.output_item.done", sequence_number: 3, output_index: 0, item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: '{"a":1}' } }) },
      { data: JSON.stringify({ type: "response.completed", sequence_number: 4, response: { id: "resp_1", model: "m", usage: { input_tokens: 5, output_tokens: 2, total_tokens: 7 } } }) },
    ];
    const { out, events } = relayAll({ model: "m", input: "x", stream: true }, frames);
    expect(events.filter((event) => event.type === "tool_call_delta")).toEqual([{ type: "tool_call_delta", index: 0, arguments: '{"a":1}' }]);
    // Frames without an event line go out without one.
    expect(out.split("\n\n").filter(Boolean).filter((frame) => frame.startsWith("event:")).length).toBe(1);
  });

  it("reads usage from response.incomplete and turns response.failed into an error event", () => {
    const incomplete = relayAll({ model: "m", input: "x" }, [
      { data: JSON.stringify({ type: "response.incomplete", response: { incomplete_details: { reason: "max_output_tokens" }, usage: { input_tokens: 9, output_tokens: 4, total_tokens: 13 } } }) },
    ]);
    expect(incomplete.events.map((event) => event.type)).toEqual(["usage", "message_end"]);
    expect(incomplete.events[1]).toEqual({ type: "message_end", finishReason: "length" });
    const failed = relayAll({ model: "m", input: "x" }, [{ data: JSON.stringify({ type: "response.failed", response: { error: { code: "server_error", message: "boom" }, usage: null } }) }]);
    expect(failed.events).toEqual([{ type: "error", message: "boom", code: "server_error" }]);
    expect(failed.out).not.toContain("upstream stream ended");
  });

  it("fails a stream the upstream cut before its terminal event, continuing its sequence numbers", () => {
    const frames = [{ event: "response.created", data: JSON.stringify({ type: "response.created", sequence_number: 0, response: { id: "resp_7", model: "m" } }) }];
    const { out, events } = relayAll({ model: "m", input: "x" }, frames);
    const last = parseSse(out).at(-1)!;
    expect(last.data).toMatchObject({ type: "response.failed", sequence_number: 1, response: { id: "resp_7", status: "failed", error: { code: "server_error" } } });
    expect(events.at(-1)).toMatchObject({ type: "error", status: 502 });
  });

  it("reads non-streamed usage without adding the cached tokens twice", () => {
    const read = openaiResponses.readResponse({ id: "resp_1", usage: { input_tokens: 1000, input_tokens_details: { cached_tokens: 800 }, output_tokens: 50, output_tokens_details: { reasoning_tokens: 30 }, total_tokens: 1050 } });
    expect(read).toEqual({ id: "resp_1", usage: { inputTokens: 1000, cacheReadTokens: 800, cacheWriteTokens: 0, outputTokens: 50, reasoningTokens: 30 } });
  });

  it("sends the client's body upstream with the model renamed and store as the client set it", () => {
    const ctx = responsesCtx({ model: "gpt-6-luna", input: "x", store: false, include: ["reasoning.encrypted_content"] });
    expect(openaiResponses.relayRequestBody(ctx, "gpt-6-luna-0922")).toEqual({ model: "gpt-6-luna-0922", input: "x", store: false, include: ["reasoning.encrypted_content"] });
  });

  it("writes errors after the headers as response.failed with the code Codex branches on", () => {
    const limited = parseSse(openaiResponses.streamErrorFrame(new RateLimitError("too many requests", { headers: { "retry-after": "7" } })))[0]!;
    expect(limited.event).toBe("response.failed");
    expect(limited.data.response.error).toEqual({ code: "rate_limit_exceeded", message: "too many requests. Please try again in 7s." });
    const upstream = parseSse(openaiResponses.streamErrorFrame(new UpstreamError("upstream went away")))[0]!;
    expect(upstream.data.response).toMatchObject({ status: "failed", error: { code: "server_error", message: "upstream went away" } });
  });

  it("answers HTTP errors in the OpenAI shape", async () => {
    const response = openaiResponses.errorResponse(new RateLimitError("slow down", { headers: { "retry-after": "2" } }));
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("2");
    expect(await response.json()).toEqual({ error: { message: "slow down", type: "rate_limit_error", code: "rate_limit_exceeded", param: null } });
  });
});

describe("fake upstream /v1/responses", () => {
  it("refuses what OpenAI refuses in a stateless request: orphan tool outputs, foreign encrypted reasoning, previous_response_id", async () => {
    const { startFakeUpstream } = await import("../../fake-upstream/server.ts");
    const fake = await startFakeUpstream();
    try {
      const post = async (body: Json) => {
        const response = await fetch(`${fake.url}/v1/responses`, { method: "POST", headers: { authorization: "Bearer k" }, body: JSON.stringify(body) });
        return { status: response.status, error: ((await response.json()) as Json).error };
      };
      expect(await post({ model: "m", input: [{ type: "function_call_output", call_id: "call_x", output: "x" }] })).toMatchObject({ status: 400 });
      expect((await post({ model: "m", input: [{ type: "reasoning", summary: [], encrypted_content: "forged" }] })).error.code).toBe("invalid_encrypted_content");
      expect((await post({ model: "m", input: "x", previous_response_id: "resp_1" })).status).toBe(400);
      expect((await post({ model: "m", input: "x" })).status).toBe(200);
    } finally {
      await fake.stop();
    }
  });
});
