/** The canonical form every wire format decodes into and encodes from. Pure types, no I/O. */

/** Token usage normalized once (E.8 of the wire reference): inputTokens includes cache reads and writes. */
export interface Usage {
  /** All prompt tokens, cache reads and writes included (OpenAI `prompt_tokens`). */
  inputTokens: number;
  /** Prompt tokens served from the cache (a subset of inputTokens). */
  cacheReadTokens: number;
  /** Prompt tokens written to the cache (a subset of inputTokens). */
  cacheWriteTokens: number;
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

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error";

/** What every plugin may read about the request, whatever the client's wire format. */
export interface CanonicalRequest {
  model: string;
  stream: boolean;
  /** The client's output cap (max_tokens / max_completion_tokens / max_output_tokens), if any. */
  maxOutputTokens?: number;
  /** Whether a streaming client asked for the usage chunk itself (chat: stream_options.include_usage). */
  clientWantsStreamUsage: boolean;
}

/** Normalized stream events (architecture.md "Streaming"). */
export type StreamEvent =
  | { type: "message_start"; id?: string }
  | { type: "text_delta"; text: string }
  | { type: "reasoning_delta"; text: string }
  | { type: "tool_call_delta"; index: number; id?: string; name?: string; arguments?: string }
  | { type: "usage"; usage: Usage }
  | { type: "message_end"; finishReason: FinishReason }
  | { type: "error"; message: string; status?: number };
