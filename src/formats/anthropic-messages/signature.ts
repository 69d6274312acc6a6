/**
 * Thinking signatures that did not come from Anthropic (a Gemini thoughtSignature, OpenAI encrypted
 * reasoning) reach a Messages client inside a gateway envelope: the client replays it as an opaque
 * string, the gateway reads the origin back (E.10 rule 3) and never forwards it to Anthropic, which would
 * answer "Invalid signature in thinking block" (F.27).
 */

const PREFIX = "gwsig1.";

export interface ReasoningOrigin {
  format: string;
  model: string;
}

/** The signature a Messages client sees for a foreign reasoning signature. */
export function wrapForeignSignature(signature: string, origin: ReasoningOrigin | undefined): string {
  const payload = JSON.stringify({ f: origin?.format ?? "unknown", m: origin?.model ?? "", s: signature });
  return PREFIX + Buffer.from(payload, "utf8").toString("base64url");
}

/** Whether a signature is a gateway envelope (never valid upstream at Anthropic). */
export function isWrappedSignature(signature: unknown): boolean {
  return typeof signature === "string" && signature.startsWith(PREFIX);
}

/** The foreign signature and its origin, or undefined for a signature that is not an envelope (or is damaged). */
export function unwrapForeignSignature(signature: string): { signature: string; origin: ReasoningOrigin } | undefined {
  if (!signature.startsWith(PREFIX)) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(signature.slice(PREFIX.length), "base64url").toString("utf8"));
    if (typeof payload?.s !== "string" || typeof payload.f !== "string" || typeof payload.m !== "string") return undefined;
    return { signature: payload.s, origin: { format: payload.f, model: payload.m } };
  } catch {
    return undefined;
  }
}
