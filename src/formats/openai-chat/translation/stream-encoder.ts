import type { GatewayContext } from "../../../core/context.ts";
import type { StreamEncoder } from "../../../core/format.ts";
import type { StreamEvent, Usage } from "../../../core/canonical.ts";
import { redact } from "../../../core/secrets.ts";
import { finishToChat } from "./finish.ts";
import { chatUsage } from "./response.ts";

type Json = Record<string, unknown>;

const DONE = "data: [DONE]\n\n";

/**
 * Canonical events -> chat chunks for a chat client (docs/wire-formats.md#openai-chat-completions,
 * docs/wire-formats.md#streams): the role chunk first, tool calls numbered 0.. in start order, one finish chunk, the
 * usage chunk (`choices: []`) just before `[DONE]` when the client asked for it, and no `[DONE]` after an error.
 */
export function createChatStreamEncoder(ctx: GatewayContext): StreamEncoder {
  const model = ctx.request.model;
  const created = Math.floor(ctx.startedAt / 1000);
  const id = ctx.requestId; // every chunk carries the request id: the generation lookup's key
  let started = false;
  let finished = false;
  let failed = false;
  let usage: Usage | undefined;
  /** Canonical tool index -> the client's tool index (0.. in start order). */
  const toolIndex = new Map<number, number>();

  function frame(payload: Json): string {
    return `data: ${JSON.stringify(payload)}\n\n`;
  }

  function chunk(delta: Json, finishReason: string | null = null): string {
    return frame({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    });
  }

  /** The role chunk, once, before anything else the client sees. */
  function start(): string {
    if (started) return "";
    started = true;
    return chunk({ role: "assistant", content: "" });
  }

  function encodeEvent(event: StreamEvent): string {
    switch (event.type) {
      case "message_start":
        return start();
      case "text_delta":
        return event.text === "" ? "" : start() + chunk({ content: event.text });
      case "reasoning_delta":
        return event.text === "" ? "" : start() + chunk({ reasoning_content: event.text });
      case "tool_call_start": {
        const index = toolIndex.size;
        toolIndex.set(event.index, index);
        const call = { index, id: event.id, type: "function", function: { name: event.name, arguments: "" } };
        return start() + chunk({ tool_calls: [call] });
      }
      case "tool_call_delta": {
        const index = toolIndex.get(event.index);
        if (index === undefined || event.arguments === "") return "";
        return chunk({ tool_calls: [{ index, function: { arguments: event.arguments } }] });
      }
      case "usage":
        usage = event.usage;
        return "";
      case "message_end":
        if (finished) return "";
        finished = true;
        return start() + chunk({}, finishToChat(event.finishReason, toolIndex.size > 0));
      case "error":
        failed = true;
        return frame({ error: { message: redact(event.message), type: errorType(event.status), code: event.code ?? "upstream_error" } });
      default:
        return ""; // reasoning signatures cannot be expressed in chat
    }
  }

  return {
    encode(event: StreamEvent): string {
      return failed ? "" : encodeEvent(event);
    },
    end(): string {
      if (failed) return "";
      let out = "";
      if (usage && ctx.request.clientWantsStreamUsage) {
        out += frame({ id, object: "chat.completion.chunk", created, model, choices: [], usage: chatUsage(usage) });
      }
      return out + DONE;
    },
  };
}

function errorType(status: number | undefined): string {
  if (status === 429) return "rate_limit_error";
  if (status !== undefined && status >= 400 && status < 500) return "invalid_request_error";
  return "upstream_error";
}
