import type { CacheControl, CanonicalImagePart, CanonicalMessage, CanonicalPart, CanonicalTextPart } from "../../../core/canonical.ts";
import { toAnthropicToolId } from "../ids.ts";
import { ANTHROPIC_MESSAGES } from "../signature.ts";
import { objectOf } from "../../json.ts";

/** One Anthropic content block (shape checked by Anthropic, not here). */
export type Block = Record<string, unknown> & { type: string };
export interface AnthropicMessage {
  role: "user" | "assistant";
  content: Block[];
}

const MISSING_RESULT = "No result was provided for this tool call.";

/**
 * Canonical messages as Anthropic messages: never an empty text block (docs/wire-formats.md#anthropic-messages),
 * thinking only when it was signed by Anthropic for this very model, consecutive turns of one role merged.
 */
export function toAnthropicMessages(messages: CanonicalMessage[], upstreamModel: string): AnthropicMessage[] {
  const out: AnthropicMessage[] = [];
  for (const message of messages) {
    const content: Block[] = [];
    for (const part of message.content) {
      const block = toBlock(part, message.role, upstreamModel);
      if (!block) continue;
      if (part.type !== "reasoning" && part.cacheControl) block.cache_control = cacheControlField(part.cacheControl);
      content.push(block);
    }
    if (content.length === 0) continue;
    const last = out.at(-1);
    if (last && last.role === message.role) last.content.push(...content);
    else out.push({ role: message.role, content });
  }
  return out;
}

function toBlock(part: CanonicalPart, role: "user" | "assistant", upstreamModel: string): Block | null {
  switch (part.type) {
    case "text":
      return part.text === "" ? null : { type: "text", text: part.text };
    case "image":
      return imageBlock(part);
    case "tool_call":
      return role === "assistant" ? { type: "tool_use", id: toAnthropicToolId(part.id), name: part.name, input: parseArguments(part.arguments) } : null;
    case "tool_result":
      return toolResultBlock(part.toolCallId, part.content, part.isError);
    case "reasoning": {
      if (role !== "assistant" || part.origin?.format !== ANTHROPIC_MESSAGES || part.origin.model !== upstreamModel) return null;
      if (part.redactedData) return { type: "redacted_thinking", data: part.redactedData };
      return part.signature ? { type: "thinking", thinking: part.text, signature: part.signature } : null;
    }
  }
}

/** A canonical breakpoint as Anthropic's `cache_control` (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). */
export function cacheControlField(cacheControl: CacheControl): Record<string, unknown> {
  return cacheControl.ttl ? { type: "ephemeral", ttl: cacheControl.ttl } : { type: "ephemeral" };
}

function imageBlock(part: CanonicalImagePart): Block {
  const source = part.source;
  if (source.kind === "base64") return { type: "image", source: { type: "base64", media_type: source.mediaType, data: source.data } };
  const dataUrl = /^data:([^;,]+);base64,(.*)$/s.exec(source.url);
  if (dataUrl) return { type: "image", source: { type: "base64", media_type: dataUrl[1], data: dataUrl[2] } };
  return { type: "image", source: { type: "url", url: source.url } };
}

function toolResultBlock(id: string, content: (CanonicalTextPart | CanonicalImagePart)[], isError?: boolean): Block {
  const block: Block = { type: "tool_result", tool_use_id: toAnthropicToolId(id) };
  const blocks = content.flatMap((part): Block[] => {
    const block = part.type === "text" ? (part.text === "" ? undefined : { type: "text", text: part.text }) : imageBlock(part);
    if (block && part.cacheControl) block.cache_control = cacheControlField(part.cacheControl);
    return block ? [block] : [];
  });
  if (blocks.length > 0) block.content = blocks;
  if (isError) block.is_error = true;
  return block;
}

/** Tool arguments (JSON text) as the object Anthropic wants: "" is {}, invalid or non-object JSON is wrapped. */
export function parseArguments(text: string): Record<string, unknown> {
  if (text.trim() === "") return {};
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed;
    return { value: parsed };
  } catch {
    return { arguments: text };
  }
}

/**
 * Enforces Anthropic's pairing rules (docs/wire-formats.md#anthropic-messages): every tool_use is answered by a
 * tool_result in the next user message, tool_results come first there, and a result for a call that is not in the
 * previous turn becomes text instead of a 400.
 */
export function repairHistory(messages: AnthropicMessage[]): AnthropicMessage[] {
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index];
    if (!message) continue;
    if (message.role === "user") {
      const previous = messages[index - 1];
      const calls = new Set(previous?.role === "assistant" ? toolUseIds(previous) : []);
      message.content = message.content.map((block) => (block.type === "tool_result" && !calls.has(String(block.tool_use_id)) ? orphanAsText(block) : block));
      message.content.sort((a, b) => Number(b.type === "tool_result") - Number(a.type === "tool_result"));
      continue;
    }
    const ids = toolUseIds(message);
    if (ids.length === 0) continue;
    let next = messages[index + 1];
    if (!next) continue; // a trailing assistant turn is a prefill
    if (next.role !== "user") {
      next = { role: "user", content: [] };
      messages.splice(index + 1, 0, next);
    }
    const answered = new Set(next.content.filter((block) => block.type === "tool_result").map((block) => String(block.tool_use_id)));
    const missing = ids.filter((id) => !answered.has(id)).map((id): Block => ({ type: "tool_result", tool_use_id: id, content: MISSING_RESULT, is_error: true }));
    next.content.unshift(...missing);
  }
  return messages;
}

function toolUseIds(message: AnthropicMessage): string[] {
  return message.content.filter((block) => block.type === "tool_use").map((block) => String(block.id));
}

function orphanAsText(block: Block): Block {
  const content = block.content;
  const text = typeof content === "string" ? content : Array.isArray(content) ? content.map((inner: unknown) => (objectOf(inner).type === "text" ? objectOf(inner).text : "[image]")).join("\n") : "";
  const replaced: Block = { type: "text", text: `Result of tool call ${block.tool_use_id}${block.is_error ? " (error)" : ""}: ${text || "(empty)"}` };
  if (block.cache_control !== undefined) replaced.cache_control = block.cache_control;
  return replaced;
}

/**
 * With thinking on, the assistant turn that a tool result answers must start with a thinking block.
 * History from another model has none (foreign thinking is dropped): such a request must go without thinking.
 */
export function thinkingWouldBeRejected(messages: readonly unknown[]): boolean {
  const last = objectOf(messages.at(-1));
  if (last.role !== "user" || !Array.isArray(last.content) || !last.content.some((block: unknown) => objectOf(block).type === "tool_result")) return false;
  const previous = objectOf(messages.at(-2));
  if (previous.role !== "assistant") return false;
  const first = Array.isArray(previous.content) ? objectOf(previous.content[0]).type : "text";
  return first !== "thinking" && first !== "redacted_thinking";
}
