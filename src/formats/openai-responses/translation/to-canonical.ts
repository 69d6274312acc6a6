import { InvalidRequestError } from "../../../core/errors.ts";
import type { CanonicalChatRequest, CanonicalImagePart, CanonicalMessage, CanonicalPart, CanonicalTextPart } from "../../../core/canonical.ts";
import { reasoningPartFromItem } from "../reasoning-state.ts";
import { canonicalToolName, toolChoiceToCanonical, toolsToCanonical, wrapCustomInput } from "../tools.ts";
import type { ResponsesRequest } from "../request.ts";
import { arrayOf, isJsonObject, objectOf, stringOf, type JsonObject } from "../../json.ts";

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s;

/**
 * A Responses body in canonical form (docs/wire-formats.md#responses-requests). `instructions` and system/developer
 * messages are hoisted into `system`, in order. Consecutive assistant-side items (reasoning, assistant
 * messages, function and custom tool calls) form one assistant message; consecutive tool outputs one
 * user message of tool results. Encrypted reasoning keeps its origin, so only its issuer gets it back.
 */
export function responsesToCanonical(body: Record<string, unknown>): CanonicalChatRequest {
  const request = body as ResponsesRequest & JsonObject;
  const model = String(request.model);
  const system: string[] = [];
  if (typeof request.instructions === "string" && request.instructions !== "") system.push(request.instructions);
  const messages: CanonicalMessage[] = [];
  const items: readonly JsonObject[] = typeof request.input === "string" ? [{ role: "user", content: request.input }] : request.input;
  items.forEach((item, index) => readItem(item, `input.${index}`, model, system, messages));

  const canonical: CanonicalChatRequest = { model, messages, stream: request.stream === true };
  if (system.length > 0) canonical.system = system.join("\n\n");
  const tools = toolsToCanonical(request);
  if (tools.length > 0) {
    canonical.tools = tools;
    const choice = toolChoiceToCanonical(request.tool_choice);
    if (choice) canonical.toolChoice = choice;
    if (typeof request.parallel_tool_calls === "boolean") canonical.parallelToolCalls = request.parallel_tool_calls;
  }
  if (typeof request.max_output_tokens === "number") canonical.maxOutputTokens = request.max_output_tokens;
  if (typeof request.temperature === "number") canonical.temperature = request.temperature;
  if (typeof request.top_p === "number") canonical.topP = request.top_p;
  const format = objectOf(request.text?.format);
  if (format.type === "json_object") canonical.responseFormat = { type: "json_object" };
  else if (format.type === "json_schema") {
    canonical.responseFormat = {
      type: "json_schema",
      name: stringOf(format.name) ?? "output",
      schema: isJsonObject(format.schema) ? format.schema : {},
      ...(typeof format.strict === "boolean" ? { strict: format.strict } : {}),
    };
  }
  const effort = request.reasoning?.effort;
  if (typeof effort === "string") canonical.reasoning = { effort };
  const user = request.safety_identifier ?? request.user;
  if (typeof user === "string" && user !== "") canonical.user = user;
  return canonical;
}

/** One input item, its fields checked per type by decodeResponsesRequest (ITEM_SCHEMAS in request.ts). */
function readItem(item: JsonObject, where: string, model: string, system: string[], messages: CanonicalMessage[]): void {
  const type = item.type ?? "message";
  switch (type) {
    case "message":
      if (item.role === "system" || item.role === "developer") {
        const text = messageText(item.content, `${where}.content`);
        if (text !== "") system.push(text);
      } else if (item.role === "assistant") {
        const text = messageText(item.content, `${where}.content`);
        if (text !== "") assistant(messages).push({ type: "text", text });
      } else {
        const content = userContent(item.content, `${where}.content`);
        if (content.length > 0) messages.push({ role: "user", content });
      }
      return;
    case "reasoning": {
      const part = reasoningPartFromItem(item, model);
      if (part) assistant(messages).push(part);
      return;
    }
    case "function_call":
    case "function_call": {
      const args = checked(item.arguments);
      assistant(messages).push({
        type: "tool_call",
        id: checked(item.call_id),
        name: canonicalToolName(checked(item.name), item.namespace),
        arguments: args.trim() === "" ? "{}" : args,
      });
      return;
    }
    case "custom_tool_call":
      assistant(messages).push({
        type: "tool_call",
        id: checked(item.call_id),
        name: canonicalToolName(checked(item.name), item.namespace),
        arguments: wrapCustomInput(item.input),
      });
      return;
    case "function_call_output":
    case "custom_tool_call_output":
      toolResults(messages).push({ type: "tool_result", toolCallId: checked(item.call_id), content: outputContent(item.output, `${where}.output`) });
      return;
    case "additional_tools":
      return; // its tools are read with the top-level ones (toolsToCanonical)
    case "item_reference":
      throw new InvalidRequestError(`invalid request: '${where}' is an item_reference; this gateway does not store items, send the item itself`, {
        param: where,
      });
    default:
      throw new InvalidRequestError(
        `invalid request: '${where}' is a "${type}" item, which only OpenAI's own tools produce; model "${model}" cannot take it`,
        { param: `${where}.type` },
      );
  }
}

/** A string field of an item that decodeResponsesRequest checked ("" for a caller that skipped the decode). */
function checked(value: unknown): string {
  return stringOf(value) ?? "";
}

/** The assistant message the next assistant-side item joins (a new one unless the last message is one). */
function assistant(messages: CanonicalMessage[]): CanonicalPart[] {
  const last = messages.at(-1);
  if (last?.role === "assistant") return last.content;
  const message: CanonicalMessage = { role: "assistant", content: [] };
  messages.push(message);
  return message.content;
}

/** The user message of tool results the next output joins (a new one unless the last message is one). */
function toolResults(messages: CanonicalMessage[]): CanonicalPart[] {
  const last = messages.at(-1);
  if (last?.role === "user" && last.content.every((part) => part.type === "tool_result")) return last.content;
  const message: CanonicalMessage = { role: "user", content: [] };
  messages.push(message);
  return message.content;
}

/** Text of a system, developer or assistant message: a string, or its text parts joined. */
function messageText(content: unknown, where: string): string {
  if (typeof content === "string") return content;
  return arrayOf(content)
    .map((item, index) => {
      const part = objectOf(item);
      if (typeof part.text === "string" && (part.type === "input_text" || part.type === "output_text" || part.type === "text")) return part.text;
      if (part.type === "refusal" && typeof part.refusal === "string") return part.refusal;
      throw unsupportedPart(part.type, `${where}.${index}`);
    })
    .join("");
}

function userContent(content: unknown, where: string): (CanonicalTextPart | CanonicalImagePart)[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  return arrayOf(content).flatMap((item, index): (CanonicalTextPart | CanonicalImagePart)[] => {
    const part = objectOf(item);
    if (typeof part.text === "string" && (part.type === "input_text" || part.type === "output_text" || part.type === "text")) {
      return part.text === "" ? [] : [{ type: "text", text: part.text }];
    }
    if (part.type === "input_image") return [image(part, `${where}.${index}`)];
    throw unsupportedPart(part.type, `${where}.${index}`);
  });
}

/** A tool output: a string, or input_text / input_image items. */
function outputContent(output: unknown, where: string): (CanonicalTextPart | CanonicalImagePart)[] {
  if (typeof output === "string") return [{ type: "text", text: output }];
  return userContent(output, where);
}

function image(part: JsonObject, where: string): CanonicalImagePart {
  const url = part.image_url;
  if (typeof url !== "string" || url === "") {
    throw new InvalidRequestError(`invalid request: '${where}' needs an image_url (uploaded file ids are not supported by this gateway)`, {
      param: `${where}.image_url`,
    });
  }
  if (!url.startsWith("data:")) return { type: "image", source: { kind: "url", url } };
  const [, mediaType, data] = DATA_URL.exec(url) ?? [];
  if (mediaType === undefined || data === undefined) {
    throw new InvalidRequestError(`invalid request: '${where}.image_url' is a data URL without base64 data`, { param: `${where}.image_url` });
  }
  return { type: "image", source: { kind: "base64", mediaType, data } };
}

function unsupportedPart(type: unknown, where: string): InvalidRequestError {
  return new InvalidRequestError(`invalid request: '${where}' is a ${JSON.stringify(type)} part, which this model cannot take (text and images can)`, {
    param: `${where}.type`,
  });
}
