import type { UpstreamErrorInfo } from "../../core/format.ts";

/**
 * The upstream's message (and type, code) from a non-2xx OpenAI answer: the one error shape OpenAI's APIs share
 * (chat completions, Responses, images), so those formats read it here.
 */
export function readOpenAIError(status: number, text: string): UpstreamErrorInfo {
  try {
    const error = JSON.parse(text)?.error;
    if (error && typeof error.message === "string") return { message: error.message, type: error.type ?? undefined, code: error.code ?? undefined };
  } catch {}
  return { message: text.slice(0, 500) || `HTTP ${status}` };
}
