import type { Generation } from "../repository.ts";

/**
 * A batch of generations as one string and one Float64Array, for the metering thread: `postMessage` of the
 * objects themselves (structured clone, ~25 fields each) cost ~9% of the event loop at c=64; this costs a
 * string concatenation and a few typed-array stores per generation, and the array's buffer is transferred.
 * Strings are concatenated whole, each one's length in `numbers` (-1: null); money and token counts are
 * safe integers, exact in a float64.
 */
export interface PackedBatch {
  text: string;
  numbers: Float64Array;
}

const STRINGS = ["id", "responseId", "accountId", "keyId", "model", "provider", "ingress", "status", "errorCode"] as const;
const NUMBERS = [
  "createdAt",
  "latencyMs",
  "timeToFirstTokenMs",
  "promptTokens",
  "completionTokens",
  "cachedTokens",
  "cacheWriteTokens",
  "reasoningTokens",
  "inputCost",
  "cacheReadCost",
  "cacheWriteCost",
  "outputCost",
  "totalCost",
] as const;
/** Slots per generation: string lengths, numbers, the stream flag. */
const SLOTS = STRINGS.length + NUMBERS.length + 1;

export function packBatch(batch: readonly Generation[]): PackedBatch {
  const numbers = new Float64Array(batch.length * SLOTS);
  let text = "";
  let at = 0;
  for (const g of batch) {
    for (const field of STRINGS) {
      const value = g[field];
      if (value === null) numbers[at++] = -1;
      else {
        numbers[at++] = value.length;
        text += value;
      }
    }
    for (const field of NUMBERS) numbers[at++] = g[field] ?? Number.NaN;
    numbers[at++] = g.stream ? 1 : 0;
  }
  return { text, numbers };
}

export function unpackBatch({ text, numbers }: PackedBatch): Generation[] {
  const batch: Generation[] = [];
  let at = 0;
  let offset = 0;
  while (at < numbers.length) {
    const g: Record<string, unknown> = {};
    for (const field of STRINGS) {
      const length = numbers[at++]!;
      if (length < 0) g[field] = null;
      else {
        g[field] = text.slice(offset, offset + length);
        offset += length;
      }
    }
    for (const field of NUMBERS) {
      const value = numbers[at++]!;
      g[field] = Number.isNaN(value) ? null : value;
    }
    g.stream = numbers[at++] === 1;
    batch.push(g as unknown as Generation);
  }
  return batch;
}
