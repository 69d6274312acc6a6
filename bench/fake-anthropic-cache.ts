/**
 * A fake Anthropic Messages upstream that honours prompt-cache breakpoints the way Anthropic does
 * (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), for bench/prompt-caching.ts.
 *
 *   POST /v1/messages   non-stream JSON, or SSE (`event:` lines) when `stream` is true
 *
 * The prompt is a sequence of blocks in Anthropic's prefix order: tools, then system blocks, then every message's
 * content blocks (a tool_result's content before the result; string content counts as one text block). A block's
 * size is its characters: a text block's text, the JSON of any other block (without its `cache_control`, a
 * tool_result without its content); tokens = ceil(characters / 4) everywhere (the
 * prefix up to a block, the whole prompt, the answer). A block with `cache_control` is a breakpoint.
 *
 * - No breakpoint: nothing is read or written (Anthropic caches only where the request says).
 * - Read: for each breakpoint, the block boundaries from it back over LOOKBACK blocks are looked up in the cache
 *   (Anthropic checks about 20 blocks before a breakpoint for a hit, which is what lets a breakpoint that moves
 *   with the conversation read what the previous turn wrote); the longest cached prefix found is read
 *   (`cache_read_input_tokens`) and its lifetime renewed.
 * - Write: every breakpoint past what was read whose prefix reaches the model's minimum (1,024 tokens, 2,048 for
 *   Haiku models; shorter prefixes are silently not cached) is written, keyed by a hash of the model and the prefix,
 *   for 5 minutes (or 1 hour with `ttl: "1h"`) on the fake's own clock; the tokens from the read point to the last
 *   such breakpoint are `cache_creation_input_tokens`, split in `cache_creation` by the lifetime of the breakpoint
 *   that closes each segment.
 * - `input_tokens` = the prompt's tokens less the read and written ones.
 * - More than 4 breakpoints, or a 1-hour breakpoint after a 5-minute one, is a 400, as upstream.
 *
 * The answer: a short text (the step number, then a fixed paragraph) and, when the request offers tools, one
 * `read_file` tool_use; output tokens = ceil(characters / 4) of the text plus the tool call's name and arguments.
 */
import { createHash } from "node:crypto";

type Json = Record<string, any>;

/** Anthropic's lookback: block boundaries checked before a breakpoint for a cache hit. */
export const LOOKBACK = 20;
const FIVE_MINUTES_MS = 5 * 60_000;
const ONE_HOUR_MS = 60 * 60_000;

export const tokensOf = (chars: number) => Math.ceil(chars / 4);

export interface CacheUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

export interface CacheFake {
  url: string;
  /** Every answered request's usage, in order. */
  answered: CacheUsage[];
  /** Breakpoints of every answered request, in order. */
  breakpoints: number[];
  /** Forgets every cached prefix, the recorded usage, and restarts the message and tool ids. */
  reset(): void;
  /** Moves the fake's clock (ms). */
  advance(ms: number): void;
  stop(): Promise<void>;
}

interface Block {
  /** What the hash sees: the role and the block's JSON without cache_control. */
  key: string;
  chars: number;
  ttl: "5m" | "1h" | null;
}

const stripped = (block: Json): Json => {
  const { cache_control: _, ...rest } = block;
  return rest;
};

function ttlOf(block: Json): "5m" | "1h" | null {
  const control = block?.cache_control;
  if (control === undefined || control === null) return null;
  return control.ttl === "1h" ? "1h" : "5m";
}

function blockOf(role: string, block: Json): Block {
  const bare = stripped(block);
  const chars = bare.type === "text" && typeof bare.text === "string" ? bare.text.length : JSON.stringify(bare).length;
  return { key: `${role}\u0000${JSON.stringify(bare)}`, chars, ttl: ttlOf(block) };
}

/** The prompt's blocks in prefix order: tools → system → messages. */
export function promptBlocks(body: Json): Block[] {
  const blocks: Block[] = [];
  for (const tool of Array.isArray(body.tools) ? body.tools : []) blocks.push(blockOf("tool", tool));
  if (typeof body.system === "string" && body.system !== "") blocks.push(blockOf("system", { type: "text", text: body.system }));
  else if (Array.isArray(body.system)) for (const block of body.system) blocks.push(blockOf("system", block));
  for (const message of Array.isArray(body.messages) ? body.messages : []) {
    const role = String(message?.role);
    if (typeof message?.content === "string") {
      blocks.push(blockOf(role, { type: "text", text: message.content }));
      continue;
    }
    for (const block of Array.isArray(message?.content) ? message.content : []) {
      if (block?.type === "tool_result") {
        // Its content first (a string counts as one text block), then the result itself without it.
        const content = typeof block.content === "string" ? [{ type: "text", text: block.content }] : Array.isArray(block.content) ? block.content : [];
        for (const inner of content) blocks.push(blockOf(role, inner));
        blocks.push(blockOf(role, { ...block, content: [] }));
      } else blocks.push(blockOf(role, block));
    }
  }
  return blocks;
}

const minimumTokens = (model: string) => (/haiku/i.test(model) ? 2048 : 1024);

function error(status: number, type: string, message: string): Response {
  return Response.json({ type: "error", error: { type, message } }, { status });
}

export async function startCacheFake(options: { port?: number } = {}): Promise<CacheFake> {
  let clock = 0;
  /** prefix hash → when it expires (fake clock) and its lifetime (renewed on every read). */
  const cache = new Map<string, { expires: number; ttlMs: number }>();
  const answered: CacheUsage[] = [];
  const breakpointCounts: number[] = [];
  let counter = 0;

  /** Reads and writes the cache for one request; returns the prompt's usage (output_tokens left 0). */
  function account(body: Json): CacheUsage | string {
    const blocks = promptBlocks(body);
    const hashes: string[] = [];
    const prefixTokens: number[] = [];
    let hash = createHash("sha256").update(String(body.model)).digest("hex");
    let chars = 0;
    for (const block of blocks) {
      hash = createHash("sha256").update(hash).update("\u0001").update(block.key).digest("hex");
      chars += block.chars;
      hashes.push(hash);
      prefixTokens.push(tokensOf(chars));
    }
    const total = tokensOf(chars);
    const marks = blocks.flatMap((block, index) => (block.ttl ? [index] : []));
    breakpointCounts.push(marks.length);
    const usage: CacheUsage = {
      input_tokens: total,
      output_tokens: 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    };
    if (marks.length > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${marks.length}.`;
    let seenFiveMinutes = false;
    for (const index of marks) {
      if (blocks[index]!.ttl === "1h" && seenFiveMinutes) return "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block";
      if (blocks[index]!.ttl === "5m") seenFiveMinutes = true;
    }
    if (marks.length === 0) return usage;

    // Read: the longest live prefix at or up to LOOKBACK blocks before a breakpoint.
    let readAt = -1;
    for (const mark of marks) {
      for (let index = mark; index >= 0 && index > mark - LOOKBACK; index--) {
        const entry = cache.get(hashes[index]!);
        if (entry !== undefined && entry.expires > clock) {
          if (index > readAt) readAt = index;
          break;
        }
      }
    }
    const read = readAt >= 0 ? prefixTokens[readAt]! : 0;
    if (readAt >= 0) {
      const entry = cache.get(hashes[readAt]!)!;
      entry.expires = clock + entry.ttlMs;
    }

    // Write: each breakpoint past the read point whose prefix is long enough.
    let written = 0;
    let from = read;
    for (const mark of marks) {
      if (mark <= readAt || prefixTokens[mark]! < minimumTokens(String(body.model))) continue;
      const ttl = blocks[mark]!.ttl!;
      const segment = prefixTokens[mark]! - from;
      if (ttl === "1h") usage.cache_creation.ephemeral_1h_input_tokens += segment;
      else usage.cache_creation.ephemeral_5m_input_tokens += segment;
      written += segment;
      from = prefixTokens[mark]!;
      const ttlMs = ttl === "1h" ? ONE_HOUR_MS : FIVE_MINUTES_MS;
      cache.set(hashes[mark]!, { expires: clock + ttlMs, ttlMs });
    }
    usage.cache_read_input_tokens = read;
    usage.cache_creation_input_tokens = written;
    usage.input_tokens = total - read - written;
    return usage;
  }

  function reply(body: Json): { content: Json[]; outputTokens: number; stopReason: string } {
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const step = messages.filter((message: Json) => message?.role === "user").length;
    const text =
      `Step ${step}: I read what you sent and compared it with the plan. The failing path is in the parser's error branch, ` +
      "which drops the span of the token it rejected; the fix keeps the span and reports it in the diagnostic. Before " +
      "changing anything I want to look at the next module the test touches, so that the change stays in one place.";
    const content: Json[] = [{ type: "text", text }];
    let chars = text.length;
    if (Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice?.type !== "none") {
      const input = { path: `src/module-${step}.ts` };
      content.push({ type: "tool_use", id: `toolu_bench${(++counter).toString(36)}`, name: "read_file", input });
      chars += "read_file".length + JSON.stringify(input).length;
    }
    return { content, outputTokens: tokensOf(chars), stopReason: content.length > 1 ? "tool_use" : "end_turn" };
  }

  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const path = new URL(request.url).pathname;
      if (request.method !== "POST" || path !== "/v1/messages") return error(404, "not_found_error", `no route ${request.method} ${path}`);
      if (!request.headers.get("x-api-key")) return error(401, "authentication_error", "x-api-key header is required");
      if (!request.headers.get("anthropic-version")) return error(400, "invalid_request_error", "anthropic-version: header is required");
      let body: Json;
      try {
        body = (await request.json()) as Json;
      } catch {
        return error(400, "invalid_request_error", "There was an error parsing the body of your request");
      }
      if (typeof body?.model !== "string" || !Array.isArray(body.messages) || !Number.isInteger(body.max_tokens)) {
        return error(400, "invalid_request_error", "model, messages and max_tokens are required");
      }
      const usage = account(body);
      if (typeof usage === "string") return error(400, "invalid_request_error", usage);
      const { content, outputTokens, stopReason } = reply(body);
      usage.output_tokens = outputTokens;
      answered.push(usage);
      const id = `msg_bench${(++counter).toString(36)}`;
      const message = { id, type: "message", role: "assistant", model: body.model, content, stop_reason: stopReason, stop_sequence: null, usage };
      if (body.stream !== true) return Response.json(message);
      return new Response(streamEvents(message, usage).join(""), { headers: { "content-type": "text/event-stream; charset=utf-8" } });
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    answered,
    breakpoints: breakpointCounts,
    reset() {
      cache.clear();
      counter = 0;
      answered.length = 0;
      breakpointCounts.length = 0;
    },
    advance(ms: number) {
      clock += ms;
    },
    async stop() {
      await server.stop(true);
    },
  };
}

const event = (name: string, data: Json) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

/** The answer as Anthropic's SSE events (https://docs.anthropic.com/en/api/messages-streaming). */
function streamEvents(message: Json, usage: CacheUsage): string[] {
  const events = [event("message_start", { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } })];
  (message.content as Json[]).forEach((block, index) => {
    if (block.type === "text") {
      events.push(event("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }));
      for (const piece of block.text.match(/.{1,64}/gs) ?? []) {
        events.push(event("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: piece } }));
      }
    } else {
      events.push(event("content_block_start", { type: "content_block_start", index, content_block: { ...block, input: {} } }));
      events.push(event("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } }));
    }
    events.push(event("content_block_stop", { type: "content_block_stop", index }));
  });
  const { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens } = usage;
  events.push(
    event("message_delta", {
      type: "message_delta",
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens },
    }),
  );
  events.push(event("message_stop", { type: "message_stop" }));
  return events;
}
