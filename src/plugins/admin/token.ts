import { timingSafeEqual } from "node:crypto";
import type { Repository } from "../storage/repository.ts";
import type { Logger } from "../../core/log.ts";

const SETTING = "admin_token_sha256";

function sha256(text: string): string {
  return new Bun.CryptoHasher("sha256").update(text).digest("hex");
}

/**
 * The hash of the admin token: from GATEWAY_ADMIN_TOKEN when set; otherwise the stored one, or a new
 * token made on the first start, printed once and kept only as its hash.
 */
export async function adminTokenHash(configured: string, store: Repository, log: Logger): Promise<string> {
  if (configured) return sha256(configured);
  const stored = await store.getSetting(SETTING);
  if (stored) return stored;
  const token = "gwadm-" + Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("hex");
  const hash = sha256(token);
  await store.setSetting(SETTING, hash);
  log.warn("generated an admin token; it is shown only now. Set GATEWAY_ADMIN_TOKEN to choose your own.", { admin_token: token });
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
