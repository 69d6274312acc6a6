/** API key material: generation, hashing, masking. The full key exists only in the creation answer. */

const KEY_PREFIX = "sk-gw-";
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A new key: "sk-gw-" + 40 base62 characters (~238 bits). */
export function generateApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(40));
  let body = "";
  for (const byte of bytes) body += ALPHABET[byte % 62];
  return KEY_PREFIX + body;
}

/** SHA-256 hex of a key: what the store keeps. */
export function hashApiKey(key: string): string {
  // The one-shot form: cheaper than a hasher object (docs/performance.md), and this runs on every request.
  return Bun.SHA256.hash(key, "hex");
}

/** "sk-gw-Ab3d…x9Yz": enough to recognize a key, never enough to use it. */
export function maskApiKey(key: string): string {
  return `${key.slice(0, KEY_PREFIX.length + 4)}…${key.slice(-4)}`;
}
