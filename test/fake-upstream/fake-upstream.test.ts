import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { startFakeUpstream, type FakeUpstream } from "./server.ts";
import { countCompletionTokens, countPromptTokens, computeUsage, parseDirective } from "./openai.ts";

let fake: FakeUpstream;
let client: OpenAI;

beforeAll(async () => {
  fake = await startFakeUpstream();
  client = new OpenAI({ apiKey: "sk-upstream", baseURL: fake.url + "/v1", maxRetries: 0 });
});
afterAll(async () => {
  await fake.stop();
});
beforeEach(() => fake.reset());

const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;

describe("pure helpers", () => {
  test("token formulas", () => {
    // "hi there" = 8 chars → ceil(8/4)=2, + 3 per message → 5
    expect(countPromptTokens({ messages: [{ role: "user", content: "hi there" }] })).toBe(5);
    // array parts: only text counts; 2 messages → +6
    const body = {
      messages: [
        { role: "system", content: "abcde" },
        { role: "user", content: [{ type: "text", text: "fgh" }, { type: "image_url", image_url: { url: "data:x" } }] },
      ],
    };
    expect(countPromptTokens(body)).toBe(Math.ceil(8 / 4) + 6);
    expect(countCompletionTokens("Hello from gpt-4o.")).toBe(4);
    expect(countCompletionTokens(null, [{ name: "abcd", arguments: "{}" }])).toBe(1 + 2);
  });

  test("directive parsing tolerates ]] inside the JSON and uses the last user message", () => {
    const d = parseDirective({
      messages: [
        { role: "user", content: directive({ text: "old" }) },
        { role: "assistant", content: "x" },
        { role: "user", content: "go " + directive({ text: "a", tool_calls: [{ name: "f", arguments: { m: [[1]] } }] }) },
      ],
    });
    expect(d?.text).toBe("a");
    expect(d?.tool_calls?.[0]?.arguments).toEqual({ m: [[1]] });
    expect(parseDirective({ messages: [{ role: "user", content: "nothing" }] })).toBeNull();
  });
});

describe("OpenAI chat completions over HTTP", () => {
  test("non-stream default reply, exact usage, request recorded", async () => {
    const messages = [
      { role: "system" as const, content: "Be terse." },
      { role: "user" as const, content: "Say hello" },
    ];
    const res = await client.chat.completions.create({ model: "gpt-4o-mini", messages });
    expect(res.object).toBe("chat.completion");
    expect(res.id.startsWith("chatcmpl-")).toBe(true);
    expect(res.model).toBe("gpt-4o-mini");
    expect(res.choices).toHaveLength(1);
    expect(res.choices[0]!.message).toMatchObject({ role: "assistant", content: "Hello from gpt-4o-mini.", refusal: null });
    expect(res.choices[0]!.finish_reason).toBe("stop");
    expect(res.choices[0]!.logprobs).toBeNull();
    const prompt = Math.ceil((9 + 9) / 4) + 6;
    expect(res.usage).toEqual({
      prompt_tokens: prompt,
      completion_tokens: 4,
      total_tokens: prompt + 4,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    });
    expect(res.usage).toEqual(computeUsage({ model: "gpt-4o-mini", messages }));

    expect(fake.requests).toHaveLength(1);
    const r = fake.requests[0]!;
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/v1/chat/completions");
    expect(r.headers.authorization).toBe("Bearer sk-upstream");
    expect(r.body.model).toBe("gpt-4o-mini");
    expect(r.body.messages).toEqual(messages);
  });

  test("stream without include_usage: no usage anywhere, [DONE] ends iteration", async () => {
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta).toMatchObject({ role: "assistant", content: "" });
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe("Hello from gpt-4o.");
    expect(chunks.length).toBeGreaterThanOrEqual(5); // role + 3 words + final
    const last = chunks[chunks.length - 1]!;
    expect(last.choices[0]!.finish_reason).toBe("stop");
    expect(last.choices[0]!.delta).toEqual({});
    for (const c of chunks) {
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.model).toBe("gpt-4o");
      expect("usage" in c).toBe(false);
    }
  });

  test("stream with include_usage: usage:null on every chunk, then usage chunk with choices:[]", async () => {
    const messages = [{ role: "user" as const, content: "count me" }];
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      stream_options: { include_usage: true },
      messages,
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const usageChunk = chunks[chunks.length - 1]!;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage).toEqual(computeUsage({ model: "gpt-4o", messages }));
    expect(usageChunk.usage!.prompt_tokens).toBe(2 + 3);
    expect(usageChunk.usage!.completion_tokens).toBe(4);
    for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull();
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).toBe("stop");
  });

  test("raw SSE framing ends with data: [DONE]", async () => {
    const res = await fetch(fake.url + "/v1/chat/completions", {
      method: "POST",
      headers: { authorization: "Bearer k", "content-type": "application/json" },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "x" }] }),
    });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const txt = await res.text();
    expect(txt.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(txt.split("\n\n").every((e) => e === "" || e.startsWith("data: "))).toBe(true);
  });

  test("usage / text / finish_reason directive (non-stream and stream)", async () => {
    const d = directive({
      text: "Custom reply",
      finish_reason: "length",
      usage: { prompt_tokens: 1000, completion_tokens: 500, cached_tokens: 200, cache_write_tokens: 100, reasoning_tokens: 50 },
    });
    const expected = {
      prompt_tokens: 1000,
      completion_tokens: 500,
      total_tokens: 1500,
      prompt_tokens_details: { cached_tokens: 200, audio_tokens: 0, cache_write_tokens: 100 },
      completion_tokens_details: { reasoning_tokens: 50, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
    const res = await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi " + d }] });
    expect(res.choices[0]!.message.content).toBe("Custom reply");
    expect(res.choices[0]!.finish_reason).toBe("length");
    expect(res.usage).toEqual(expected);

    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: d }],
    });
    let usage: unknown = null;
    let text = "";
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? "";
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe("Custom reply");
    expect(usage).toEqual(expected);
  });

  test("no_usage suppresses usage even with include_usage", async () => {
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: directive({ no_usage: true }) }],
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.choices.length === 1 && !("usage" in c))).toBe(true);
    const res = await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: directive({ no_usage: true }) }] });
    expect(res.usage).toBeUndefined();
  });

  test("error status directive → SDK APIError with status and body", async () => {
    for (const status of [400, 429, 500]) {
      const err = await client.chat.completions
        .create({ model: "gpt-4o", messages: [{ role: "user", content: directive({ status, error: { message: `e${status}`, code: "c" } }) }] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.status).toBe(status);
      expect(err.error).toMatchObject({ message: `e${status}`, code: "c" });
    }
    const err = await client.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: directive({ status: 429 }) }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
  });

  test("tool_calls: non-stream and streamed fragments assemble", async () => {
    const d = directive({ tool_calls: [{ name: "get_weather", arguments: { city: "Paris", unit: "c" } }, { name: "noop", arguments: {} }] });
    const res = await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: d }] });
    const msg = res.choices[0]!.message;
    expect(res.choices[0]!.finish_reason).toBe("tool_calls");
    expect(msg.content).toBeNull();
    expect(msg.tool_calls).toHaveLength(2);
    const tc0 = msg.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(tc0.id.startsWith("call_")).toBe(true);
    expect(tc0.type).toBe("function");
    expect(tc0.function).toEqual({ name: "get_weather", arguments: '{"city":"Paris","unit":"c"}' });

    const stream = await client.chat.completions.create({ model: "gpt-4o", stream: true, messages: [{ role: "user", content: d }] });
    const calls: { id?: string; name?: string; args: string }[] = [];
    let finish: string | null = null;
    let fragments = 0;
    for await (const c of stream) {
      const ch = c.choices[0];
      if (!ch) continue;
      if (ch.finish_reason) finish = ch.finish_reason;
      for (const t of ch.delta.tool_calls ?? []) {
        fragments++;
        const cur = (calls[t.index] ??= { args: "" });
        if (t.id) {
          expect(cur.id).toBeUndefined(); // id only in the first fragment
          cur.id = t.id;
          expect(t.function?.arguments).toBe("");
        }
        if (t.function?.name) cur.name = t.function.name;
        cur.args += t.function?.arguments ?? "";
      }
    }
    expect(finish).toBe("tool_calls");
    expect(fragments).toBeGreaterThan(3);
    expect(calls.map((c) => c.name)).toEqual(["get_weather", "noop"]);
    expect(JSON.parse(calls[0]!.args)).toEqual({ city: "Paris", unit: "c" });
    expect(calls[1]!.args).toBe("{}");
    expect(calls.every((c) => c.id?.startsWith("call_"))).toBe(true);

    // Stream-side helper also assembles it.
    const runner = client.chat.completions.stream({ model: "gpt-4o", messages: [{ role: "user", content: d }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.message.tool_calls).toHaveLength(2);
  });

  test("stream_error_after_chunks → SDK throws mid-stream", async () => {
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: directive({ stream_error_after_chunks: 2, error: "upstream exploded" }) }],
    });
    let seen = 0;
    const err = await (async () => {
      for await (const _ of stream) seen++;
    })().catch((e) => e);
    expect(seen).toBe(2);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err.message)).toContain("upstream exploded");
  });

  test("hang_after_chunks: client abort does not hurt the server; delay_ms delays headers", async () => {
    const ac = new AbortController();
    const res = await fetch(fake.url + "/v1/chat/completions", {
      method: "POST",
      signal: ac.signal,
      headers: { authorization: "Bearer k" },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: directive({ hang_after_chunks: 1 }) }] }),
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain('"role":"assistant"');
    const pending = reader.read();
    const raced = await Promise.race([pending.then(() => "data"), Bun.sleep(100).then(() => "stalled")]);
    expect(raced).toBe("stalled");
    ac.abort();
    await pending.catch(() => {});

    const t0 = performance.now();
    const ok = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: directive({ delay_ms: 60, chunk_delay_ms: 5 }) }],
    });
    let text = "";
    for await (const c of ok) text += c.choices[0]?.delta.content ?? "";
    expect(text).toBe("Hello from gpt-4o.");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55);
  });

  test("auth failure → 401 invalid_api_key; models list; unknown route 404", async () => {
    // The SDK refuses an empty apiKey, so strip the Authorization header instead.
    const bad = new OpenAI({ apiKey: "x", baseURL: fake.url + "/v1", maxRetries: 0, defaultHeaders: { Authorization: null } });
    const raw = await fetch(fake.url + "/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [] }),
    });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toEqual({
      error: { message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key", param: null },
    });
    const err = await bad.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(err.status).toBe(401);
    expect(err.code).toBe("invalid_api_key");

    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain("gpt-4o");

    const nf = await fetch(fake.url + "/v1/nope", { headers: { authorization: "Bearer k" } });
    expect(nf.status).toBe(404);
    expect(((await nf.json()) as any).error.type).toBe("invalid_request_error");
  });
});

describe("recording off", () => {
  test("record:false keeps requests empty", async () => {
    const f = await startFakeUpstream({ record: false });
    try {
      const c = new OpenAI({ apiKey: "k", baseURL: f.url + "/v1", maxRetries: 0 });
      await c.chat.completions.create({ model: "x", messages: [{ role: "user", content: "y" }] });
      expect(f.requests).toHaveLength(0);
      expect(f.url).toBe(`http://127.0.0.1:${f.port}`);
    } finally {
      await f.stop();
    }
  });
});
