import { isJsonObject } from "../json.ts";

/**
 * A relayed chat body without `cache_control` (docs/wire-formats.md#prompt-caching), for an upstream that takes no
 * breakpoints: OpenAI answers 400 to unknown part fields. Removed from every message, content part and tool
 * (and tool function), copy on write: the client's own objects are never changed (a fallback to another provider
 * translates them again, breakpoints included). Only `body.messages` and `body.tools` are walked, and nothing is
 * copied when no breakpoint is found.
 */
export function stripCacheControl(body: Record<string, unknown>): void {
  if (Array.isArray(body.messages)) {
    const messages = mapChanged(body.messages, stripMessage);
    if (messages) body.messages = messages;
  }
  if (Array.isArray(body.tools)) {
    const tools = mapChanged(body.tools, stripTool);
    if (tools) body.tools = tools;
  }
}

function stripMessage(message: unknown): unknown {
  if (!isJsonObject(message)) return message;
  const content = Array.isArray(message.content) ? mapChanged(message.content, withoutField) : undefined;
  if (content === undefined && !("cache_control" in message)) return message;
  const { cache_control: _dropped, ...rest } = message;
  return content ? { ...rest, content } : rest;
}

function stripTool(tool: unknown): unknown {
  if (!isJsonObject(tool)) return tool;
  const fn = withoutField(tool.function);
  if (fn === tool.function && !("cache_control" in tool)) return tool;
  const { cache_control: _dropped, ...rest } = tool;
  return fn === tool.function ? rest : { ...rest, function: fn };
}

/** The object without its `cache_control` (the same object when it has none). */
function withoutField(value: unknown): unknown {
  if (!isJsonObject(value) || !("cache_control" in value)) return value;
  const { cache_control: _dropped, ...rest } = value;
  return rest;
}

/** The array mapped, or undefined when no item changed. */
function mapChanged(list: readonly unknown[], map: (item: unknown) => unknown): unknown[] | undefined {
  let out: unknown[] | undefined;
  for (let index = 0; index < list.length; index++) {
    const item = list[index];
    const mapped = map(item);
    if (mapped !== item) {
      out ??= list.slice(0, index);
      out.push(mapped);
    } else if (out) out.push(item);
  }
  return out;
}
