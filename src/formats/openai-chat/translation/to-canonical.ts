import { InvalidRequestError } from "../../../core/errors.ts";
import type {
  CanonicalChatRequest,
  CanonicalImagePart,
  CanonicalMessage,
  CanonicalPart,
  CanonicalTextPart,
  CanonicalTool,
  CanonicalToolChoice,
} from "../../../core/canonical.ts";
import { argumentsText } from "./tool-calls.ts";
import { customToolParameters, wrapCustomInput } from "./custom-tools.ts";
import { chatMessagePieces, lastCacheControl, parseImageUrl } from "./content.ts";
import { readCacheControl } from "../../cache-control.ts";
import type { ChatCompletionRequest } from "../request.ts";
import { isJsonObject, objectOf, stringOf, type JsonObject } from "../../json.ts";

/** A validated chat-completions body: the checked fields typed, every other field read with a guard. */
type ChatBody = ChatCompletionRequest & JsonObject;

/**
 * A chat-completions client body in canonical form (docs/wire-formats.md#roles-and-system-prompt). Throws
 * InvalidRequestError naming the field.
 */
export function chatToCanonical(body: Record<string, unknown>): CanonicalChatRequest {
  const request = body as ChatBody;
  const model = String(request.model ?? "");
  const { system, systemParts, messages } = readMessages(request.messages, model);
  const canonical: CanonicalChatRequest = { model, messages, stream: request.stream === true };
  if (system.length > 0) canonical.system = system.join("\n\n");
  if (systemParts.some((part) => part.cacheControl)) canonical.systemParts = systemParts;
  const tools = readTools(request.tools);
  if (tools) canonical.tools = tools;
  const toolChoice = readToolChoice(request.tool_choice);
  if (toolChoice) canonical.toolChoice = toolChoice;
  if (typeof request.parallel_tool_calls === "boolean") canonical.parallelToolCalls = request.parallel_tool_calls;
  const maxOutput = request.max_completion_tokens ?? request.max_tokens;
  if (typeof maxOutput === "number") canonical.maxOutputTokens = maxOutput;
  if (typeof request.temperature === "number") canonical.temperature = request.temperature;
  if (typeof request.top_p === "number") canonical.topP = request.top_p;
  const stop = readStop(request.stop);
  if (stop) canonical.stop = stop;
  const responseFormat = readResponseFormat(request.response_format);
  if (responseFormat) canonical.responseFormat = responseFormat;
  if (typeof request.reasoning_effort === "string") canonical.reasoning = { effort: request.reasoning_effort };
  if (typeof request.user === "string") canonical.user = request.user;
  return canonical;
}

/**
 * Hoists system/developer text (in order; `systemParts` keeps each text part with its breakpoint) and folds tool
 * messages into user turns of tool results.
 */
function readMessages(list: unknown, model: string): { system: string[]; systemParts: NonNullable<CanonicalChatRequest["systemParts"]>; messages: CanonicalMessage[] } {
  if (!Array.isArray(list)) throw new InvalidRequestError("invalid request: 'messages' must be an array", { param: "messages" });
  const system: string[] = [];
  const systemParts: NonNullable<CanonicalChatRequest["systemParts"]> = [];
  const messages: CanonicalMessage[] = [];
  const legacy = { lastCallId: "", count: 0 };
  /** The user turn that holds tool results, while tool messages (and the user text after them) keep coming. */
  let toolTurn: CanonicalMessage | undefined;
  list.forEach((item: unknown, index) => {
    const where = `messages.${index}`;
    const message = objectOf(item);
    switch (message.role) {
      case "system":
      case "developer": {
        const pieces = chatMessagePieces(message, where);
        const text = pieces.map((piece) => piece.text).join("");
        if (text !== "") system.push(text);
        systemParts.push(...pieces.filter((piece) => piece.text !== ""));
        return;
      }
      case "tool":
      case "function": {
        const part = readToolResult(message, where, legacy);
        if (!toolTurn) messages.push((toolTurn = { role: "user", content: [] }));
        toolTurn.content.push(part);
        return;
      }
      case "user": {
        const content = readUserContent(message.content, `${where}.content`);
        const onMessage = readCacheControl(message.cache_control, `${where}.cache_control`, "chat");
        const last = content.at(-1);
        if (onMessage && last) last.cacheControl = onMessage;
        if (toolTurn) toolTurn.content.push(...content);
        else if (content.length > 0) messages.push({ role: "user", content });
        return;
      }
      case "assistant": {
        toolTurn = undefined;
        const content = readAssistant(message, where, model, legacy);
        if (content.length > 0) messages.push({ role: "assistant", content });
        return;
      }
      default:
        throw new InvalidRequestError(`invalid request: '${where}.role' is not a chat role (got ${JSON.stringify(message.role)})`, {
          param: `${where}.role`,
        });
    }
  });
  return { system, systemParts, messages };
}

function readUserContent(content: unknown, where: string): (CanonicalTextPart | CanonicalImagePart)[] {
  if (content === null || content === undefined) return [];
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  if (!Array.isArray(content)) throw new InvalidRequestError(`invalid request: '${where}' must be a string or an array of parts`, { param: where });
  const parts: (CanonicalTextPart | CanonicalImagePart)[] = [];
  content.forEach((item: unknown, index) => {
    const at = `${where}.${index}`;
    const part = objectOf(item);
    const cacheControl = readCacheControl(part.cache_control, `${at}.cache_control`, "chat");
    if (part.type === "text") {
      if (typeof part.text === "string" && part.text !== "") parts.push({ type: "text", text: part.text, ...(cacheControl ? { cacheControl } : {}) });
    } else if (part.type === "image_url") {
      const url = typeof part.image_url === "string" ? part.image_url : objectOf(part.image_url).url;
      parts.push({ type: "image", source: parseImageUrl(url, `${at}.image_url.url`), ...(cacheControl ? { cacheControl } : {}) });
    } else {
      throw new InvalidRequestError(
        `invalid request: '${at}.type' ${JSON.stringify(part.type)} cannot be translated for this model's upstream (text and image_url parts can)`,
        { param: `${at}.type` },
      );
    }
  });
  return parts;
}

function readAssistant(message: JsonObject, where: string, model: string, legacy: { lastCallId: string; count: number }): CanonicalPart[] {
  const parts: CanonicalPart[] = [];
  const reasoning = typeof message.reasoning_content === "string" ? message.reasoning_content : message.reasoning;
  if (typeof reasoning === "string" && reasoning !== "") {
    parts.push({ type: "reasoning", text: reasoning, origin: { format: "openai-chat", model } });
  }
  const pieces = chatMessagePieces(message, where);
  const text = pieces.map((piece) => piece.text).join("");
  if (text !== "") parts.push({ type: "text", text });
  if (Array.isArray(message.tool_calls)) {
    message.tool_calls.forEach((call: unknown, index: number) => parts.push(readToolCall(objectOf(call), `${where}.tool_calls.${index}`)));
  }
  if (typeof message.function_call === "object" && message.function_call !== null) {
    legacy.lastCallId = `call_legacy_${legacy.count++}`;
    const call = objectOf(message.function_call);
    parts.push({ type: "tool_call", id: legacy.lastCallId, name: String(call.name ?? ""), arguments: argumentsText(call.arguments) });
  }
  // A breakpoint anywhere in the message's text (or on the message) marks the end of the whole message: its text is
  // joined into one part, and the tool calls after it belong to the same turn (docs/wire-formats.md#prompt-caching).
  const cacheControl = lastCacheControl(pieces);
  const last = parts.at(-1);
  if (cacheControl && last && last.type !== "reasoning") last.cacheControl = cacheControl;
  return parts;
}

function readToolCall(call: JsonObject, where: string): CanonicalPart {
  if (typeof call.id !== "string" || call.id === "") {
    throw new InvalidRequestError(`invalid request: '${where}.id' is required`, { param: `${where}.id` });
  }
  if (call.type === "custom") {
    const custom = objectOf(call.custom);
    return { type: "tool_call", id: call.id, name: String(custom.name ?? ""), arguments: wrapCustomInput(custom.input) };
  }
  const fn = objectOf(call.function);
  return { type: "tool_call", id: call.id, name: String(fn.name ?? ""), arguments: argumentsText(fn.arguments) };
}

function readToolResult(message: JsonObject, where: string, legacy: { lastCallId: string }): CanonicalPart {
  const toolCallId = message.role === "function" ? legacy.lastCallId : message.tool_call_id;
  if (typeof toolCallId !== "string" || toolCallId === "") {
    throw new InvalidRequestError(`invalid request: '${where}.tool_call_id' is required on tool messages`, { param: `${where}.tool_call_id` });
  }
  const pieces = chatMessagePieces(message, where);
  const text = pieces.map((piece) => piece.text).join("");
  const cacheControl = lastCacheControl(pieces);
  return { type: "tool_result", toolCallId, content: text === "" ? [] : [{ type: "text", text }], ...(cacheControl ? { cacheControl } : {}) };
}

function readTools(tools: unknown): CanonicalTool[] | undefined {
  if (!Array.isArray(tools) || tools.length === 0) return undefined;
  return tools.map((item: unknown, index): CanonicalTool => {
    const tool = objectOf(item);
    if (tool.type === "function") {
      const fn = objectOf(tool.function);
      // OpenRouter puts the breakpoint on the tool, others on its function.
      const cacheControl =
        readCacheControl(tool.cache_control, `tools.${index}.cache_control`, "chat") ??
        readCacheControl(fn.cache_control, `tools.${index}.function.cache_control`, "chat");
      const parameters = isJsonObject(fn.parameters) ? fn.parameters : { type: "object", properties: {} };
      return withOptional({ name: String(fn.name ?? ""), parameters, ...(cacheControl ? { cacheControl } : {}) }, fn);
    }
    if (tool.type === "custom") {
      const custom = objectOf(tool.custom);
      const cacheControl = readCacheControl(tool.cache_control, `tools.${index}.cache_control`, "chat");
      return withOptional({ name: String(custom.name ?? ""), parameters: customToolParameters(), ...(cacheControl ? { cacheControl } : {}) }, { description: custom.description });
    }
    throw new InvalidRequestError(`invalid request: 'tools.${index}.type' ${JSON.stringify(tool.type)} is not supported (function and custom are)`, {
      param: `tools.${index}.type`,
    });
  });
}

function withOptional(tool: CanonicalTool, source: JsonObject): CanonicalTool {
  if (typeof source.description === "string") tool.description = source.description;
  if (typeof source.strict === "boolean") tool.strict = source.strict;
  return tool;
}

function readToolChoice(choice: unknown): CanonicalToolChoice | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === "auto" || choice === "none" || choice === "required") return { type: choice };
  const value = objectOf(choice);
  const named = value.type === "function" ? objectOf(value.function).name : value.type === "custom" ? objectOf(value.custom).name : undefined;
  if (typeof named === "string") return { type: "tool", name: named };
  // allowed_tools cannot narrow the tool list in canonical form: keep its mode.
  if (value.type === "allowed_tools") return { type: objectOf(value.allowed_tools).mode === "required" ? "required" : "auto" };
  throw new InvalidRequestError(`invalid request: 'tool_choice' ${JSON.stringify(choice).slice(0, 60)} is not supported`, { param: "tool_choice" });
}

function readStop(stop: unknown): string[] | undefined {
  if (typeof stop === "string") return [stop];
  if (Array.isArray(stop)) {
    const list = stop.filter((item): item is string => typeof item === "string");
    return list.length > 0 ? list : undefined;
  }
  return undefined;
}

function readResponseFormat(format: unknown): CanonicalChatRequest["responseFormat"] {
  const value = objectOf(format);
  if (value.type === "json_object") return { type: "json_object" };
  if (value.type === "json_schema") {
    const spec = objectOf(value.json_schema);
    const result: CanonicalChatRequest["responseFormat"] = {
      type: "json_schema",
      name: stringOf(spec.name) ?? "response",
      schema: isJsonObject(spec.schema) ? spec.schema : {},
    };
    if (typeof spec.strict === "boolean") result.strict = spec.strict;
    return result;
  }
  return undefined;
}
