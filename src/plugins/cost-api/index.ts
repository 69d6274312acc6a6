import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { GatewayError, InvalidRequestError, NotFoundError, RateLimitError, UnavailableError } from "../../core/errors.ts";
import { createSecondWindowCounter } from "../../core/window-counter.ts";
import type { Principal } from "../auth/principal.ts";
import { usageWindow } from "./dates.ts";
import { creditsView, generationView, keyView, usageReportView } from "./views.ts";
import { creditsDocs, generationDocs, keyDocs, usageDocs } from "../../openapi/account.ts";
import type { KeyStore, LedgerStore, MeteringStore } from "../storage/repository.ts";

/** A request id (gen-…) or a chat-completion id: printable, no spaces, bounded. */
const GENERATION_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$/;

/** GET /v1/generation, /v1/usage, /v1/credits, /v1/key: how clients reconcile their spend. */
export default definePlugin({
  name: "cost-api",
  requires: ["storage", "auth"],
  configSchema: Type.Object({
    /** Per calling key, separate from inference limits (spec: about 30 per second). */
    requests_per_second: Type.Integer({ minimum: 0, default: 30 }),
  }),
  setup(config, host) {
    const store: LedgerStore & KeyStore & MeteringStore = host.service("storage"); // the slices of the store it uses
    const auth = host.service("auth");
    const withinLimit = config.requests_per_second > 0 ? createSecondWindowCounter(config.requests_per_second) : () => true;
    // rate-limit: /v1/key shows the limits in force (promotional caps included); cost-api comes after it in the YAML.
    const rateLimit = host.has("rate-limit") ? host.service("rate-limit") : undefined;

    /** Authenticates, rate-limits, and turns store failures into 503 unavailable. */
    async function serve<T>(request: Request, answer: (principal: Principal) => Promise<T>): Promise<{ data: T }> {
      try {
        // Verifying the key reads the store too (cache misses): a store failure there is also a 503, not a 500.
        const principal = await auth.authenticate(request.headers);
        if (!withinLimit(principal.key.id)) {
          throw new RateLimitError(`the cost and usage endpoints allow ${config.requests_per_second} requests per second per key`, {
            headers: { "retry-after": "1" },
          });
        }
        return { data: await answer(principal) };
      } catch (error) {
        if (error instanceof GatewayError) throw error;
        host.log.error("cost api store failure", { error: String(error) });
        throw new UnavailableError("account data is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause: error });
      }
    }

    return {
      routes(app) {
        app
          .get(
            "/v1/generation",
            ({ request, query }) =>
              serve(request, async (principal) => {
                const id = query.id;
                if (typeof id !== "string" || id === "") throw new InvalidRequestError("the id query parameter is required", { param: "id" });
                if (!GENERATION_ID.test(id)) throw new InvalidRequestError(`malformed id "${id.slice(0, 80)}"`, { param: "id" });
                // A translated Responses answer's id is resp_<request hex>: the same record as gen-<hex>.
                const responsesId = /^resp_([0-9a-f]{32})$/.exec(id);
                const generation =
                  (await store.findGeneration(principal.accountId, id)) ??
                  (responsesId ? await store.findGeneration(principal.accountId, `gen-${responsesId[1]}`) : null);
                if (!generation) throw new NotFoundError(`no request "${id}" on this account`);
                return generationView(generation, principal.key.id);
              }),
            { detail: generationDocs },
          )
          .get(
            "/v1/usage",
            ({ request, query }) =>
              serve(request, async (principal) => {
                const scope = query.scope ?? "account";
                if (scope !== "account" && scope !== "key") throw new InvalidRequestError(`scope must be "account" or "key"`, { param: "scope" });
                const { startDay, endDay } = usageWindow(query, host.now());
                const rows = await store.usageByDay({
                  accountId: principal.accountId,
                  keyId: scope === "key" ? principal.key.id : undefined,
                  startDay,
                  endDay,
                });
                return usageReportView(scope, startDay, endDay, rows);
              }),
            { detail: usageDocs },
          )
          .get(
            "/v1/credits",
            ({ request }) => serve(request, async (principal) => creditsView(await store.accountTotals(principal.accountId))),
            { detail: creditsDocs },
          )
          .get(
            "/v1/key",
            ({ request }) =>
              serve(request, async (principal) => {
                const { key } = principal;
                const [usage, rateLimits] = await Promise.all([
                  store.keyUsage(key.id),
                  // rate-limit: the effective limits; without the plugin, the key's own.
                  rateLimit?.effectiveLimits(principal) ?? { requests_per_minute: key.requestsPerMinute, tokens_per_minute: key.tokensPerMinute },
                ]);
                return keyView(key, usage, rateLimits);
              }),
            { detail: keyDocs },
          );
      },
    };
  },
});
