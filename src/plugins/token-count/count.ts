/** The o200k tokenizer, loaded in the background (its tables take ~1 s to load): until then, the byte bound. */
let o200k: ((text: string) => number) | undefined;
let loading: Promise<void> | undefined;

/** Starts loading the exact tokenizer; counts stay safe upper bounds meanwhile. */
export function loadTokenizer(): Promise<void> {
  loading ??= import("gpt-tokenizer/encoding/o200k_base").then((module) => {
    o200k = module.countTokens;
  });
  return loading;
}

function exactCount(text: string): number {
  return o200k ? o200k(text) : Buffer.byteLength(text);
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
  return o200k ? Math.min(bytes, 2 * o200k(text) + 2) : bytes;
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
  for (const field of ["system", "tools", "functions", "response_format", "tool_choice", "input", "instructions", "prompt"]) {
    if (body[field] !== undefined) total += countValue(body[field], count);
  }
  return total;
}

/** Counts every string in a JSON value (keys of tool schemas included); image parts at the fixed bound. */
function countValue(value: unknown, count: (text: string) => number): number {
  if (typeof value === "string") return count(value);
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + countValue(item, count), 0);
  if (value && typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (record.type === "image_url" || record.type === "image" || record.type === "input_image") return IMAGE_TOKEN_BOUND;
    let sum = 0;
    for (const [key, item] of Object.entries(record)) {
      if (key === "role") continue;
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
