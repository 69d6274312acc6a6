/**
 * Tool-call ids across formats. Anthropic requires `^[a-zA-Z0-9_-]+$` (docs/wire-formats.md#tool-call-ids); other
 * upstreams use ids like `Bash:0` or carry provider state in them. The mapping is deterministic both ways because
 * history is replayed on every turn: a valid id goes through untouched, any other is written as a prefix plus its
 * base64url (whose alphabet is exactly Anthropic's), so the original comes back byte for byte.
 */

const VALID = /^[A-Za-z0-9_-]+$/;
const PREFIX = "toolu_gw_";

/** An id Anthropic accepts, for any upstream or client id. */
export function toAnthropicToolId(id: string): string {
  if (VALID.test(id) && !id.startsWith(PREFIX)) return id;
  return PREFIX + Buffer.from(id, "utf8").toString("base64url");
}

/** The original id behind `toAnthropicToolId` (any other id is returned as is). */
export function fromAnthropicToolId(id: string): string {
  if (!id.startsWith(PREFIX)) return id;
  const decoded = Buffer.from(id.slice(PREFIX.length), "base64url").toString("utf8");
  return toAnthropicToolId(decoded) === id ? decoded : id;
}
