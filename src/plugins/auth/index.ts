import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { AuthenticationError, GatewayError, PermissionError, UnavailableError } from "../../core/errors.ts";
import type { ApiKey, KeyStore } from "../storage/repository.ts";
import type { GatewayContext } from "../../core/context.ts";
import type { AuthService, Principal } from "./principal.ts";
import { hashApiKey } from "./keys.ts";

/** What a worker tells the others (through the primary) when a key changed (deleted, blocked): its hash, to drop from their caches. */
const FORGET_TOPIC = "auth.forget";
const FORGET_WAIT_MS = 1_000;

/** Verifies the caller's key (Bearer or x-api-key) against hashed keys, with a cache. */
export default definePlugin({
  name: "auth",
  requires: ["storage"],
  configSchema: Type.Object({
    /** How long a key stays cached: a revocation reaches every other instance within this time. */
    cache_ttl_ms: Type.Integer({ minimum: 0, default: 1_000 }),
  }),
  primary(_config, host) {
    host.serve(FORGET_TOPIC, async (keyHash) => void (await host.askAll(FORGET_TOPIC, keyHash, FORGET_WAIT_MS)));
    return {};
  },
  setup(config, host) {
    const store: KeyStore = host.service("storage"); // the slices of the store it uses
    const cache = new Map<string, { key: ApiKey; until: number }>();

    /** A cached key answers synchronously (the hot path); a miss reads the store. */
    function lookup(hash: string): ApiKey | Promise<ApiKey | null> {
      const cached = cache.get(hash);
      if (cached && cached.until > Date.now()) return cached.key;
      return load(hash);
    }

    async function load(hash: string): Promise<ApiKey | null> {
      const now = Date.now();
      let key: ApiKey | null;
      try {
        key = await store.findKeyByHash(hash);
      } catch (error) {
        // The store's own UnavailableError too: the client learns what is down and when to retry.
        if (error instanceof GatewayError && !(error instanceof UnavailableError)) throw error;
        throw new UnavailableError("the key store is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause: error });
      }
      if (key && key.deletedAt === null) cache.set(hash, { key, until: now + config.cache_ttl_ms });
      else cache.delete(hash);
      return key;
    }

    const auth: AuthService = {
      authenticate(headers: Headers): Principal | Promise<Principal> {
        const presented = presentedKey(headers);
        if (!presented) {
          throw new AuthenticationError("missing API key: send `Authorization: Bearer <API_KEY>` or `x-api-key: <API_KEY>`");
        }
        const key = lookup(hashApiKey(presented));
        return key instanceof Promise ? key.then(admit) : admit(key);
      },
      async forget(keyHash: string) {
        cache.delete(keyHash);
        // The other workers of this port drop it before the revocation is answered: refused everywhere at once.
        await host.workers?.call(FORGET_TOPIC, keyHash, FORGET_WAIT_MS).catch((error) => host.log.warn("a worker did not confirm a revoked key; its cache drops it within cache_ttl_ms", { error: String(error) }));
      },
    };
    host.workers?.answer(FORGET_TOPIC, (keyHash) => void cache.delete(keyHash as string));

    return {
      provides: auth,
      // From the headers alone: a caller without a valid key is refused before its body is read.
      onHeaders(ctx) {
        const principal = auth.authenticate(ctx.headers);
        if (principal instanceof Promise) return principal.then((found) => identify(ctx, found));
        identify(ctx, principal);
      },
    };
  },
});

/** The caller of a known key, or the 401/403 that says why not. */
function admit(key: ApiKey | null): Principal {
  if (!key) throw new AuthenticationError("invalid API key");
  if (key.deletedAt !== null) throw new AuthenticationError("this API key was deleted");
  if (key.expiresAt !== null && key.expiresAt <= Date.now()) throw new AuthenticationError("this API key has expired");
  if (key.blocked) throw new PermissionError("this API key is blocked");
  // A payment dispute blocks the whole account until an operator clears it (POST /admin/v1/accounts/:id/unblock).
  if (key.accountBlockedReason) throw new PermissionError(`this account is blocked: ${key.accountBlockedReason}; contact the operator`);
  return { accountId: key.accountId, key };
}

function identify(ctx: GatewayContext, principal: Principal): void {
  ctx.principal = principal;
  ctx.log.key_id = principal.key.id;
  ctx.log.account_id = principal.accountId;
}

/** The key from `Authorization: Bearer` or `x-api-key`. */
function presentedKey(headers: Headers): string | null {
  const authorization = headers.get("authorization");
  if (authorization) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) return match[1]!;
  }
  const apiKey = headers.get("x-api-key");
  return apiKey ? apiKey.trim() || null : null;
}
