import { createHash } from "node:crypto";

/**
 * Tool-call ids for calls Gemini made, carrying what the next turn must send back
 * (docs/wire-formats.md#reasoning-and-signatures, rule 3): Gemini's own functionCall id (when it gave one) and the
 * part's thoughtSignature, tagged with the model that issued it. Chat, Messages and Responses clients all echo
 * tool-call ids verbatim, so the id is the one carrier every client format keeps. Stateless and deterministic both
 * ways.
 *
 *   call_<core>[_<tag><mode><signature>]
 *
 * - core: `h` + 16 hex (a hash: Gemini gave no id) or `x` + hex of Gemini's id; never contains `_`.
 * - tag: 8 hex of sha256(model): the signature is replayed only to that model.
 * - mode `b`: a padded standard-base64 signature in base64url letters (padding dropped, restored on decode);
 *   mode `u`: any other string, base64url of its UTF-8 bytes. Both round-trip byte for byte.
 * Only `[A-Za-z0-9_-]` is used, so the id is valid for Messages clients too.
 */

const PREFIX = "call_";
const HASH_CORE = /^h[0-9a-f]{16}$/;
const GEMINI_ID_CORE = /^x(?:[0-9a-f]{2})+$/;
const STANDARD_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const TAG_LENGTH = 8;

export interface GeminiCallState {
  /** Gemini's functionCall.id, when it sent one (echoed in functionCall.id and functionResponse.id). */
  geminiId?: string;
  /** The part's thoughtSignature and the tag of the model that issued it. */
  signature?: { value: string; modelTag: string };
}

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A model name as compared for signature replay ("models/x" and "x" are the same model). */
export function normalizeModel(model: string): string {
  return model.startsWith("models/") ? model.slice("models/".length) : model;
}

/** The short tag of a model that ids carry next to a signature. */
export function modelTag(model: string): string {
  return sha256Hex(normalizeModel(model)).slice(0, TAG_LENGTH);
}

/**
 * The client-facing id of one Gemini functionCall. `seed` makes a synthesized id unique and stable
 * (response id, call ordinal, name, arguments); `model` is the model that issued the signature.
 */
export function encodeGeminiCallId(call: { geminiId?: string; signature?: string; model: string; seed: string }): string {
  const core = call.geminiId ? "x" + Buffer.from(call.geminiId, "utf8").toString("hex") : "h" + sha256Hex(call.seed).slice(0, 16);
  if (call.signature === undefined || call.signature === "") return PREFIX + core;
  return `${PREFIX}${core}_${modelTag(call.model)}${encodeSignature(call.signature)}`;
}

/** What an id minted by encodeGeminiCallId carries; null for ids from anywhere else. */
export function decodeGeminiCallId(id: string): GeminiCallState | null {
  if (!id.startsWith(PREFIX)) return null;
  const rest = id.slice(PREFIX.length);
  const separator = rest.indexOf("_");
  const core = separator === -1 ? rest : rest.slice(0, separator);
  const state: GeminiCallState = {};
  if (GEMINI_ID_CORE.test(core)) state.geminiId = Buffer.from(core.slice(1), "hex").toString("utf8");
  else if (!HASH_CORE.test(core)) return null;
  if (separator === -1) return state;
  const tail = rest.slice(separator + 1);
  const tag = tail.slice(0, TAG_LENGTH);
  const value = decodeSignature(tail.slice(TAG_LENGTH));
  if (!/^[0-9a-f]{8}$/.test(tag) || value === null) return null;
  state.signature = { value, modelTag: tag };
  return state;
}

function encodeSignature(signature: string): string {
  if (signature.length % 4 === 0 && STANDARD_BASE64.test(signature)) {
    return "b" + signature.replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  }
  return "u" + Buffer.from(signature, "utf8").toString("base64url");
}

function decodeSignature(encoded: string): string | null {
  const mode = encoded[0];
  const body = encoded.slice(1);
  if (!/^[A-Za-z0-9_-]*$/.test(body)) return null;
  if (mode === "b") {
    const standard = body.replaceAll("-", "+").replaceAll("_", "/");
    return standard + "=".repeat((4 - (standard.length % 4)) % 4);
  }
  if (mode === "u") return Buffer.from(body, "base64url").toString("utf8");
  return null;
}
