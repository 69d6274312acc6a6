import { timingSafeEqual } from "node:crypto";
import type { SettingsStore } from "../storage/repository.ts";
import type { Logger } from "../../core/log.ts";
import { registerSecret } from "../../core/secrets.ts";

const SETTING = "admin_token_sha256";

function sha256(text: string): string {
  return new Bun.CryptoHasher("sha256").update(text).digest("hex");
}

/**
 * The hash of the admin token: from GATEWAY_ADMIN_TOKEN when set; otherwise the stored one, or a new
 * token made on the first start, printed once and kept only as its hash. The token is a secret: masked in
 * every answer and log line (core/secrets.ts), that one line excepted.
 */
export async function adminTokenHash(configured: string, store: SettingsStore, log: Logger): Promise<string> {
  if (configured) {
    registerSecret(configured);
    return sha256(configured);
  }
  const stored = await store.getSetting(SETTING);
  if (stored) return stored;
  const token = "gwadm-" + Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("hex");
  const hash = sha256(token);
  await store.setSetting(SETTING, hash);
  // The documented exception: the operator must see it once (a logger that redacts would mask it). Every later line masks it.
  const notice = "generated an admin token; it is shown only now. Set GATEWAY_ADMIN_TOKEN to choose your own.";
  if (log.reveal) log.reveal(notice, { admin_token: token });
  else log.warn(notice, { admin_token: token });
  registerSecret(token);
  return hash;
}

/** Constant-time comparison of a presented bearer token with the stored hash. */
export function adminTokenMatches(authorization: string | null, expectedHash: string): boolean {
  const match = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  if (!match) return false;
  const presented = Buffer.from(sha256(match[1]!));
  const expected = Buffer.from(expectedHash);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}
