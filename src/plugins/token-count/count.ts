import { dirname, join } from "node:path";
import { buildO200kCounter } from "./o200k.ts";

/** The o200k tokenizer, loaded in the background (~0.2 s): until then, the byte bound. */
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
 * token) into compact tables (o200k.ts, ~5 MB) instead of importing its 2.4 MB JavaScript module
 * (~80 MB resident, never returned) or building its Map of 200k strings (~25 MB). Same counts (a test
 * compares them with gpt-tokenizer's).
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
 * (system prompt, tool schemas, every earlier turn) on every request: counting a 160 KB prompt takes
 * ~10 ms of the event loop; hashing it ~0.02 ms, so only the new turn is tokenized. 64-bit wyhash with a
 * per-process random seed (nobody can aim a collision at it) and the length in the key.
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

/** Tokens an image part may cost at most, whatever the family (Anthropic ~1.6k, OpenAI high detail ~1.1k). */
export const IMAGE_TOKEN_BOUND = 6_000;
/** Per-message framing tokens (role, separators): OpenAI uses 3-4. */
const PER_MESSAGE = 4;
const PER_REQUEST = 8;

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
 * An upper bound of the prompt's tokens. OpenAI models: the o200k tokenizer (their own). Other
 * families: `boundedCount`.
 */
export function countPromptTokens(body: Record<string, unknown>, exactTokenizer: boolean): number {
  let total = PER_REQUEST;
  const count = exactTokenizer ? exactCount : boundedCount;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (const message of messages) {
    total += PER_MESSAGE;
    total += countValue(message, count);
  }
  for (const field of COUNTED_FIELDS) {
    if (body[field] !== undefined) total += countValue(body[field], count);
  }
  return total;
}

/** Request fields besides `messages` whose strings reach the model (every wire format's). */
const COUNTED_FIELDS = ["system", "tools", "functions", "response_format", "tool_choice", "input", "instructions", "prompt"];

/** Counts every string in a JSON value (keys of tool schemas included); image parts at the fixed bound. */
function countValue(value: unknown, count: (text: string) => number): number {
  if (typeof value === "string") return count(value);
  if (Array.isArray(value)) {
    let sum = 0;
    for (const item of value) sum += countValue(item, count);
    return sum;
  }
  if (value && typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (record.type === "image_url" || record.type === "image" || record.type === "input_image") return IMAGE_TOKEN_BOUND;
    let sum = 0;
    for (const key in record) {
      if (key === "role" || !Object.hasOwn(record, key)) continue;
      const item = record[key];
      if (typeof item === "string" && (key === "type" || key === "tool_call_id" || key === "id")) {
        sum += 1;
        continue;
      }
      sum += countValue(item, count) + (typeof item === "object" && item !== null ? 0 : 1);
    }
    return sum;
  }
  return 0;
}

/** Tokens of generated text, for a stream cut short without a usage report. */
export function countTextTokens(text: string, exactTokenizer: boolean): number {
  return exactTokenizer ? exactCount(text) : Buffer.byteLength(text);
}
