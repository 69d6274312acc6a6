import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { pathOf } from "../../core/app.ts";
import { AuthenticationError, ConflictError, InvalidRequestError, NotFoundError, type GatewayError } from "../../core/errors.ts";
import { nanoToUsd } from "../../core/money.ts";
import { generateApiKey, hashApiKey, maskApiKey } from "../auth/keys.ts";
import { checkPassword, checkRole, newUser, normalizeEmail } from "../auth/users.ts";
import { storeCall } from "../storage/http-errors.ts";
import { createAudit } from "./audit.ts";
import { creditAccount, parseAmount } from "./credit.ts";
import { listPage, listParams, parseListCursor, parseListLimit, parseSearch, type ListCursor } from "./list-query.ts";
import {
  AccountsQuery,
  CreateAccountBody,
  CreateKeyBody,
  CreateUserBody,
  CreditBody,
  ID_ERROR,
  ID_PATTERN,
  IdParams,
  KeysQuery,
  RequestsQuery,
} from "./schema.ts";
import { parseTimestamp } from "./timestamp.ts";
import { adminTokenHash, adminTokenMatches } from "./token.ts";
import { accountView, iso, keyView, listedKeyView, requestRow, userView } from "./views.ts";
import {
  createAccountDocs,
  createKeyDocs,
  createUserDocs,
  creditAccountDocs,
  deleteKeyDocs,
  getAccountDocs,
  listAccountsDocs,
  listKeysDocs,
  listRequestsDocs,
  listUsersDocs,
} from "../../openapi/admin.ts";
import type { AccountStore, KeyStore, LedgerStore, MeteringStore, SettingsStore, UserStore } from "../storage/repository.ts";

/** What the admin plugin offers the dashboard (`host.service("admin")`): the operators' sign-in check. */
export interface AdminService {
  /** Whether `token` is the admin token (compared in constant time, as the bearer check of /admin/ is). */
  tokenMatches(token: string): boolean;
}

declare module "../../core/plugin.ts" {
  interface Services {
    admin: AdminService;
  }
}

/** Operator API under /admin/v1: accounts, credits, keys, request logs; one audit line per call. Bearer $GATEWAY_ADMIN_TOKEN. */
export default definePlugin({
  name: "admin",
  requires: ["storage", "auth"],
  configSchema: Type.Object({
    /** Empty: a token is generated on the first start and only its hash kept. */
    admin_token: Type.String({ default: "" }),
  }),
  async setup(config, host) {
    const store: AccountStore & LedgerStore & KeyStore & MeteringStore & SettingsStore & UserStore = host.service("storage"); // the slices of the store it uses
    const auth = host.service("auth");
    const catalog = host.has("catalog") ? host.service("catalog") : undefined;
    const tokenHash = await adminTokenHash(config.admin_token, store, host.log);
    const audit = createAudit(host.log, tokenHash);

    function requireAdmin(request: Request) {
      if (!adminTokenMatches(request.headers.get("authorization"), tokenHash)) {
        throw new AuthenticationError("admin endpoints need `Authorization: Bearer <GATEWAY_ADMIN_TOKEN>`");
      }
    }

    async function existingAccount(id: string) {
      const account = await store.getAccount(id);
      if (!account) throw new NotFoundError(`no account "${id}"`);
      return account;
    }

    /** The store's cursor for a list's `before`: a row's id becomes its (created_at, id); `find` looks the row up. */
    async function pageStart(cursor: ListCursor | undefined, find: (id: string) => Promise<{ id: string; createdAt: number } | null>, rows: string) {
      if (cursor === undefined) return {};
      if ("before" in cursor) return { before: cursor.before };
      const row = await find(cursor.id);
      if (!row) throw new InvalidRequestError(`before is not the id of ${rows}`, { param: "before" });
      return { before: row.createdAt, beforeId: row.id };
    }

    return {
      provides: {
        tokenMatches: (token: string) => adminTokenMatches("Bearer " + token, tokenHash),
      } satisfies AdminService,
      // Every routed /admin/ call's audit line, this plugin's routes and later plugins' (budget's) alike.
      routeAnswered: (answer) => audit.answered(answer),

      routes(app) {
        // Authenticate before body parsing and validation: without a valid token, every /admin/ request
        // is a 401 (never a 400 that reveals the schema). The per-route requireAdmin stays as a backstop.
        // Then the path's id, for every plugin's admin routes (budget's /plan too), before any reads it.
        app.onRequest(function requireAdminToken({ request }) {
          const path = pathOf(request);
          if (!path.startsWith("/admin/")) return;
          let authenticated = false;
          try {
            requireAdmin(request);
            authenticated = true;
            checkPathId(path);
          } catch (error) {
            audit.refused(request, (error as GatewayError).status, authenticated);
            throw error; // the app answers it and writes the request line
          }
        });
        app
          .get(
            "/admin/v1/accounts",
            async ({ request }) => {
              requireAdmin(request);
              const query = listParams(request, ["limit", "before", "q"]);
              const limit = parseListLimit(query.get("limit"));
              const q = parseSearch(query.get("q"));
              const cursor = parseListCursor(query.get("before"), "an account");
              const start = await pageStart(cursor, (id) => store.getAccount(id), "an account");
              const rows = await store.listAccounts({ limit: limit + 1, q, ...start });
              return listPage(rows, limit, accountView);
            },
            { query: AccountsQuery, detail: listAccountsDocs },
          )
          .post(
            "/admin/v1/accounts",
            async ({ request, body, set }) => {
              requireAdmin(request);
              const account = await store.createAccount(body.name);
              audit.note(request, { account_id: account.id });
              set.status = 201;
              return { data: accountView(account) };
            },
            { body: CreateAccountBody, detail: createAccountDocs },
          )
          .get(
            "/admin/v1/accounts/:id",
            async ({ request, params }) => {
              requireAdmin(request);
              const account = await existingAccount(params.id);
              const totals = await store.accountTotals(account.id);
              return {
                data: {
                  id: account.id,
                  name: account.name,
                  created_at: iso(account.createdAt),
                  total_credits: nanoToUsd(totals.credits),
                  total_usage: nanoToUsd(totals.debits),
                  balance: nanoToUsd(totals.balance),
                  currency: "USD",
                },
              };
            },
            { params: IdParams, detail: getAccountDocs },
          )
          .post(
            "/admin/v1/accounts/:id/credits",
            async ({ request, params, body, set }) => {
              requireAdmin(request);
              audit.note(request, { reference: body.reference });
              await existingAccount(params.id);
              const result = await creditAccount(store, params.id, body);
              audit.note(request, { entry_id: result.entryId });
              set.status = 201;
              return { data: { entry_id: result.entryId, balance: nanoToUsd(result.balance), duplicate: result.duplicate } };
            },
            { params: IdParams, body: CreditBody, detail: creditAccountDocs },
          )
          .post(
            "/admin/v1/accounts/:id/keys",
            async ({ request, params, body, set }) => {
              requireAdmin(request);
              await existingAccount(params.id);
              const models = body.models ?? null;
              const unknown = catalog && models ? models.filter((id: string) => !catalog.get(id)) : [];
              if (unknown.length > 0) {
                const listed = unknown.slice(0, 10).join(", ") + (unknown.length > 10 ? ` and ${unknown.length - 10} more` : "");
                throw new InvalidRequestError(`unknown model ids in models: ${listed}`, { param: "models" });
              }
              const expiresAt = body.expires_at ? parseTimestamp(body.expires_at, "expires_at") : null;
              if (expiresAt !== null && expiresAt <= Date.now()) throw new InvalidRequestError("expires_at is in the past", { param: "expires_at" });
              const secret = generateApiKey();
              const key = await storeCall(
                store.createKey({
                  id: "key_" + crypto.randomUUID().replaceAll("-", "").slice(0, 24),
                  accountId: params.id,
                  name: body.name,
                  keyHash: hashApiKey(secret),
                  label: maskApiKey(secret),
                  limit: body.limit == null ? null : parseAmount(body.limit, "limit"),
                  models,
                  requestsPerMinute: body.rate_limit?.requests_per_minute ?? null,
                  tokensPerMinute: body.rate_limit?.tokens_per_minute ?? null,
                  expiresAt,
                }),
              );
              audit.note(request, { key_id: key.id });
              set.status = 201;
              return { data: { ...keyView(key), key: secret } };
            },
            { params: IdParams, body: CreateKeyBody, detail: createKeyDocs },
          )
          .get(
            "/admin/v1/accounts/:id/keys",
            async ({ request, params }) => {
              requireAdmin(request);
              await existingAccount(params.id);
              const query = listParams(request, ["limit", "before"]);
              const limit = parseListLimit(query.get("limit"));
              const cursor = parseListCursor(query.get("before"), "a key of this account");
              const ofAccount = async (id: string) => {
                const key = await store.getKey(id);
                return key?.accountId === params.id ? key : null;
              };
              const start = await pageStart(cursor, ofAccount, "a key of this account");
              const rows = await store.listKeys(params.id, { limit: limit + 1, ...start });
              return listPage(rows, limit, listedKeyView);
            },
            { params: IdParams, query: KeysQuery, detail: listKeysDocs },
          )
          .delete(
            "/admin/v1/keys/:id",
            async ({ request, params }) => {
              requireAdmin(request);
              const key = await store.deleteKey(params.id);
              if (!key) throw new NotFoundError(`no active key "${params.id}"`);
              audit.note(request, { account_id: key.accountId });
              await auth.forget(key.keyHash);
              return { data: { id: key.id, deleted: true } };
            },
            { params: IdParams, detail: deleteKeyDocs },
          )
          .get(
            "/admin/v1/accounts/:id/requests",
            async ({ request, params, query }) => {
              requireAdmin(request);
              await existingAccount(params.id);
              const limit = parseLimit(query.limit);
              const rows = await store.listGenerations(params.id, { limit, ...parseCursor(query.before) });
              const last = rows[rows.length - 1];
              return { data: rows.map(requestRow), next_before: rows.length === limit && last ? `${last.createdAt}_${last.id}` : null };
            },
            { params: IdParams, query: RequestsQuery, detail: listRequestsDocs },
          )
          .post(
            "/admin/v1/accounts/:id/users",
            async ({ request, params, body, set }) => {
              requireAdmin(request);
              // The cheap checks first (the password is never echoed), then the account, then the hash (argon2id is slow on purpose).
              const email = normalizeEmail(body.email);
              checkPassword(body.password);
              const role = checkRole(body.role ?? "owner");
              await existingAccount(params.id);
              if (await store.findUserByEmail(email)) throw new ConflictError("a user with this email already exists", { param: "email" });
              const user = await storeCall(store.createUser(await newUser({ accountId: params.id, email, password: body.password, role })));
              audit.note(request, { user_id: user.id });
              set.status = 201;
              return { data: userView(user) };
            },
            { params: IdParams, body: CreateUserBody, detail: createUserDocs },
          )
          .get(
            "/admin/v1/accounts/:id/users",
            async ({ request, params }) => {
              requireAdmin(request);
              // The whole list in one answer: a query (?limit=) would be silently ignored, so it is refused.
              const [name] = new URL(request.url).searchParams.keys();
              if (name !== undefined) throw new InvalidRequestError("this list takes no query parameters", { param: name.slice(0, 40) });
              await existingAccount(params.id);
              const users = await store.listUsers(params.id);
              return { data: users.map(userView) };
            },
            { params: IdParams, detail: listUsersDocs },
          )
          // Unknown /admin/ paths end here rather than in the core's 404, so they get their audit line too.
          .all(
            "/admin/*",
            function noSuchAdminEndpoint() {
              throw new NotFoundError("no such endpoint");
            },
            { detail: { hide: true } },
          );
      },
    };
  },
});

const ID = new RegExp(ID_PATTERN);

/** The id of /admin/v1/accounts/:id/… or /admin/v1/keys/:id, decoded, must have the shape of the ids the stores make. */
function checkPathId(path: string) {
  const segment = /^\/admin\/v1\/(?:accounts|keys)\/([^/?#]*)/.exec(path)?.[1];
  if (segment === undefined) return;
  let id: string;
  try {
    id = decodeURIComponent(segment);
  } catch {
    id = ""; // a malformed escape (%ff) is no id
  }
  if (!ID.test(id)) throw new InvalidRequestError(`invalid id: ${ID_ERROR}`, { param: "id" });
}

function parseLimit(limit: string | undefined): number {
  if (limit === undefined || limit === "") return 50;
  const value = /^\d+$/.test(limit) ? Number(limit) : NaN;
  if (!(value >= 1 && value <= 500)) throw new InvalidRequestError("limit must be an integer from 1 to 500", { param: "limit" });
  return value;
}

/** `before`: a `next_before` cursor ("<epoch ms>_<request id>"), an epoch-ms number or an RFC 3339 time. */
function parseCursor(before: string | undefined): { before?: number; beforeId?: string } {
  if (before === undefined || before === "") return {};
  const cursor = /^(\d{1,15})_(gen-[0-9a-f]{32})$/.exec(before);
  if (cursor) return { before: Number(cursor[1]), beforeId: cursor[2] };
  // At most 15 digits (year 33658): always a safe integer for both stores' bigint columns.
  if (/^\d{1,15}$/.test(before)) return { before: Number(before) };
  // An offset's "+" left unencoded in a query string arrives as a space.
  if (/^\d{4}-/.test(before)) return { before: parseTimestamp(before.replace(/ (\d{2}:\d{2})$/, "+$1"), "before") };
  throw new InvalidRequestError("before must be a next_before cursor, an epoch-ms number or an RFC 3339 time", { param: "before" });
}
