/**
 * The process's secrets, and `redact`, which masks them in text that leaves the gateway: the wire formats'
 * error answers and error frames, error frames relayed from an upstream, every log line (docs/security.md).
 *
 * Two nets. The exact values registered by whoever configures them (provider keys, the admin token: see
 * PluginHost.secret). And the shapes of well-known keys, for keys this process was never told about: the
 * gateway's own client keys (`sk-gw-…`, known only as hashes), OpenAI's and Anthropic's (`sk-…`), Google's
 * (`AIza…`), xAI's, Groq's, an admin token generated at an earlier start (`gwadm-…`), any `Bearer <token>`.
 */

export const REDACTED = "[redacted]";

/** Shorter values are not registered: masking them would mask ordinary words, and no real key is that short. */
export const MIN_SECRET_LENGTH = 8;

/** Registered values, longest first (a secret that contains another is masked whole). */
const secrets: string[] = [];

interface Shape {
  /** A plain substring every match contains: the regex runs only on text that has it. */
  marker: string;
  pattern: RegExp;
  replacement: string;
}

const SHAPES: readonly Shape[] = [
  // sk-gw- (this gateway's client keys), sk-proj-, sk-ant-api03-, DeepSeek's and most compatible vendors' sk-.
  { marker: "sk-", pattern: /\bsk-[A-Za-z0-9_-]{16,}/g, replacement: REDACTED },
  { marker: "AIza", pattern: /\bAIza[A-Za-z0-9_-]{30,}/g, replacement: REDACTED },
  { marker: "xai-", pattern: /\bxai-[A-Za-z0-9]{32,}/g, replacement: REDACTED },
  { marker: "gsk_", pattern: /\bgsk_[A-Za-z0-9]{32,}/g, replacement: REDACTED },
  { marker: "gwadm-", pattern: /\bgwadm-[0-9a-f]{16,}/g, replacement: REDACTED },
  // A token after "Bearer " (the gateway's own hints, `Bearer <API_KEY>`, do not match: `<` is not a token character).
  { marker: "earer", pattern: /\b([Bb]earer\s+)[A-Za-z0-9._~+/=-]{8,}/g, replacement: `$1${REDACTED}` },
];

/** Marks a configured value secret from now on; empty, missing and short values are ignored. */
export function registerSecret(value: string | null | undefined): void {
  if (typeof value !== "string") return;
  const trimmed = value.trim();
  if (trimmed.length < MIN_SECRET_LENGTH) return;
  add(trimmed);
  // The form it takes inside a JSON string (a log line, a relayed frame), when that differs.
  const escaped = JSON.stringify(trimmed).slice(1, -1);
  if (escaped !== trimmed) add(escaped);
}

function add(value: string): void {
  if (secrets.includes(value)) return;
  secrets.push(value);
  secrets.sort((a, b) => b.length - a.length);
}

/**
 * The text with every registered secret and every well-known key shape masked. Text without one costs a
 * substring search per secret and per shape, no regex.
 */
export function redact(text: string): string {
  let out = text;
  for (let index = 0; index < secrets.length; index++) {
    const secret = secrets[index]!;
    if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
  }
  for (let index = 0; index < SHAPES.length; index++) {
    const shape = SHAPES[index]!;
    if (out.includes(shape.marker)) out = out.replace(shape.pattern, shape.replacement);
  }
  return out;
}
