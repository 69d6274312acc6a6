import type { Logger } from "../../core/log.ts";
import type { RouteAnswer } from "../../core/plugin.ts";

/** What an admin call acted on, as its audit line names it. Ids and references only: never a key, a token or a hash. */
export interface AuditTargets {
  account_id?: string;
  key_id?: string;
  /** A dashboard user the call made: its id only, never its password or its hash. */
  user_id?: string;
  /** A credit's idempotency reference (a payment id), and the ledger entry it made or found. */
  reference?: string;
  entry_id?: string;
}

/** The action of each admin route, by "METHOD /route/pattern"; a route not named here gets `<last word>.<method>`. */
const ACTIONS: Readonly<Record<string, string>> = {
  "GET /admin/v1/accounts": "account.list",
  "POST /admin/v1/accounts": "account.create",
  "GET /admin/v1/accounts/:id": "account.show",
  "POST /admin/v1/accounts/:id/credits": "credit.create",
  "GET /admin/v1/accounts/:id/keys": "key.list",
  "POST /admin/v1/accounts/:id/keys": "key.create",
  "DELETE /admin/v1/keys/:id": "key.delete",
  "GET /admin/v1/accounts/:id/requests": "request.list",
  "POST /admin/v1/accounts/:id/users": "user.create",
  "GET /admin/v1/accounts/:id/users": "user.list",
  // The budget plugin's admin routes, under the same token.
  "GET /admin/v1/plans": "plan.list",
  "POST /admin/v1/accounts/:id/plan": "plan.purchase",
  "GET /admin/v1/accounts/:id/funds": "funds.show",
};

/**
 * One audit line per admin call (`log.audit`, message "audit"): who (the admin, by a fingerprint of its token,
 * or "anonymous"), what (method, route pattern, action), on what (ids, a credit's reference) and the
 * answer's status. Written when the answer is made, errors included.
 */
export function createAudit(log: Logger, tokenHash: string) {
  // Eight hex digits of the token's SHA-256: tells a token change apart in the log, reveals nothing of it.
  const fingerprint = "sha256:" + tokenHash.slice(0, 8);
  const noted = new WeakMap<Request, AuditTargets>();

  function write(request: Request, authenticated: boolean, fields: Record<string, unknown>) {
    const who = authenticated ? { actor: "admin", actor_fingerprint: fingerprint } : { actor: "anonymous" };
    const line = { ...who, method: request.method, ...fields };
    if (log.audit) log.audit(line);
    else log.info("audit", line);
  }

  return {
    /** Adds what a handler acted on that the path does not say (a new account's or key's id, a credit's reference). */
    note(request: Request, targets: AuditTargets): void {
      noted.set(request, { ...noted.get(request), ...targets });
    },

    /** A call the admin guard refused before any route ran: no valid token (401), or a malformed path id (400). */
    refused(request: Request, status: number, authenticated: boolean): void {
      write(request, authenticated, { route: null, action: null, status });
    },

    /** The line of a routed /admin/ call, with the status of its answer or its error (the app tells every route's). */
    answered({ request, route, params, status }: RouteAnswer): void {
      if (route === undefined || !route.startsWith("/admin/")) return;
      write(request, true, {
        route,
        action: actionOf(request.method, route),
        ...pathTargets(route, params?.id),
        ...noted.get(request),
        status,
      });
    },
  };
}

function actionOf(method: string, route: string): string | null {
  const named = ACTIONS[`${method} ${route}`];
  if (named) return named;
  if (route === "/admin/*") return null; // no such endpoint
  const word = route.split("/").filter((part) => part !== "" && !part.startsWith(":")).pop() ?? "admin";
  return `${word}.${method.toLowerCase()}`;
}

/** The path's `:id` (already checked against the id shape by the admin guard): a key's under /keys/, else an account's. */
function pathTargets(route: string, id: string | undefined): AuditTargets {
  if (id === undefined) return {};
  return route.startsWith("/admin/v1/keys/") ? { key_id: id } : { account_id: id };
}
