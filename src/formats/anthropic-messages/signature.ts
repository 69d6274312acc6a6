/**
 * Reasoning that did not come from Anthropic reaches a Messages client as a thinking block whose signature
 * is a gateway envelope (docs/wire-formats.md#reasoning-and-signatures, rule 3): it records the origin (format,
 * model) and the upstream's own opaque state when there was one (a Gemini thoughtSignature, OpenAI encrypted
 * reasoning). The client replays it as an opaque string; the gateway reads it back, so the reasoning text can go back
 * to its issuer (DeepSeek needs its reasoning_content in tool loops) and the state only to its issuer,
 * and never forwards an envelope to Anthropic, which would answer "Invalid signature in thinking block".
 */

/** The format's name: reasoning Anthropic signed carries it in its origin. */
export const ANTHROPIC_MESSAGES = "anthropic-messages";

const PREFIX = "gwsig1.";

export interface ReasoningOrigin {
  format: string;
  model: string;
}

/** The signature a Messages client sees for reasoning from another provider (signed or not). */
export function wrapForeignSignature(signature: string | undefined, origin: ReasoningOrigin | undefined): string {
  const payload: { f: string; m: string; s?: string } = { f: origin?.format || "unknown", m: origin?.model ?? "" };
  if (signature !== undefined && signature !== "") payload.s = signature;
  return PREFIX + Buffer.from(JSON.stringify(payload), "utf8").toString("base64url");
}

/** Whether a signature is a gateway envelope (never valid at Anthropic). */
export function isWrappedSignature(signature: unknown): boolean {
  return typeof signature === "string" && signature.startsWith(PREFIX);
}

/** The origin and the foreign state of an envelope; undefined for any other signature (or a damaged envelope). */
export function unwrapForeignSignature(signature: string): { signature?: string; origin: ReasoningOrigin } | undefined {
  if (!signature.startsWith(PREFIX)) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(signature.slice(PREFIX.length), "base64url").toString("utf8"));
    if (typeof payload?.f !== "string" || typeof payload.m !== "string") return undefined;
    const origin = { format: payload.f, model: payload.m };
    return typeof payload.s === "string" ? { signature: payload.s, origin } : { origin };
  } catch {
    return undefined;
  }
}
