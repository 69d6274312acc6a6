import { InvalidRequestError } from "../core/errors.ts";
import type { CacheControl } from "../core/canonical.ts";
import { isJsonObject } from "./json.ts";

/**
 * A client's `cache_control` (docs/wire-formats.md#prompt-caching): undefined when absent or null, the canonical
 * breakpoint when it is `{type: "ephemeral"}` with no ttl, "5m" or "1h" (Anthropic's only kind:
 * https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), else a 400 naming `where`. `style` words the
 * message as the client's format does (chat: `invalid request: '<path>' ...`, Messages: `<path>: ...`).
 */
export function readCacheControl(value: unknown, where: string, style: "chat" | "messages"): CacheControl | undefined {
  if (value === undefined || value === null) return undefined;
  if (isJsonObject(value) && value.type === "ephemeral") {
    const keys = Object.keys(value);
    if (keys.every((key) => key === "type" || key === "ttl")) {
      if (value.ttl === undefined) return { type: "ephemeral" };
      if (value.ttl === "5m" || value.ttl === "1h") return { type: "ephemeral", ttl: value.ttl };
    }
  }
  const problem = `must be {"type":"ephemeral"} with an optional "ttl" of "5m" or "1h" (got ${JSON.stringify(value)?.slice(0, 60)})`;
  throw new InvalidRequestError(style === "chat" ? `invalid request: '${where}' ${problem}` : `${where}: ${problem}`, { param: where });
}

