import type { ApiKey } from "../storage/repository.ts";

/** The caller, once its key is verified. */
export interface Principal {
  accountId: string;
  key: ApiKey;
}

/** What the auth plugin offers other plugins (`host.service("auth")`). */
export interface AuthService {
  /** Verifies `Authorization: Bearer` or `x-api-key`; throws AuthenticationError (401). */
  authenticate(headers: Headers): Principal | Promise<Principal>;
  /**
   * Drops a key from the cache so its next use re-reads the store (revocation). With several workers it resolves
   * once every worker has dropped it too (or after 1 s, when their cache has expired it anyway).
   */
  forget(keyHash: string): Promise<void>;
}

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** Writer: auth. */
    principal?: Principal;
  }
}

declare module "../../core/plugin.ts" {
  interface Services {
    auth: AuthService;
  }
}
