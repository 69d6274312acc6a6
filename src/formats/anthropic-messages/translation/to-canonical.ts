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
import { fromAnthropicToolId } from "../ids.ts";
import { ANTHROPIC_MESSAGES, unwrapForeignSignature } from "../signature.ts";
import type { MessagesRequest } from "../request.ts";
import { arrayOf, isJsonObject, objectOf, stringOf, type JsonObject } from "../../json.ts";
import { readCacheControl } from "../../cache-control.ts";

type SystemPart = NonNullable<CanonicalChatRequest["systemParts"]>[number];

/** A Messages client's body (already validated by decodeRequest) in canonical form, for a non-Anthropic upstream. */
export function messagesToCanonical(body: Record<string, unknown>): CanonicalChatRequest {
  const request = body as MessagesRequest;
  const messages: CanonicalMessage[] = [];
  const systemTexts: string[] = [];
  const systemBlocks: SystemPart[] = [];
  const topSystem = systemText(request.system);
  if (topSystem) systemTexts.push(topSystem);
  systemBlocks.push(...systemPieces(request.system, "system"));
  request.messages.forEach(({ role, content }, index) => {
    if (role === "system") {
      // A mid-conversation system message: hoisted after the system prompt, in order, as for Chat.
      const text = systemText(content);
      if (text) systemTexts.push(text);
      systemBlocks.push(...systemPieces(content, `messages.${index}.content`));
    } else messages.push(toMessage(role, content, index, request.model));
  });
  const canonical: CanonicalChatRequest = {
    model: request.model,
    messages,
    maxOutputTokens: request.max_tokens,
    stream: request.stream === true,
  };
  if (systemTexts.length > 0) canonical.system = systemTexts.join("\n\n");
  if (systemBlocks.some((part) => part.cacheControl)) canonical.systemParts = systemBlocks;
  if (request.tools?.length) canonical.tools = request.tools.map(toTool);
  const choice: JsonObject | undefined = request.tool_choice;
  if (choice) {
    canonical.toolChoice = toToolChoice(choice);
    if (choice.disable_parallel_tool_use === true) canonical.parallelToolCalls = false;
  }
  if (typeof request.temperature === "number") canonical.temperature = request.temperature;
  if (typeof request.top_p === "number") canonical.topP = request.top_p;
  if (typeof request.top_k === "number") canonical.topK = request.top_k;
  if (request.stop_sequences?.length) canonical.stop = [...request.stop_sequences];
  const reasoning = toReasoning(request.thinking, request.output_config);
  if (reasoning) canonical.reasoning = reasoning;
  const format = objectOf(objectOf(request.output_config).format);
  if (format.type === "json_schema" && isJsonObject(format.schema)) {
    canonical.responseFormat = { type: "json_schema", name: stringOf(format.name) ?? "output", schema: format.schema };
  }
  const user = objectOf(request.metadata).user_id;
  if (typeof user === "string" && user !== "") canonical.user = user;
  return canonical;
}

type MessageContent = MessagesRequest["messages"][number]["content"];

/**
 * System text blocks (of the system prompt or of a system message), joined in order
 * (docs/wire-formats.md#roles-and-system-prompt).
 */
function systemText(system: MessagesRequest["system"] | MessageContent): string | undefined {
  if (system === undefined) return undefined;
  if (typeof system === "string") return system || undefined;
  const blocks: readonly JsonObject[] = system;
  const text = blocks.map((block) => stringOf(block.text) ?? "").filter((part) => part !== "").join("\n\n");
  return text || undefined;
}

/** System text blocks with their breakpoints (docs/wire-formats.md#prompt-caching); empty ones dropped. */
function systemPieces(system: MessagesRequest["system"] | MessageContent, where: string): SystemPart[] {
  if (system === undefined || typeof system === "string") return system ? [{ text: system }] : [];
  const blocks: readonly JsonObject[] = system;
  const pieces: SystemPart[] = [];
  blocks.forEach((block, index) => {
    const cacheControl = readCacheControl(block.cache_control, `${where}.${index}.cache_control`, "messages");
    const text = stringOf(block.text) ?? "";
    if (text !== "") pieces.push(cacheControl ? { text, cacheControl } : { text });
  });
  return pieces;
}

function toMessage(role: "user" | "assistant", content: MessageContent, index: number, model: string): CanonicalMessage {
  if (typeof content === "string") return { role, content: content === "" ? [] : [{ type: "text", text: content }] };
  const parts: CanonicalPart[] = [];
  content.forEach((block, blockIndex) => {
    const part = toPart(block, `messages.${index}.content.${blockIndex}`, model);
    if (part) parts.push(part);
  });
  return { role, content: parts };
}

/** One content block with its breakpoint; null for blocks with no canonical form that the model can do without. */
function toPart(block: JsonObject, param: string, model: string): CanonicalPart | null {
  const part = toBarePart(block, param, model);
  const cacheControl = readCacheControl(block.cache_control, `${param}.cache_control`, "messages");
  if (part && cacheControl && part.type !== "reasoning") part.cacheControl = cacheControl;
  return part;
}

function toBarePart(block: JsonObject, param: string, model: string): CanonicalPart | null {
  switch (block.type) {
    case "text":
      return typeof block.text === "string" && block.text !== "" ? { type: "text", text: block.text } : null;
    case "image":
      return toImage(block, param);
    case "document":
      return toDocument(block, param);
    case "tool_use":
      return {
        type: "tool_call",
        id: fromAnthropicToolId(String(block.id ?? "")),
        name: String(block.name ?? ""),
        arguments: JSON.stringify(typeof block.input === "object" && block.input !== null ? block.input : {}),
      };
    case "tool_result":
      return {
        type: "tool_result",
        toolCallId: fromAnthropicToolId(String(block.tool_use_id ?? "")),
        content: toolResultContent(block.content, param),
        ...(block.is_error === true ? { isError: true } : {}),
      };
    case "thinking":
      return thinkingPart(block, model);
    case "redacted_thinking":
      return typeof block.data === "string" ? { type: "reasoning", text: "", redactedData: block.data, origin: { format: ANTHROPIC_MESSAGES, model } } : null;
    default:
      // Server-tool blocks (server_tool_use, web_search_tool_result ...) only mean something to Anthropic.
      return null;
  }
}

/** A thinking block: a gateway envelope names the provider that signed it; any other signature is Anthropic's. */
function thinkingPart(block: JsonObject, model: string): CanonicalPart {
  const text = typeof block.thinking === "string" ? block.thinking : "";
  const signature = typeof block.signature === "string" && block.signature !== "" ? block.signature : undefined;
  if (!signature) return { type: "reasoning", text };
  const foreign = unwrapForeignSignature(signature);
  if (foreign) return { type: "reasoning", text, ...(foreign.signature !== undefined ? { signature: foreign.signature } : {}), origin: foreign.origin };
  return { type: "reasoning", text, signature, origin: { format: ANTHROPIC_MESSAGES, model } };
}

function toImage(block: JsonObject, param: string): CanonicalImagePart {
  const source = objectOf(block.source);
  if (source.type === "base64" && typeof source.data === "string") {
    return { type: "image", source: { kind: "base64", mediaType: String(source.media_type ?? "image/png"), data: source.data } };
  }
  if (source.type === "url" && typeof source.url === "string") return { type: "image", source: { kind: "url", url: source.url } };
  throw new InvalidRequestError(`${param}.source: image source type "${source.type}" is only available on Anthropic models; send base64 or url`, {
    param: `${param}.source`,
  });
}

/** Plain-text documents become text; PDFs and files only exist for Anthropic models. */
function toDocument(block: JsonObject, param: string): CanonicalTextPart {
  const source = objectOf(block.source);
  if (source.type === "text" && typeof source.data === "string") {
    const title = typeof block.title === "string" && block.title !== "" ? `${block.title}\n\n` : "";
    return { type: "text", text: title + source.data };
  }
  throw new InvalidRequestError(`${param}: document blocks of source type "${source.type}" are only available on Anthropic models`, { param });
}

function toolResultContent(content: unknown, param: string): (CanonicalTextPart | CanonicalImagePart)[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  if (!Array.isArray(content)) return [];
  const parts: (CanonicalTextPart | CanonicalImagePart)[] = [];
  content.forEach((item: unknown, index) => {
    const block = objectOf(item);
    const at = `${param}.content.${index}`;
    const cacheControl = readCacheControl(block.cache_control, `${at}.cache_control`, "messages");
    const marked = <T extends CanonicalTextPart | CanonicalImagePart>(part: T): T => (cacheControl ? { ...part, cacheControl } : part);
    if (block.type === "text" && typeof block.text === "string" && block.text !== "") parts.push(marked({ type: "text", text: block.text }));
    else if (block.type === "image") parts.push(marked(toImage(block, at)));
    else if (block.type === "document") parts.push(marked(toDocument(block, at)));
    else if (block.type === "search_result" && Array.isArray(block.content)) {
      const text = arrayOf(block.content).map((inner) => stringOf(objectOf(inner).text) ?? "").join("\n");
      if (text) parts.push({ type: "text", text });
    }
  });
  return parts;
}

function toTool(tool: NonNullable<MessagesRequest["tools"]>[number] & JsonObject, index: number): CanonicalTool {
  if (typeof tool.type === "string" && tool.type !== "custom" && tool.input_schema === undefined) {
    throw new InvalidRequestError(`tools.${index}: the server tool "${tool.type}" is only available on Anthropic models`, { param: `tools.${index}` });
  }
  const parameters: JsonObject = isJsonObject(tool.input_schema) ? tool.input_schema : { type: "object", properties: {} };
  const canonical: CanonicalTool = { name: tool.name, parameters };
  if (typeof tool.description === "string") canonical.description = tool.description;
  if (tool.strict === true) canonical.strict = true;
  const cacheControl = readCacheControl(tool.cache_control, `tools.${index}.cache_control`, "messages");
  if (cacheControl) canonical.cacheControl = cacheControl;
  return canonical;
}

function toToolChoice(choice: JsonObject): CanonicalToolChoice {
  switch (choice.type) {
    case "any":
      return { type: "required" };
    case "none":
      return { type: "none" };
    case "tool":
      if (typeof choice.name !== "string" || choice.name === "") {
        throw new InvalidRequestError("tool_choice.name: Field required", { param: "tool_choice.name" });
      }
      return { type: "tool", name: choice.name };
    default:
      return { type: "auto" };
  }
}

/** thinking {enabled, budget_tokens} -> a budget; adaptive thinking or output_config.effort -> an effort. */
function toReasoning(thinking: JsonObject | undefined, outputConfig: JsonObject | undefined): CanonicalChatRequest["reasoning"] {
  const effort = typeof outputConfig?.effort === "string" ? outputConfig.effort : undefined;
  if (thinking?.type === "disabled") return undefined;
  if (thinking?.type === "enabled" && typeof thinking.budget_tokens === "number") {
    return effort ? { budgetTokens: thinking.budget_tokens, effort } : { budgetTokens: thinking.budget_tokens };
  }
  if (thinking?.type === "adaptive") return { effort: effort ?? "medium" };
  return effort ? { effort } : undefined;
}
