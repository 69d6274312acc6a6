import { definePlugin } from "../../core/plugin.ts";
import { runsHostDuties } from "../../core/workers.ts";
import { GatewayError, InvalidRequestError, NotFoundError, RateLimitError, UnavailableError } from "../../core/errors.ts";
import { createSecondWindowCounter } from "../../core/window-counter.ts";
import type { Principal } from "../auth/principal.ts";
import { listPage, listParams, parseListCursor, parseListLimit, type ListCursor } from "../admin/list-query.ts";
import { parseTimestamp } from "../admin/timestamp.ts";
import { storeCall } from "../storage/http-errors.ts";
import type { AccountStore, KeyStore, PaymentStore, RequestPage } from "../storage/repository.ts";
import {
  createTopupDocs,
  getTopupDocs,
  listAccountTopupsDocs,
  listTopupsDocs,
  listUnmatchedDocs,
  reconcileDocs,
  unblockAccountDocs,
} from "../../openapi/payments.ts";
import type { PaymentsService } from "./processor.ts";
import { reconcileProcessor } from "./reconcile.ts";
import { PaymentsConfig } from "./schema.ts";
import { createPaymentsService } from "./service.ts";
import { adminTopupView, topupView, unmatchedView } from "./views.ts";

/** A top-up id as we make them (tu_ + 24 hex). */
const TOPUP_ID = /^tu_[0-9a-f]{24}$/;
/** An unmatched transfer's next_before: "<recorded ms>_<id>". */
const UNMATCHED_CURSOR = /^(\d{1,15})_(\S{1,200})$/;

/**
 * The payments core: top-ups (POST/GET /v1/credits/topups), the processors' registry (payments-stripe,
 * payments-usdt-tron register themselves), their events applied once through the store, the expiry sweep, and the
 * operator's routes (unmatched transfers, an account's top-ups, unblocking after a dispute, reconciliation).
 */
export default definePlugin({
  name: "payments",
  requires: ["storage", "auth"],
  configSchema: PaymentsConfig,
  setup(config, host) {
    const store: PaymentStore & KeyStore & AccountStore = host.service("storage"); // the slices of the store it uses
    const auth = host.service("auth");
    const payments = createPaymentsService({ config, store, auth, log: host.log, now: host.now });
    const withinLimit = config.requests_per_second > 0 ? createSecondWindowCounter(config.requests_per_second) : () => true;

    let sweeping = false;
    // Once per host: with several workers only worker 0 sweeps.
    const sweep = !runsHostDuties(host.workers) ? null : setInterval(function expireDueTopups() {
      if (sweeping) return;
      sweeping = true;
      payments
        .expireDue()
        .then((expired) => {
          if (expired > 0) host.log.info("expired pending top-ups", { expired });
        })
        .catch((error) => host.log.warn("top-up expiry sweep failed; the next one retries", { error: String(error) }))
        .finally(() => (sweeping = false));
    }, config.expiry_sweep_ms);
    sweep?.unref();

    /** Key auth, the per-key rate, and store failures as 503 (as cost-api serves). */
    async function serve<T>(request: Request, answer: (principal: Principal) => Promise<T>): Promise<T> {
      try {
        const principal = await auth.authenticate(request.headers);
        if (!withinLimit(principal.key.id)) {
          throw new RateLimitError(`the top-up endpoints allow ${config.requests_per_second} requests per second per key`, { headers: { "retry-after": "1" } });
        }
        return await answer(principal);
      } catch (error) {
        if (error instanceof GatewayError) throw error;
        host.log.error("payments store failure", { error: String(error) });
        throw new UnavailableError("payment data is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause: error });
      }
    }

    /** A list's page start: after the top-up with this id (of this account), or before a time. */
    async function topupPageStart(cursor: ListCursor | undefined, accountId: string): Promise<Omit<RequestPage, "limit">> {
      if (cursor === undefined) return {};
      if ("before" in cursor) return { before: cursor.before };
      const row = TOPUP_ID.test(cursor.id) ? await store.getTopup(cursor.id) : null;
      if (!row || row.accountId !== accountId) throw new InvalidRequestError("before is not the id of a top-up of this account", { param: "before" });
      return { before: row.createdAt, beforeId: row.id };
    }

    async function topupPage(request: Request, accountId: string, view: typeof topupView | typeof adminTopupView) {
      const query = listParams(request, ["limit", "before"]);
      const limit = parseListLimit(query.get("limit"));
      const start = await topupPageStart(parseListCursor(query.get("before"), "a top-up"), accountId);
      const rows = await store.listTopups(accountId, { limit: limit + 1, ...start });
      return listPage(rows, limit, view);
    }

    async function existingAccount(id: string) {
      const account = await store.getAccount(id);
      if (!account) throw new NotFoundError(`no account "${id}"`);
      return account;
    }

    return {
      provides: payments satisfies PaymentsService,
      routes(app, gateway) {
        app
          .post(
            "/v1/credits/topups",
            ({ request, set }) =>
              serve(request, async (principal) => {
                const body = await gateway.readJson(request);
                const topup = await payments.createTopup(principal.accountId, body.method as never, body.amount as never, payments.context(request));
                set.status = 201;
                return { data: topupView(topup) };
              }),
            { parse: "none", detail: createTopupDocs },
          )
          .get(
            "/v1/credits/topups",
            ({ request }) => serve(request, (principal) => topupPage(request, principal.accountId, topupView)),
            { detail: listTopupsDocs },
          )
          .get(
            "/v1/credits/topups/:id",
            ({ request, params }) =>
              serve(request, async (principal) => {
                const topup = TOPUP_ID.test(params.id) ? await store.getTopup(params.id) : null;
                // Another account's top-up reads exactly like an unknown one.
                if (!topup || topup.accountId !== principal.accountId) throw new NotFoundError(`no top-up "${params.id.slice(0, 80)}" on this account`);
                return { data: topupView(topup) };
              }),
            { detail: getTopupDocs },
          );

        // Under /admin/: the admin plugin's token check guards them before anything is read; without it, no operator routes.
        if (!host.has("admin")) return;
        app
          .get(
            "/admin/v1/payments/unmatched",
            async ({ request }) => {
              const query = listParams(request, ["limit", "before"]);
              const limit = parseListLimit(query.get("limit"));
              const rows = await storeCall(store.listUnmatchedTransfers({ limit: limit + 1, ...unmatchedCursor(query.get("before")) }));
              const hasMore = rows.length > limit;
              const shown = hasMore ? rows.slice(0, limit) : rows;
              const last = shown[shown.length - 1];
              return { data: shown.map(unmatchedView), has_more: hasMore, next_before: hasMore && last ? `${last.recordedAt}_${last.id}` : null };
            },
            { detail: listUnmatchedDocs },
          )
          .get(
            "/admin/v1/payments/reconcile",
            async ({ request }) => {
              const query = listParams(request, ["since"]);
              const since = parseSince(query.get("since"));
              const processors = [];
              for (const processor of payments.processors()) {
                if (!processor.records) continue;
                processors.push(await reconcileProcessor(processor as typeof processor & { records: NonNullable<typeof processor.records> }, store, since));
              }
              return { data: { since: new Date(since).toISOString(), processors } };
            },
            { detail: reconcileDocs },
          )
          .get(
            "/admin/v1/accounts/:id/topups",
            async ({ request, params }) => {
              await existingAccount(params.id);
              return topupPage(request, params.id, adminTopupView);
            },
            { detail: listAccountTopupsDocs },
          )
          .post(
            "/admin/v1/accounts/:id/unblock",
            async ({ params }) => {
              await existingAccount(params.id);
              const wasBlocked = await storeCall(store.clearAccountBlock(params.id));
              if (wasBlocked) {
                host.log.info("account unblocked", { account_id: params.id });
                await payments.forgetKeys(params.id).catch((error) => host.log.warn("could not clear the key cache after an unblock", { error: String(error) }));
              }
              return { data: { id: params.id, blocked: false, was_blocked: wasBlocked } };
            },
            { parse: "none", detail: unblockAccountDocs },
          );
      },
      close() {
        if (sweep) clearInterval(sweep);
      },
    };
  },
});

/** Reconciliation's `since`: an RFC 3339 time or epoch ms; required. */
function parseSince(value: string | undefined): number {
  if (value === undefined || value === "") throw new InvalidRequestError("since is required: an RFC 3339 time (2030-01-31T00:00:00Z) or epoch ms", { param: "since" });
  if (/^\d{1,15}$/.test(value)) return Number(value);
  // An offset's "+" left unencoded in a query string arrives as a space.
  return parseTimestamp(value.replace(/ (\d{2}:\d{2})$/, "+$1"), "since");
}

/** The unmatched list's `before`: a next_before ("<ms>_<id>"), an epoch-ms number or an RFC 3339 time. */
function unmatchedCursor(value: string | undefined): Omit<RequestPage, "limit"> {
  if (value === undefined) return {};
  if (/^\d{1,15}$/.test(value)) return { before: Number(value) };
  const cursor = UNMATCHED_CURSOR.exec(value);
  if (cursor) return { before: Number(cursor[1]), beforeId: cursor[2] };
  if (/^\d{4}-/.test(value)) return { before: parseTimestamp(value.replace(/ (\d{2}:\d{2})$/, "+$1"), "before") };
  throw new InvalidRequestError("before must be a next_before of this list, an epoch-ms number or an RFC 3339 time", { param: "before" });
}
