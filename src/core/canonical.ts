/** The canonical form every wire format decodes into and encodes from. Pure types, no I/O. */

/** Token usage normalized once (docs/wire-formats.md#usage): inputTokens includes cache reads and writes. */
export interface Usage {
  /** All prompt tokens, cache reads and writes included (OpenAI `prompt_tokens`). */
  inputTokens: number;
  /** Prompt tokens served from the cache (a subset of inputTokens). */
  cacheReadTokens: number;
  /** Prompt tokens written to the cache (a subset of inputTokens), every lifetime together. */
  cacheWriteTokens: number;
  /**
   * The part of cacheWriteTokens written with a 1-hour lifetime (Anthropic's `ephemeral_1h_input_tokens`,
   * billed at its own price); the rest is the 5-minute write. Absent = 0.
   */
  cacheWrite1hTokens?: number;
  /** Generated tokens, reasoning included. */
  outputTokens: number;
  /** Reasoning tokens (a subset of outputTokens). */
  reasoningTokens: number;
}

export const ZERO_USAGE: Readonly<Usage> = Object.freeze({
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
});

/** The most tokens one usage count is believed at: past it (1e15, 1e308) the report is the upstream's error. */
export const MAX_REPORTED_TOKENS = 1_000_000_000;

/**
 * Whether a usage report's counts can be billed: at least one is present, and every one present is a
 * number in [0, MAX_REPORTED_TOKENS] (an absent count is 0: proto3 JSON omits zeros). A report that fails
 * is no report: readers return undefined and metering bills the counted text. Fractions pass (metering
 * rounds them down).
 */
export function usableCounts(a: unknown, b: unknown, c?: unknown, d?: unknown): boolean {
  return usable(a) && usable(b) && usable(c) && usable(d) && (a != null || b != null || c != null || d != null);
}

function usable(count: unknown): boolean {
  return count == null || (typeof count === "number" && count >= 0 && count <= MAX_REPORTED_TOKENS);
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error";

/** What every plugin may read about the request, whatever the client's wire format. */
export interface CanonicalRequest {
  model: string;
  stream: boolean;
  /** The client's output cap (max_tokens / max_completion_tokens / max_output_tokens), if any. */
  maxOutputTokens?: number;
  /** Whether a streaming client asked for the usage chunk itself (chat: stream_options.include_usage). */
  clientWantsStreamUsage: boolean;
  /** Features the request uses, checked against the model's capabilities (400 when the model lacks one). */
  uses?: { tools?: boolean; images?: boolean; jsonOutput?: boolean; reasoning?: boolean };
  /** OpenAI-format `prompt_cache_key` (Codex sends the thread id): keeps a conversation on one deployment. */
  cacheKey?: string;
}

/** Normalized stream events (architecture.md "Streaming"). Tool calls are numbered 0.. in the order they start. */
export type StreamEvent =
  | { type: "message_start"; id?: string; model?: string }
  | { type: "text_delta"; text: string }
  | { type: "reasoning_delta"; text: string }
  /** The end of a reasoning block: its opaque signature (Anthropic) or encrypted content, when the upstream sent one. */
  | { type: "reasoning_signature"; signature: string; origin?: { format: string; model: string } }
  | { type: "tool_call_start"; index: number; id: string; name: string }
  | { type: "tool_call_delta"; index: number; arguments: string }
  /** Usage so far; a later usage event replaces an earlier one. */
  | { type: "usage"; usage: Usage }
  | { type: "message_end"; finishReason: FinishReason }
  | { type: "error"; message: string; status?: number; code?: string };

/**
 * A prompt-cache breakpoint (Anthropic's `cache_control`): the prefix up to and including the part that carries
 * it is cached; absent ttl is 5 minutes (docs/wire-formats.md#prompt-caching).
 */
export interface CacheControl {
  type: "ephemeral";
  ttl?: "5m" | "1h";
}

/** Content of a message in canonical form. */
export type CanonicalPart =
  | { type: "text"; text: string; cacheControl?: CacheControl }
  | { type: "image"; source: { kind: "url"; url: string } | { kind: "base64"; mediaType: string; data: string }; cacheControl?: CacheControl }
  /** `arguments` is JSON text ("{}" when empty). */
  | { type: "tool_call"; id: string; name: string; arguments: string; cacheControl?: CacheControl }
  | { type: "tool_result"; toolCallId: string; content: (CanonicalTextPart | CanonicalImagePart)[]; isError?: boolean; cacheControl?: CacheControl }
  /**
   * Reasoning / thinking. `signature` (Anthropic) or `encrypted` (OpenAI) are opaque and valid only for the
   * format and model named in `origin`: replayed there byte for byte, dropped anywhere else.
   */
  | { type: "reasoning"; text: string; signature?: string; redactedData?: string; origin?: { format: string; model: string } };

export type CanonicalTextPart = Extract<CanonicalPart, { type: "text" }>;
export type CanonicalImagePart = Extract<CanonicalPart, { type: "image" }>;

export interface CanonicalMessage {
  role: "user" | "assistant";
  content: CanonicalPart[];
}

export interface CanonicalTool {
  name: string;
  description?: string;
  /** JSON schema of the arguments (an object schema). */
  parameters: Record<string, unknown>;
  strict?: boolean;
  cacheControl?: CacheControl;
}

export type CanonicalToolChoice = { type: "auto" } | { type: "none" } | { type: "required" } | { type: "tool"; name: string };

/** A whole chat request in canonical form: what translators go through when formats differ. */
export interface CanonicalChatRequest {
  model: string;
  /** System / developer instructions, hoisted and joined in order. */
  system?: string;
  /**
   * The system prompt as the client's blocks, with their cache breakpoints: set only when one of them has a
   * breakpoint (then `system` is their texts joined). An Anthropic encoder sends these as system blocks.
   */
  systemParts?: { text: string; cacheControl?: CacheControl }[];
  messages: CanonicalMessage[];
  tools?: CanonicalTool[];
  toolChoice?: CanonicalToolChoice;
  parallelToolCalls?: boolean;
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  stop?: string[];
  responseFormat?: { type: "json_object" } | { type: "json_schema"; name: string; schema: Record<string, unknown>; strict?: boolean };
  /** effort: minimal|low|medium|high|...; budgetTokens: a thinking budget. */
  reasoning?: { effort?: string; budgetTokens?: number };
  stream: boolean;
  user?: string;
}

/** A whole non-streamed answer in canonical form. */
export interface CanonicalResponse {
  id: string;
  model: string;
  /** text, tool_call and reasoning parts, in order. */
  content: CanonicalPart[];
  finishReason: FinishReason;
  /** Undefined when the upstream reported no usage. */
  usage?: Usage;
}
