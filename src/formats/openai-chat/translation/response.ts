import type { GatewayContext } from "../../../core/context.ts";
import { UpstreamError } from "../../../core/errors.ts";
import { ZERO_USAGE, type CanonicalPart, type CanonicalResponse, type Usage } from "../../../core/canonical.ts";
import { readChatUsage } from "../relay.ts";
import { writeCacheCreation } from "../../anthropic-messages/usage.ts";
import { finishFromChat, finishToChat } from "./finish.ts";
import { argumentsText } from "./tool-calls.ts";
import { customToolNames, unwrapCustomInput, wrapCustomInput } from "./custom-tools.ts";
import { objectOf, type JsonObject } from "../../json.ts";

type Json = JsonObject;

/** The fields of a chat tool call this decoder reads; the values are checked where they are read. */
interface ChatToolCall {
  id?: unknown;
  type?: unknown;
  function?: { name?: unknown; arguments?: unknown };
  custom?: { name?: unknown; input?: unknown };
}

/** A chat completion from an upstream in canonical form: reasoning first, then text, then tool calls. */
export function decodeChatResponse(body: Record<string, unknown>): CanonicalResponse {
  const completion = body as Json;
  const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined;
  if (!choice && completion.error) {
    throw new UpstreamError(`upstream answered with an error: ${String(objectOf(completion.error).message ?? JSON.stringify(completion.error)).slice(0, 500)}`);
  }
  const message: Json = choice?.message ?? {};
  const model = typeof completion.model === "string" ? completion.model : "";
  const content: CanonicalPart[] = [];
  const reasoning = typeof message.reasoning_content === "string" ? message.reasoning_content : message.reasoning;
  if (typeof reasoning === "string" && reasoning !== "") {
    content.push({ type: "reasoning", text: reasoning, origin: { format: "openai-chat", model } });
  }
  const text = responseText(message);
  if (text !== "") content.push({ type: "text", text });
  const calls: (ChatToolCall | null | undefined)[] = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  calls.forEach((call, index) => {
    const id = typeof call?.id === "string" && call.id !== "" ? call.id : `call_${index}`;
    if (call?.type === "custom") {
      content.push({ type: "tool_call", id, name: String(call.custom?.name ?? ""), arguments: wrapCustomInput(call.custom?.input) });
    } else {
      content.push({ type: "tool_call", id, name: String(call?.function?.name ?? ""), arguments: argumentsText(call?.function?.arguments) });
    }
  });
  if (calls.length === 0 && message.function_call && typeof message.function_call === "object") {
    const call = message.function_call as Json;
    content.push({ type: "tool_call", id: "call_0", name: String(call.name ?? ""), arguments: argumentsText(call.arguments) });
  }
  const sawToolCall = content.some((part) => part.type === "tool_call");
  return {
    id: typeof completion.id === "string" ? completion.id : "",
    model,
    content,
    finishReason: finishFromChat(choice?.finish_reason, sawToolCall),
    usage: readChatUsage(completion.usage),
  };
}

function responseText(message: Json): string {
  if (typeof message.content === "string") return message.content;
  if (Array.isArray(message.content)) {
    return message.content.map((part: Json) => (typeof part?.text === "string" ? part.text : "")).join("");
  }
  return typeof message.refusal === "string" ? message.refusal : "";
}

/** A canonical answer as a chat completion for a chat client (model as the client named it). */
export function encodeChatResponse(response: CanonicalResponse, ctx: GatewayContext): unknown {
  const custom = customToolNames(ctx.body);
  let text = "";
  let reasoning = "";
  const toolCalls: Json[] = [];
  for (const part of response.content) {
    if (part.type === "text") text += part.text;
    else if (part.type === "reasoning") reasoning += part.text;
    else if (part.type === "tool_call") toolCalls.push(chatToolCall(part, custom));
  }
  const message: Json = { role: "assistant", content: text === "" && toolCalls.length > 0 ? null : text, refusal: null };
  if (reasoning !== "") message.reasoning_content = reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return {
    id: ctx.requestId, // the id a chat client sees, whatever the upstream: the generation lookup's key
    object: "chat.completion",
    created: Math.floor(ctx.startedAt / 1000),
    model: ctx.request.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishToChat(response.finishReason, toolCalls.length > 0) }],
    usage: chatUsage(response.usage ?? ctx.usage ?? ZERO_USAGE), // none reported: what metering billed
  };
}

function chatToolCall(part: Extract<CanonicalPart, { type: "tool_call" }>, custom: Set<string>): Json {
  if (custom.has(part.name)) {
    const input = unwrapCustomInput(part.arguments);
    if (input !== undefined) return { id: part.id, type: "custom", custom: { name: part.name, input } };
  }
  return { id: part.id, type: "function", function: { name: part.name, arguments: part.arguments || "{}" } };
}


/**
 * Canonical usage in chat's shape (docs/wire-formats.md#usage): prompt_tokens already holds the cache tokens;
 * `prompt_tokens_details.cache_creation` splits cache_write_tokens by lifetime when the prompt wrote to the cache.
 */
export function chatUsage(usage: Usage): Json {
  const promptDetails: Json = { cached_tokens: usage.cacheReadTokens, cache_write_tokens: usage.cacheWriteTokens };
  if (usage.cacheWriteTokens > 0) promptDetails.cache_creation = writeCacheCreation(usage);
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: promptDetails,
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  };
}
