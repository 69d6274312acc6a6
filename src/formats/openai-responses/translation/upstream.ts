import type { StreamDecoder } from "../../../core/format.ts";
import { UpstreamError } from "../../../core/errors.ts";
import type { CanonicalChatRequest, CanonicalImagePart, CanonicalPart, CanonicalResponse, CanonicalTextPart, CanonicalToolChoice, FinishReason, StreamEvent } from "../../../core/canonical.ts";
import { createResponsesEventReader } from "../events.ts";
import { RESPONSES_FORMAT, reasoningText } from "../reasoning-state.ts";
import { canonicalToolName, wrapCustomInput } from "../tools.ts";
import { readResponsesUsage } from "../usage.ts";
import { objectOf, type JsonObject } from "../../json.ts";

type Json = JsonObject;

/**
 * The upstream side, for a client of another format on a provider whose first format is Responses. (The
 * OpenAI provider lists chat first, so today chat and Messages clients reach OpenAI models through chat.)
 * Stateless: `store: false`, and OpenAI's encrypted reasoning replayed only to the model that issued it.
 */
export function responsesFromCanonical(request: CanonicalChatRequest, upstreamModel: string): Record<string, unknown> {
  const input: Json[] = [];
  for (const message of request.messages) {
    for (const part of message.content) {
      const item = message.role === "assistant" ? assistantItem(part, upstreamModel) : userItem(part);
      if (!item) continue;
      const last = input.at(-1);
      // Consecutive text and images of one turn share a message item.
      if (item.type === "message" && last?.type === "message" && last.role === item.role && last.merge && Array.isArray(last.content) && Array.isArray(item.content)) last.content.push(...item.content);
      else input.push(item);
    }
  }
  for (const item of input) delete item.merge;
  const body: Json = { model: upstreamModel, input, store: false, stream: request.stream };
  if (request.system) body.instructions = request.system;
  if (request.tools && request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: "function",
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      parameters: tool.parameters,
      strict: tool.strict ?? false,
    }));
    if (request.toolChoice) body.tool_choice = toolChoice(request.toolChoice);
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  }
  if (request.maxOutputTokens !== undefined) body.max_output_tokens = request.maxOutputTokens;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.responseFormat?.type === "json_object") body.text = { format: { type: "json_object" } };
  else if (request.responseFormat?.type === "json_schema") {
    const { name, schema, strict } = request.responseFormat;
    body.text = { format: { type: "json_schema", name, schema, ...(strict !== undefined ? { strict } : {}) } };
  }
  if (request.reasoning?.effort) {
    body.reasoning = { effort: request.reasoning.effort, summary: "auto" };
    body.include = ["reasoning.encrypted_content"];
  }
  if (request.user) body.safety_identifier = request.user;
  return body;
}

function assistantItem(part: CanonicalPart, upstreamModel: string): Json | undefined {
  switch (part.type) {
    case "text":
      return part.text === "" ? undefined : { type: "message", role: "assistant", merge: true, content: [{ type: "output_text", text: part.text }] };
    case "tool_call":
      return { type: "function_call", call_id: part.id, name: part.name, arguments: part.arguments || "{}" };
    case "reasoning": {
      // Only OpenAI's own encrypted content, for the model that issued it; reasoning without it cannot be replayed.
      const own = part.origin?.format === RESPONSES_FORMAT && part.origin.model === upstreamModel && part.signature !== undefined;
      return own ? { type: "reasoning", summary: part.text === "" ? [] : [{ type: "summary_text", text: part.text }], encrypted_content: part.signature } : undefined;
    }
    default:
      return undefined;
  }
}

function userItem(part: CanonicalPart): Json | undefined {
  if (part.type === "text") return part.text === "" ? undefined : { type: "message", role: "user", merge: true, content: [{ type: "input_text", text: part.text }] };
  if (part.type === "image") return { type: "message", role: "user", merge: true, content: [inputImage(part)] };
  if (part.type !== "tool_result") return undefined;
  const onlyText = part.content.every((item) => item.type === "text");
  const text = part.content.map((item) => (item.type === "text" ? item.text : "")).join("");
  const output = onlyText ? (part.isError ? `Error: ${text}` : text) : part.content.map(outputPart);
  return { type: "function_call_output", call_id: part.toolCallId, output };
}

function outputPart(part: CanonicalTextPart | CanonicalImagePart): Json {
  return part.type === "text" ? { type: "input_text", text: part.text } : inputImage(part);
}

function inputImage(part: CanonicalImagePart): Json {
  const url = part.source.kind === "url" ? part.source.url : `data:${part.source.mediaType};base64,${part.source.data}`;
  return { type: "input_image", image_url: url, detail: "auto" };
}

function toolChoice(choice: CanonicalToolChoice): unknown {
  return choice.type === "tool" ? { type: "function", name: choice.name } : choice.type;
}

/** A Responses object from an upstream in canonical form. */
export function decodeResponsesResponse(body: Record<string, unknown>): CanonicalResponse {
  const response = body as Json;
  if (response.status === "failed") {
    throw new UpstreamError(`upstream response failed: ${String(objectOf(response.error).message ?? "no message").slice(0, 500)}`);
  }
  const model = typeof response.model === "string" ? response.model : "";
  const content: CanonicalPart[] = [];
  for (const item of Array.isArray(response.output) ? (response.output as Json[]) : []) {
    if (item?.type === "reasoning") {
      const encrypted = typeof item.encrypted_content === "string" && item.encrypted_content !== "" ? { signature: item.encrypted_content } : {};
      content.push({ type: "reasoning", text: reasoningText(item), ...encrypted, origin: { format: RESPONSES_FORMAT, model } });
    } else if (item?.type === "message") {
      for (const part of Array.isArray(item.content) ? item.content : []) {
        const text = part?.type === "output_text" ? part.text : part?.type === "refusal" ? part.refusal : undefined;
        if (typeof text === "string" && text !== "") content.push({ type: "text", text });
      }
    } else if (item?.type === "function_call") {
      const args = typeof item.arguments === "string" && item.arguments.trim() !== "" ? item.arguments : "{}";
      content.push({ type: "tool_call", id: String(item.call_id ?? item.id), name: canonicalToolName(String(item.name ?? ""), item.namespace), arguments: args });
    } else if (item?.type === "custom_tool_call") {
      content.push({ type: "tool_call", id: String(item.call_id ?? item.id), name: canonicalToolName(String(item.name ?? ""), item.namespace), arguments: wrapCustomInput(item.input) });
    }
  }
  const sawToolCall = content.some((part) => part.type === "tool_call");
  return {
    id: typeof response.id === "string" ? response.id : "",
    model,
    content,
    finishReason: finishOf(response, sawToolCall),
    usage: readResponsesUsage(response.usage),
  };
}

function finishOf(response: Json, sawToolCall: boolean): FinishReason {
  if (response.status === "incomplete") return objectOf(response.incomplete_details).reason === "content_filter" ? "content_filter" : "length";
  return sawToolCall ? "tool_calls" : "stop";
}

/** Responses events from an upstream -> canonical events; a stream cut before its terminal event is an error. */
export function createResponsesStreamDecoder(): StreamDecoder {
  const reader = createResponsesEventReader();
  return {
    decode(frame): StreamEvent[] {
      if (reader.finished) return [];
      try {
        return reader.read(JSON.parse(frame.data));
      } catch {
        return [];
      }
    },
    end(): StreamEvent[] {
      return reader.finished ? [] : [{ type: "error", message: "upstream stream ended before response.completed", status: 502 }];
    },
  };
}
