import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import Anthropic from "@anthropic-ai/sdk";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startFakeUpstream, type FakeUpstream, type RecordedRequest } from "../fake-upstream/server.ts";

/**
 * Prompt-cache breakpoints through the official SDKs (docs/wire-formats.md#prompt-caching), read in the bodies the
 * fake upstreams received: carried to Anthropic where it expects them, stripped for upstreams that take none, kept
 * for Qwen, and added automatically on translated routes into Anthropic.
 */

const EPHEMERAL = { type: "ephemeral" } as const;
const HOUR = { type: "ephemeral", ttl: "1h" } as const;
/** Well past Sonnet's 1024-token minimum (characters / 4), below Haiku's 2048. */
const LONG = "You are a careful coding agent. ".repeat(160);

let fake: FakeUpstream;
let t: TestGateway;
/** auto_cache: false on the anthropic provider. */
let off: TestGateway;
/** A catalog where claude-opus-5-5 has auto_cache: false. */
let perModel: TestGateway;
let catalogDir: string;
const keys = new Map<TestGateway, string>();

beforeAll(async () => {
  fake = await startFakeUpstream();
  const v1 = `${fake.url}/v1`;
  const env = { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "sk-ant-cache", QWEN_BASE_URL: v1, QWEN_API_KEY: "sk-qwen", GEMINI_BASE_URL: fake.url, GEMINI_API_KEY: "gm-cache" };
  catalogDir = mkdtempSync(join(tmpdir(), "cache-catalog-"));
  const catalog = parse(readFileSync("catalog.yaml", "utf8"));
  catalog.models.find((model: { id: string }) => model.id === "claude-opus-5-5").auto_cache = false;
  writeFileSync(join(catalogDir, "catalog.yaml"), stringify(catalog));
  t = await startTestGateway({ fake, env });
  off = await startTestGateway({ fake, env: { ...env, ANTHROPIC_AUTO_CACHE: "false" } });
  perModel = await startTestGateway({ fake, env: { ...env, GATEWAY_CATALOG: join(catalogDir, "catalog.yaml") } });
  for (const gateway of [t, off, perModel]) keys.set(gateway, (await gateway.newAccountWithKey({ credit: 100 })).key);
});
afterAll(async () => {
  await Promise.all([t, off, perModel].map((gateway) => gateway.stop()));
  await fake.stop();
  rmSync(catalogDir, { recursive: true, force: true });
});

const chat = (gateway: TestGateway = t) => gateway.client(keys.get(gateway)!);
const anthropic = () => new Anthropic({ apiKey: keys.get(t)!, baseURL: t.url, maxRetries: 0 });

/** The one request the fake received since the last reset. */
function upstreamBody(): any {
  expect(fake.requests).toHaveLength(1);
  return (fake.requests[0] as RecordedRequest).body;
}

/** Every cache_control of an Anthropic body with where it is, in prefix order. */
function breakpoints(body: any): [string, unknown][] {
  const found: [string, unknown][] = [];
  (body.tools ?? []).forEach((tool: any, i: number) => tool.cache_control && found.push([`tools.${i}`, tool.cache_control]));
  if (Array.isArray(body.system)) body.system.forEach((block: any, i: number) => block.cache_control && found.push([`system.${i}`, block.cache_control]));
  body.messages.forEach((message: any, m: number) => {
    if (Array.isArray(message.content)) message.content.forEach((block: any, b: number) => block.cache_control && found.push([`messages.${m}.content.${b}`, block.cache_control]));
  });
  return found;
}

// Typed loosely: cache_control is not in the openai SDK's types (OpenRouter's extension).
const marked = (part: Record<string, unknown>, cache_control: unknown = EPHEMERAL) => ({ ...part, cache_control }) as any;

describe("chat completions breakpoints reach Anthropic where it expects them", () => {
  it("system parts, string content promoted to a part, and tool definitions (both styles)", async () => {
    fake.reset();
    const answer = await chat().chat.completions.create({
      model: "claude-sonnet-5-5",
      messages: [
        { role: "system", content: [{ type: "text", text: "Rules." }, marked({ type: "text", text: LONG }, HOUR)] },
        marked({ role: "user", content: "Read the repository." }),
      ],
      tools: [
        marked({ type: "function", function: { name: "read", parameters: { type: "object", properties: {} } } }, HOUR),
        { type: "function", function: { name: "write", parameters: { type: "object", properties: {} }, cache_control: HOUR } as any },
      ],
    });
    expect(answer.choices[0]!.message).toBeDefined();
    const body = upstreamBody();
    expect(body.system).toEqual([
      { type: "text", text: "Rules." },
      { type: "text", text: LONG, cache_control: HOUR },
    ]);
    expect(body.tools.map((tool: any) => tool.cache_control)).toEqual([HOUR, HOUR]);
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Read the repository.", cache_control: EPHEMERAL }] }]);
    expect(breakpoints(body)).toHaveLength(4);
  });

  it("more than four are trimmed from the front: the last four (longest prefixes) are kept, no error", async () => {
    fake.reset();
    await chat().chat.completions.create({
      model: "claude-sonnet-5-5",
      messages: [
        marked({ role: "system", content: "one" }),
        { role: "user", content: [marked({ type: "text", text: "two" }), marked({ type: "text", text: "three" })] },
        marked({ role: "assistant", content: "four" }),
        { role: "user", content: [marked({ type: "text", text: "five" }), marked({ type: "text", text: "six" })] },
      ],
    });
    expect(breakpoints(upstreamBody()).map(([where]) => where)).toEqual(["messages.0.content.1", "messages.1.content.0", "messages.2.content.0", "messages.2.content.1"]);
  });

  it("a malformed breakpoint is a 400 naming its path", async () => {
    fake.reset();
    const error = await chat()
      .chat.completions.create({ model: "claude-sonnet-5-5", messages: [marked({ role: "user", content: "x" }, { type: "ephemeral", ttl: "1d" })] })
      .catch((caught: unknown) => caught as { status: number; error: { param?: string } });
    expect(error).toMatchObject({ status: 400, error: { param: "messages.0.cache_control" } });
    expect(fake.requests).toHaveLength(0);
  });
});

describe("upstreams that take no breakpoints never get them; Qwen keeps them", () => {
  const withBreakpoints = (model: string) => ({
    model,
    messages: [marked({ role: "system", content: "sys" }), { role: "user" as const, content: [marked({ type: "text", text: "hi" })] }],
    tools: [marked({ type: "function", function: { name: "f", parameters: { type: "object", properties: {} }, cache_control: EPHEMERAL } })],
    prompt_cache_key: "thread-42",
  });

  it("OpenAI (relayed chat): the request succeeds and the body has no cache_control anywhere; prompt_cache_key passes as is", async () => {
    fake.reset();
    const answer = await chat().chat.completions.create(withBreakpoints("gpt-6-luna") as any);
    expect(answer.choices).toHaveLength(1);
    const body = upstreamBody();
    expect(JSON.stringify(body)).not.toContain("cache_control");
    expect(body.messages).toEqual([{ role: "system", content: "sys" }, { role: "user", content: [{ type: "text", text: "hi" }] }]);
    expect(body.prompt_cache_key).toBe("thread-42");
  });

  it("DeepSeek (relayed chat): none either", async () => {
    fake.reset();
    await chat().chat.completions.create(withBreakpoints("deepseek-flash") as any);
    expect(JSON.stringify(upstreamBody())).not.toContain("cache_control");
  });

  it("Gemini (translated chat; implicit caching): the request succeeds and the body has no cache_control anywhere", async () => {
    fake.reset();
    const answer = await chat().chat.completions.create(withBreakpoints("gemini-3.8-flash") as any);
    expect(answer.choices).toHaveLength(1);
    const body = upstreamBody();
    expect(body.contents).toBeDefined(); // Gemini's generateContent shape
    expect(JSON.stringify(body)).not.toContain("cache_control");
  });

  it("Qwen (relayed chat, cache_control: true): the client's breakpoints go up as sent", async () => {
    fake.reset();
    await chat().chat.completions.create(withBreakpoints("qwen3.7-plus") as any);
    const body = upstreamBody();
    expect(body.messages[0].cache_control).toEqual(EPHEMERAL);
    expect(body.messages[1].content[0].cache_control).toEqual(EPHEMERAL);
    expect(body.tools[0].cache_control).toEqual(EPHEMERAL);
  });

  it("a Messages client on an OpenAI model (translated): its blocks' breakpoints are dropped", async () => {
    fake.reset();
    await anthropic().messages.create({
      model: "gpt-6-luna",
      max_tokens: 64,
      system: [{ type: "text", text: LONG, cache_control: EPHEMERAL }],
      messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: EPHEMERAL }] }],
    });
    const body = upstreamBody();
    expect(JSON.stringify(body)).not.toContain("cache_control");
    expect(body.messages[0]).toEqual({ role: "system", content: LONG });
  });
});

describe("Messages clients on Anthropic (relayed) are untouched", () => {
  it("their own breakpoints arrive as sent, and none is added even past the minimum length", async () => {
    fake.reset();
    const request = {
      model: "claude-sonnet-5-5",
      max_tokens: 64,
      system: [{ type: "text" as const, text: LONG, cache_control: HOUR }],
      tools: [{ name: "read", input_schema: { type: "object" as const, properties: {} }, cache_control: HOUR }],
      messages: [{ role: "user" as const, content: [{ type: "text" as const, text: "hi", cache_control: EPHEMERAL }] }],
    };
    await anthropic().messages.create(request);
    expect(upstreamBody()).toEqual(request);

    fake.reset();
    const plain = { model: "claude-sonnet-5-5", max_tokens: 64, system: LONG, messages: [{ role: "user" as const, content: "hi" }] };
    await anthropic().messages.create(plain);
    expect(upstreamBody()).toEqual(plain);
  });
});

describe("automatic breakpoints on translated routes into Anthropic", () => {
  it("chat: at the end of the system prefix and on the last user turn, past the minimum length", async () => {
    fake.reset();
    await chat().chat.completions.create({
      model: "claude-sonnet-5-5",
      messages: [
        { role: "system", content: LONG },
        { role: "user", content: "first" },
        { role: "assistant", content: "ok" },
        { role: "user", content: "second" },
      ],
    });
    const body = upstreamBody();
    expect(body.system).toEqual([{ type: "text", text: LONG, cache_control: EPHEMERAL }]);
    expect(breakpoints(body)).toEqual([
      ["system.0", EPHEMERAL],
      ["messages.2.content.0", EPHEMERAL],
    ]);
  });

  it("Responses (Codex style): the same from instructions and the last input message", async () => {
    fake.reset();
    await chat().responses.create({
      model: "claude-sonnet-5-5",
      instructions: LONG,
      input: [{ role: "user", content: [{ type: "input_text", text: "fix the bug" }] }],
      tools: [{ type: "function", name: "shell", parameters: { type: "object", properties: {} }, strict: false }],
      prompt_cache_key: "thread-7",
      store: false,
    });
    const body = upstreamBody();
    expect(breakpoints(body)).toEqual([
      ["system.0", EPHEMERAL],
      ["messages.0.content.0", EPHEMERAL],
    ]);
    expect(body.tools[0].cache_control).toBeUndefined();
    expect(JSON.stringify(body)).not.toContain("prompt_cache_key");
  });

  it("none below the model's minimum: a short prompt, or a Sonnet-sized prefix on Haiku (2048 tokens)", async () => {
    fake.reset();
    await chat().chat.completions.create({ model: "claude-sonnet-5-5", messages: [{ role: "system", content: "short" }, { role: "user", content: "hi" }] });
    expect(JSON.stringify(upstreamBody())).not.toContain("cache_control");

    fake.reset();
    await chat().chat.completions.create({ model: "claude-haiku-4-5", messages: [{ role: "system", content: LONG }, { role: "user", content: "hi" }] });
    expect(JSON.stringify(upstreamBody())).not.toContain("cache_control");
  });

  it("never when the client set its own: only the client's breakpoint arrives", async () => {
    fake.reset();
    await chat().chat.completions.create({
      model: "claude-sonnet-5-5",
      messages: [{ role: "system", content: LONG }, { role: "user", content: "a" }, { role: "assistant", content: "b" }, marked({ role: "user", content: "c" }, HOUR)],
    });
    const body = upstreamBody();
    expect(body.system).toBe(LONG);
    expect(breakpoints(body)).toEqual([["messages.2.content.0", HOUR]]);
  });

  it("auto_cache: false on the anthropic provider turns them off", async () => {
    fake.reset();
    await chat(off).chat.completions.create({ model: "claude-sonnet-5-5", messages: [{ role: "system", content: LONG }, { role: "user", content: "hi" }] });
    expect(JSON.stringify(upstreamBody())).not.toContain("cache_control");
  });

  it("auto_cache: false on a catalog model turns them off for that model only", async () => {
    fake.reset();
    await chat(perModel).chat.completions.create({ model: "claude-opus-5-5", messages: [{ role: "system", content: LONG }, { role: "user", content: "hi" }] });
    expect(JSON.stringify(upstreamBody())).not.toContain("cache_control");

    fake.reset();
    await chat(perModel).chat.completions.create({ model: "claude-sonnet-5-5", messages: [{ role: "system", content: LONG }, { role: "user", content: "hi" }] });
    expect(breakpoints(upstreamBody())).toHaveLength(2);
  });
});
