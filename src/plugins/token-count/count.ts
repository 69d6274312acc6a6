import { dirname, join } from "node:path";
import { buildO200kCounter } from "./o200k.ts";

/** The o200k tokenizer, loaded in the background: until then, the byte bound. */
let o200k: ((text: string) => number) | undefined;
let loading: Promise<void> | undefined;

/** Starts loading the exact tokenizer; counts stay safe upper bounds meanwhile. */
export function loadTokenizer(): Promise<void> {
  loading ??= buildO200k().then((count) => {
    o200k = count;
    // Loading leaves tens of MB of garbage (file text, decoded pieces): hand it back to the OS now.
    Bun.gc(true);
    (Bun as { shrink?: () => void }).shrink?.();
  });
  return loading;
}

/**
 * The o200k ranks read from gpt-tokenizer's own `data/o200k_base.tiktoken` (one "base64 rank" line per
 * token) into compact tables (o200k.ts) instead of importing its JavaScript module (many times larger once
 * resident, and never returned) or building its Map of 200k strings (figures: docs/performance.md). Same
 * counts (a test compares them with gpt-tokenizer's).
 */
async function buildO200k(): Promise<(text: string) => number> {
  const counter = buildO200kCounter(await Bun.file(o200kDataFile()).text());
  return counter.count;
}

/** gpt-tokenizer's own o200k data file (the package exports no path to it). */
export function o200kDataFile(): string {
  return join(dirname(dirname(Bun.resolveSync("gpt-tokenizer", import.meta.dir))), "data", "o200k_base.tiktoken");
}

function exactCount(text: string): number {
  return o200k ? cachedO200k(text, o200k) : Buffer.byteLength(text);
}

/**
 * o200k counts of long texts seen lately, by content hash. Coding agents resend the whole conversation
 * (system prompt, tool schemas, every earlier turn) on every request: counting a long prompt blocks the event
 * loop for milliseconds, hashing it hardly at all (bench/token-count.ts), so only the new turn is tokenized.
 * 64-bit wyhash with a per-process random seed (nobody can aim a collision at it) and the length in the key.
 */
const CACHE_MIN_LENGTH = 256;
const CACHE_ENTRIES = 20_000;
const cacheSeed = crypto.getRandomValues(new Uint32Array(1))[0]!;
const countCache = new Map<bigint | number, number>();

function cachedO200k(text: string, count: (text: string) => number): number {
  if (text.length < CACHE_MIN_LENGTH) return count(text);
  const key = (BigInt(Bun.hash(text, cacheSeed)) << 24n) ^ BigInt(text.length);
  const hit = countCache.get(key);
  if (hit !== undefined) return hit;
  const tokens = count(text);
  if (countCache.size >= CACHE_ENTRIES) countCache.delete(countCache.keys().next().value!);
  countCache.set(key, tokens);
  return tokens;
}

/**
 * Tokens an image part may cost at most, whatever the family (Anthropic ~1.6k, OpenAI high detail up to
 * ~1.5k, patch-based models ~2.5k, Gemini 258 per 768-px tile). The catalog carries no per-model image
 * figure, so this flat bound applies to every model (`PromptLimits.imageTokens` takes one when it does).
 */
export const IMAGE_TOKEN_BOUND = 6_000;
/** Per-message framing tokens (role, separators): OpenAI uses 3-4. Responses input items count as messages. */
const PER_MESSAGE = 4;
const PER_REQUEST = 8;
/**
 * Tools cost more than their text: the upstream wraps them in a prompt of its own (Anthropic's tool-use
 * system prompt is ~350 tokens; OpenAI renders functions into a namespace block), once per request and
 * a little per tool.
 */
const TOOLS_OVERHEAD = 500;
const PER_TOOL = 20;

/** What a model adds to the bound: its image cost, and its context window for parts of unknown size. */
export interface PromptLimits {
  /** Tokens one image may cost on this model (default IMAGE_TOKEN_BOUND). */
  imageTokens?: number;
  /**
   * The model's context window: a document or file part whose size the gateway cannot see (a PDF, a
   * file id, a URL) may fill it, so it counts as the whole window. Without it such a part counts its JSON.
   */
  contextLength?: number;
}

/**
 * Another family's tokenizer, bounded from above: twice the o200k count (real tokenizers of other
 * families stay well within 1.5x on text and code), never more than the UTF-8 bytes (the bound of any
 * byte-level BPE, and what is used until o200k has loaded).
 */
function boundedCount(text: string): number {
  const bytes = Buffer.byteLength(text);
  return o200k ? Math.min(bytes, 2 * cachedO200k(text, o200k) + 2) : bytes;
}

/**
 * An upper bound of the prompt's own tokens. OpenAI models: the o200k tokenizer (their own). Other
 * families: `boundedCount`. Messages and Responses input items with their framing, the system prompt,
 * tools with their schemas (keys included), output schemas, images at the model's image bound, opaque
 * documents at the context window. What the upstream wraps around tools: `toolPromptOverhead`.
 */
export function countPromptTokens(body: Record<string, unknown>, exactTokenizer: boolean, limits: PromptLimits = {}): number {
  let total = PER_REQUEST;
  const counter: Counter = { count: exactTokenizer ? exactCount : boundedCount, imageTokens: limits.imageTokens ?? IMAGE_TOKEN_BOUND, contextLength: limits.contextLength };
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const message of messages) {
    total += PER_MESSAGE;
    total += countValue(message, counter, false);
  }
  if (Array.isArray(body.input)) total += PER_MESSAGE * body.input.length;
  for (const field of COUNTED_FIELDS) {
    if (body[field] !== undefined) total += countValue(body[field], counter, false);
  }
  for (const field of SCHEMA_FIELDS) {
    const value = body[field];
    if (value !== undefined && value !== null) total += countValue(value, counter, true);
  }
  return total;
}

/**
 * Tokens the upstream adds around tools (not text of the request, so not scaled by any tokenizer
 * ratio): the admission bound adds them to `countPromptTokens`.
 */
export function toolPromptOverhead(body: Record<string, unknown>): number {
  let tools = leafTools(body.tools) + leafTools(body.functions);
  // Responses: Codex declares its tools in `additional_tools` input items (namespaces hold more tools).
  if (Array.isArray(body.input)) {
    for (const item of body.input as { type?: unknown; tools?: unknown }[]) if (item?.type === "additional_tools") tools += leafTools(item.tools);
  }
  return tools === 0 ? 0 : TOOLS_OVERHEAD + PER_TOOL * tools;
}

/** Tools in a declaration list, a namespace's own tools counted one by one. */
function leafTools(list: unknown): number {
  if (!Array.isArray(list)) return 0;
  let count = 0;
  for (const tool of list as { tools?: unknown }[]) count += Array.isArray(tool?.tools) ? leafTools(tool.tools) : 1;
  return count;
}

/** Request fields besides `messages` whose strings reach the model (every wire format's). */
const COUNTED_FIELDS = ["system", "tool_choice", "input", "instructions", "prompt"];
/** Fields whose keys reach the model too (tool and output schemas: property names are text the model reads). */
const SCHEMA_FIELDS = ["tools", "functions", "response_format", "text", "output_format", "output_config"];

interface Counter {
  count: (text: string) => number;
  imageTokens: number;
  contextLength?: number;
}

const IMAGE_TYPES = new Set(["image_url", "image", "input_image"]);
const DOCUMENT_TYPES = new Set(["document", "file", "input_file"]);

/**
 * Counts every string in a JSON value (with `keys`, object keys too), numbers by their digits, image
 * parts at the image bound, documents of unseen size at the context window.
 */
function countValue(value: unknown, counter: Counter, keys: boolean): number {
  if (typeof value === "string") return counter.count(value);
  if (typeof value === "number") return counter.count(String(value));
  if (Array.isArray(value)) {
    let sum = 0;
    for (const item of value) sum += countValue(item, counter, keys);
    return sum;
  }
  if (value && typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (typeof record.type === "string") {
      if (IMAGE_TYPES.has(record.type)) return counter.imageTokens;
      if (DOCUMENT_TYPES.has(record.type) && counter.contextLength !== undefined && !isPlainTextDocument(record)) return counter.contextLength;
    }
    let sum = 0;
    for (const key in record) {
      if (key === "role" || !Object.hasOwn(record, key)) continue;
      if (keys) sum += counter.count(key);
      const item = record[key];
      if (typeof item === "string" && (key === "type" || key === "tool_call_id" || key === "id")) {
        sum += 1;
        continue;
      }
      // A tool call's `input` object (Messages) is JSON the model wrote and reads back: its keys are text.
      sum += countValue(item, counter, keys || key === "input") + (typeof item === "object" && item !== null ? 0 : 1);
    }
    return sum;
  }
  return 0;
}

/** An Anthropic document whose text is in the request (`source.type: "text"`): counted as the text it is. */
function isPlainTextDocument(record: Record<string, unknown>): boolean {
  const source = record.source as Record<string, unknown> | undefined;
  return record.type === "document" && typeof source === "object" && source !== null && source.type === "text";
}

/** Tokens of generated text, for a stream cut short without a usage report. */
export function countTextTokens(text: string, exactTokenizer: boolean): number {
  return exactTokenizer ? exactCount(text) : Buffer.byteLength(text);
}
