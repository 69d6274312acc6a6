import type { FinishReason } from "../../../core/canonical.ts";

const FROM_CHAT: Record<string, FinishReason> = {
  stop: "stop",
  length: "length",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  content_filter: "content_filter",
};

/**
 * The finish reason derived from what was emitted (docs/wire-formats.md#finish-reasons): tool_calls whenever a tool
 * call was assembled, whatever the upstream said, and never tool_calls without one.
 */
export function settleFinish(reason: FinishReason, sawToolCall: boolean): FinishReason {
  if (sawToolCall) return "tool_calls";
  return reason === "tool_calls" ? "stop" : reason;
}

/** A chat `finish_reason` in canonical form (unknown values read as stop). */
export function finishFromChat(reason: unknown, sawToolCall: boolean): FinishReason {
  const mapped = typeof reason === "string" ? (FROM_CHAT[reason] ?? "stop") : "stop";
  return settleFinish(mapped, sawToolCall);
}

/** A canonical finish reason as a chat `finish_reason` (chat has no error reason: the error travels on its own). */
export function finishToChat(reason: FinishReason, sawToolCall: boolean): string {
  const settled = settleFinish(reason, sawToolCall);
  return settled === "error" ? "stop" : settled;
}
