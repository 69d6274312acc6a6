/** Tool-call ids and arguments as chat upstreams accept them. */
import { createHash } from "node:crypto";

const VALID_CHAT_ID = /^[A-Za-z0-9_-]{1,40}$/;
const MAX_CHAT_ID = 40;
const HASH_LENGTH = 16;

/**
 * A tool-call id an OpenAI-compatible upstream accepts (`[A-Za-z0-9_-]`, at most 40 characters).
 * Valid ids pass unchanged; others are sanitised and suffixed with a hash of the original, so the
 * mapping is deterministic and stable across turns (history is replayed every turn) and distinct ids
 * stay distinct. A call and its result go through the same function and keep their pairing.
 */
export function toChatToolId(id: string): string {
  if (VALID_CHAT_ID.test(id)) return id;
  const hash = createHash("sha256").update(id).digest("hex").slice(0, HASH_LENGTH);
  const prefix = id.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, MAX_CHAT_ID - HASH_LENGTH - 1) || "call";
  return `${prefix}_${hash}`;
}

/** Tool arguments as JSON text: an absent or empty argument string is the empty object. */
export function argumentsText(value: unknown): string {
  if (typeof value === "string") return value.trim() === "" ? "{}" : value;
  if (value !== null && typeof value === "object") return JSON.stringify(value);
  return "{}";
}
