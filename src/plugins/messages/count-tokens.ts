import { countPromptTokens } from "../token-count/count.ts";

/**
 * Claude's tokenizer is not public. Against o200k it spends at most about 35% more tokens on ordinary text
 * (Anthropic's own figure for its newest tokenizer), so ceil(o200k × 1.35) plus a margin bounds it; the
 * UTF-8 byte count bounds any byte-level BPE outright and wins when it is smaller (tiny or odd prompts).
 */
export const CLAUDE_PER_O200K = 1.35;
export const CLAUDE_MARGIN = 16;

/**
 * An upper bound of a prompt's input tokens on a model of `family`, as count_tokens answers it: never an
 * under-count (docs/wire-formats.md#anthropic-messages: Claude Code then never compacts and hits "prompt is too
 * long"). OpenAI: exact o200k; Anthropic: min(bytes, ceil(o200k × 1.35) + 16); other families: the byte bound.
 */
export function countInputTokens(body: Record<string, unknown>, family: string): number {
  if (family === "openai") return countPromptTokens(body, true);
  const bytes = countPromptTokens(body, false);
  if (family !== "anthropic") return bytes;
  return Math.min(bytes, Math.ceil(countPromptTokens(body, true) * CLAUDE_PER_O200K) + CLAUDE_MARGIN);
}
