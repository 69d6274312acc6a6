import type { CanonicalPart } from "../../core/canonical.ts";
import { arrayOf, objectOf, stringOf } from "../json.ts";

type ReasoningPart = Extract<CanonicalPart, { type: "reasoning" }>;

export const RESPONSES_FORMAT = "openai-responses";

/**
 * Reasoning state of another format (an Anthropic thinking signature, redacted thinking) carried through a
 * Responses client in `encrypted_content` with a gateway prefix (rule 3 of
 * docs/wire-formats.md#reasoning-and-signatures), so that Codex replays it and it goes back byte for byte to the
 * model that issued it. Anything else in
 * `encrypted_content` is OpenAI's own and stays bound to the Responses format.
 */
const PREFIX = "gwrs1.";

interface CarriedState {
  /** Origin format and model. */
  f: string;
  m: string;
  /** Signature, redacted data. */
  s?: string;
  r?: string;
}

/** The encrypted_content for a canonical reasoning part, or undefined when it carries no opaque state. */
export function encryptedContentFor(part: ReasoningPart): string | undefined {
  if (part.signature === undefined && part.redactedData === undefined) return undefined;
  const origin = part.origin ?? { format: "", model: "" };
  // OpenAI's own encrypted content goes back as it came.
  if (origin.format === RESPONSES_FORMAT && part.signature !== undefined && part.redactedData === undefined) return part.signature;
  const state: CarriedState = { f: origin.format, m: origin.model };
  if (part.signature !== undefined) state.s = part.signature;
  if (part.redactedData !== undefined) state.r = part.redactedData;
  return PREFIX + Buffer.from(JSON.stringify(state)).toString("base64url");
}

/**
 * A reasoning input item in canonical form. The gateway's own prefix restores the origin it recorded; other
 * encrypted content is OpenAI's, bound to the Responses format and to the model the client now addresses.
 */
export function reasoningPartFromItem(item: Record<string, unknown>, model: string): ReasoningPart | undefined {
  const text = reasoningText(item);
  const encrypted = typeof item.encrypted_content === "string" && item.encrypted_content !== "" ? item.encrypted_content : undefined;
  if (encrypted === undefined) return text === "" ? undefined : { type: "reasoning", text };
  const carried = encrypted.startsWith(PREFIX) ? readCarried(encrypted.slice(PREFIX.length)) : undefined;
  if (carried) {
    return {
      type: "reasoning",
      text,
      ...(carried.s !== undefined ? { signature: carried.s } : {}),
      ...(carried.r !== undefined ? { redactedData: carried.r } : {}),
      origin: { format: carried.f, model: carried.m },
    };
  }
  return { type: "reasoning", text, signature: encrypted, origin: { format: RESPONSES_FORMAT, model } };
}

/** The reasoning text of an item: its raw reasoning content when present, else its summaries, in order. */
export function reasoningText(item: Record<string, unknown>): string {
  const raw = arrayOf(item.content).map(partText).join("");
  if (raw !== "") return raw;
  return arrayOf(item.summary)
    .map(partText)
    .filter((text) => text !== "")
    .join("\n\n");
}

/** The `text` of a content or summary part; "" for any other value. */
function partText(part: unknown): string {
  return stringOf(objectOf(part).text) ?? "";
}

function readCarried(encoded: string): CarriedState | undefined {
  try {
    const state = JSON.parse(Buffer.from(encoded, "base64url").toString("utf8"));
    if (typeof state?.f === "string" && typeof state?.m === "string") return state as CarriedState;
  } catch {}
  return undefined;
}
