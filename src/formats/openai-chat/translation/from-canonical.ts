import type { CanonicalChatRequest, CanonicalImagePart, CanonicalMessage, CanonicalPart, CanonicalToolChoice } from "../../../core/canonical.ts";
import { imageUrl } from "./content.ts";
import { toChatToolId } from "./tool-calls.ts";

type Json = Record<string, unknown>;
type ToolResultPart = Extract<CanonicalPart, { type: "tool_result" }>;

/** A canonical request as the body for an OpenAI-compatible chat upstream. */
export function chatFromCanonical(request: CanonicalChatRequest, upstreamModel: string): Record<string, unknown> {
  const messages: Json[] = [];
  if (request.system) messages.push({ role: "system", content: request.system });
  for (const message of request.messages) {
    if (message.role === "assistant") pushAssistant(message, messages, upstreamModel);
    else pushUser(message, messages);
  }
  const body: Record<string, unknown> = { model: upstreamModel, messages };
  if (request.tools && request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description !== undefined ? { description: tool.description } : {}),
        parameters: tool.parameters,
        ...(tool.strict !== undefined ? { strict: tool.strict } : {}),
      },
    }));
    // OpenAI refuses tool_choice and parallel_tool_calls without tools.
    if (request.toolChoice) body.tool_choice = toolChoice(request.toolChoice);
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  }
  if (request.maxOutputTokens !== undefined) body.max_completion_tokens = request.maxOutputTokens;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.stop && request.stop.length > 0) body.stop = request.stop;
  if (request.responseFormat?.type === "json_object") body.response_format = { type: "json_object" };
  else if (request.responseFormat?.type === "json_schema") {
    const { name, schema, strict } = request.responseFormat;
    body.response_format = { type: "json_schema", json_schema: { name, schema, ...(strict !== undefined ? { strict } : {}) } };
  }
  const effort = request.reasoning?.effort ?? effortForBudget(request.reasoning?.budgetTokens);
  if (effort !== undefined) body.reasoning_effort = effort;
  if (request.user !== undefined) body.user = request.user;
  if (request.stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}

/**
 * One assistant message: text joined, tool calls with valid ids, and reasoning text (never signatures)
 * as reasoning_content, only for the model that produced it (docs/wire-formats.md#reasoning-and-signatures:
 * DeepSeek-style upstreams need it back in tool loops; any other model gets no foreign reasoning).
 */
function pushAssistant(message: CanonicalMessage, out: Json[], upstreamModel: string): void {
  let text = "";
  let reasoning = "";
  const toolCalls: Json[] = [];
  for (const part of message.content) {
    if (part.type === "text") text += part.text;
    else if (part.type === "reasoning" && (!part.origin || part.origin.model === upstreamModel)) reasoning += part.text;
    else if (part.type === "tool_call") {
      toolCalls.push({ id: toChatToolId(part.id), type: "function", function: { name: part.name, arguments: part.arguments || "{}" } });
    }
  }
  if (text === "" && toolCalls.length === 0 && reasoning === "") return;
  const assistant: Json = { role: "assistant", content: text === "" && toolCalls.length > 0 ? null : text };
  if (reasoning !== "") assistant.reasoning_content = reasoning;
  if (toolCalls.length > 0) assistant.tool_calls = toolCalls;
  out.push(assistant);
}

/**
 * A user turn: its tool results first, as tool messages (text only in chat), then one user message with
 * the images those results held ("Image output of tool call <id>:") and the turn's own text and images.
 */
function pushUser(message: CanonicalMessage, out: Json[]): void {
  const userParts: Json[] = [];
  for (const part of message.content) {
    if (part.type !== "tool_result") continue;
    const id = toChatToolId(part.toolCallId);
    out.push({ role: "tool", tool_call_id: id, content: toolResultText(part) });
    const images = part.content.filter((item): item is CanonicalImagePart => item.type === "image");
    if (images.length > 0) {
      userParts.push({ type: "text", text: `Image output of tool call ${id}:` });
      for (const image of images) userParts.push(imagePart(image));
    }
  }
  for (const part of message.content) {
    if (part.type === "text" && part.text !== "") userParts.push({ type: "text", text: part.text });
    else if (part.type === "image") userParts.push(imagePart(part));
  }
  if (userParts.length === 0) return;
  const [only] = userParts;
  out.push({ role: "user", content: userParts.length === 1 && only?.type === "text" ? only.text : userParts });
}

function toolResultText(part: ToolResultPart): string {
  let text = part.content.map((item) => (item.type === "text" ? item.text : "")).join("");
  if (text === "" && part.content.some((item) => item.type === "image")) text = "(image output follows in the next message)";
  return part.isError ? `Error: ${text}` : text;
}

function imagePart(part: CanonicalImagePart): Json {
  return { type: "image_url", image_url: { url: imageUrl(part.source) } };
}

function toolChoice(choice: CanonicalToolChoice): unknown {
  return choice.type === "tool" ? { type: "function", function: { name: choice.name } } : choice.type;
}

/** A thinking budget as an effort (heuristic of docs/wire-formats.md#sampling-and-limits). */
function effortForBudget(budget: number | undefined): string | undefined {
  if (budget === undefined || budget <= 0) return undefined;
  if (budget <= 4096) return "low";
  if (budget <= 16384) return "medium";
  return "high";
}
