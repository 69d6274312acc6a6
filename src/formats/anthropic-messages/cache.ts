/**
 * Prompt-cache breakpoints in an Anthropic Messages body (docs/wire-formats.md#prompt-caching), after Anthropic's
 * rules (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): `cache_control` on tools, system
 * blocks and content blocks; the prefix runs tools -> system -> messages; at most 4 breakpoints a request (more is a
 * 400); a 1-hour breakpoint may not follow a 5-minute one; a prefix below the model's minimum (1024 tokens, 2048 for
 * Haiku models) is silently not cached. Pure functions over the body about to go upstream.
 */
import { isJsonObject, type JsonObject } from "../json.ts";

/** Anthropic's most breakpoints in one request. */
export const MAX_BREAKPOINTS = 4;

/** A 5-minute breakpoint (no ttl: Anthropic's default lifetime). */
const FIVE_MINUTES = Object.freeze({ type: "ephemeral" });

/**
 * The smallest prompt Anthropic caches for a model: 2048 tokens for Haiku models, 1024 for the others (Opus,
 * Sonnet). A catalog entry's `cache_min_tokens` overrides it.
 */
export function minimumCacheableTokens(model: string): number {
  return /haiku/i.test(model) ? 2048 : 1024;
}

/** Every object of the body that may carry `cache_control`, in prefix order: tools, system blocks, content blocks. */
function cacheableBlocks(body: JsonObject): JsonObject[] {
  const blocks: JsonObject[] = [];
  if (Array.isArray(body.tools)) for (const tool of body.tools) if (isJsonObject(tool)) blocks.push(tool);
  if (Array.isArray(body.system)) for (const block of body.system) if (isJsonObject(block)) blocks.push(block);
  if (Array.isArray(body.messages)) {
    for (const message of body.messages) {
      if (!isJsonObject(message) || !Array.isArray(message.content)) continue;
      for (const block of message.content) {
        if (!isJsonObject(block)) continue;
        // A tool result's own blocks come before the result itself in the prefix.
        if (Array.isArray(block.content)) for (const inner of block.content) if (isJsonObject(inner)) blocks.push(inner);
        blocks.push(block);
      }
    }
  }
  return blocks;
}

/**
 * Makes the body's breakpoints acceptable to Anthropic, never refusing the request: beyond four, the earliest are
 * dropped (the last four, the longest prefixes, are kept); a 1-hour breakpoint after a 5-minute one becomes a
 * 5-minute one (longer lifetimes must come first).
 */
export function enforceBreakpointRules(body: JsonObject): void {
  const marked = cacheableBlocks(body).filter((block) => block.cache_control !== undefined);
  for (const block of marked.splice(0, Math.max(0, marked.length - MAX_BREAKPOINTS))) delete block.cache_control;
  let seenFiveMinutes = false;
  for (const block of marked) {
    const ttl = isJsonObject(block.cache_control) ? block.cache_control.ttl : undefined;
    if (ttl === "1h") {
      if (seenFiveMinutes) block.cache_control = { ...FIVE_MINUTES };
    } else seenFiveMinutes = true;
  }
}

/** Whether any tool, system block or content block carries a breakpoint. */
export function hasBreakpoints(body: JsonObject): boolean {
  return cacheableBlocks(body).some((block) => block.cache_control !== undefined);
}

/**
 * Automatic caching for clients that cannot place breakpoints (translated routes): when the body has none, one at
 * the end of the tools + system prefix (the last system block, else the last tool) and one on the last block of the
 * last user turn (the rolling pattern Claude Code uses), each only when the prefix up to it reaches `minTokens`.
 * The length is estimated as characters / 4 (text, and the JSON of every other block): a cheap estimate, good enough
 * to decide; a breakpoint on a prefix a little too short costs nothing (Anthropic just does not cache it).
 * Returns how many breakpoints were added.
 */
export function addAutomaticBreakpoints(body: JsonObject, minTokens: number): number {
  if (hasBreakpoints(body)) return 0;
  const minChars = minTokens * 4;
  let chars = 0;
  let added = 0;
  const tools = Array.isArray(body.tools) ? body.tools.filter(isJsonObject) : [];
  for (const tool of tools) chars += JSON.stringify(tool).length;
  if (typeof body.system === "string") chars += body.system.length;
  else if (Array.isArray(body.system)) for (const block of body.system) chars += blockChars(block);

  const hasSystem = typeof body.system === "string" ? body.system !== "" : Array.isArray(body.system) && body.system.length > 0;
  if (chars >= minChars && (hasSystem || tools.length > 0)) {
    if (typeof body.system === "string" && body.system !== "") body.system = [{ type: "text", text: body.system, cache_control: { ...FIVE_MINUTES } }];
    else if (Array.isArray(body.system) && isJsonObject(body.system.at(-1))) (body.system.at(-1) as JsonObject).cache_control = { ...FIVE_MINUTES };
    else tools.at(-1)!.cache_control = { ...FIVE_MINUTES };
    added++;
  }

  const messages = Array.isArray(body.messages) ? body.messages : [];
  let lastUser = -1;
  for (let index = messages.length - 1; index >= 0; index--) {
    if (isJsonObject(messages[index]) && (messages[index] as JsonObject).role === "user") {
      lastUser = index;
      break;
    }
  }
  if (lastUser < 0) return added;
  for (let index = 0; index <= lastUser && chars < minChars; index++) {
    const content = (messages[index] as JsonObject | undefined)?.content;
    if (typeof content === "string") chars += content.length;
    else if (Array.isArray(content)) for (const block of content) chars += blockChars(block);
  }
  if (chars < minChars) return added;
  const turn = messages[lastUser] as JsonObject;
  if (typeof turn.content === "string") {
    if (turn.content === "") return added;
    turn.content = [{ type: "text", text: turn.content, cache_control: { ...FIVE_MINUTES } }];
  } else {
    const last = Array.isArray(turn.content) ? turn.content.at(-1) : undefined;
    if (!isJsonObject(last) || !CACHEABLE_TYPES.has(String(last.type))) return added;
    last.cache_control = { ...FIVE_MINUTES };
  }
  return added + 1;
}

/** Content blocks Anthropic takes `cache_control` on (thinking blocks take none). */
const CACHEABLE_TYPES = new Set(["text", "image", "document", "tool_use", "tool_result"]);

function blockChars(block: unknown): number {
  if (!isJsonObject(block)) return 0;
  if (block.type === "text" && typeof block.text === "string") return block.text.length;
  return JSON.stringify(block).length;
}
