import { Html } from "@kitajs/html";
import type { ApiKey, Generation, GenerationQuery, GenerationStatus } from "../../storage/repository.ts";
import { HIDDEN, type DashboardDeps, type PageModule, type UserViewer } from "../deps.ts";
import { Layout, Notice } from "../layout.tsx";
import { html, isHtmx, usd } from "../web.ts";

/**
 * The request log of the viewer's account: one row per request, newest first, PAGE_SIZE a page, narrowed by
 * key, model, status and UTC day, paged by a (created_at, id) keyset cursor. One store read per page view
 * (plus the account's keys for their names and the filter); a row's request id opens its detail (with htmx:
 * into a row under it, one request; without: its own page). Costs are printed exactly from the nano-USD the
 * store keeps, never through floats.
 */

const PAGE_SIZE = 50;
/** Keys loaded for the filter and the names; an account with more gets the rest of a page's names by id. */
const KEYS_LISTED = 1_000;
const STATUSES: readonly GenerationStatus[] = ["success", "failed", "cancelled"];
const DAY_MS = 86_400_000;
const COLUMNS = 9;

// What a query parameter may be; anything else is refused with a 400 page (never passed to the store).
const KEY_ID = /^[A-Za-z0-9_-]{1,100}$/;
const MODEL_ID = /^[A-Za-z0-9._:/@+-]{1,200}$/;
const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
const CURSOR = /^(\d{1,15})_([A-Za-z0-9_.:-]{1,200})$/;
const GENERATION_ID = /^[A-Za-z0-9_.:-]{1,200}$/;

/** The filters and cursor of a Logs URL, validated. */
interface LogsQuery {
  key?: string;
  model?: string;
  status?: GenerationStatus;
  day?: string;
  before?: { at: number; id: string };
}

class BadQuery extends Error {}

function isoUtc(ms: number): string {
  return new Date(ms).toISOString();
}

function parseQuery(url: URL): LogsQuery {
  const params = url.searchParams;
  const one = (name: string): string | undefined => {
    const values = params.getAll(name);
    if (values.length > 1) throw new BadQuery(`"${name}" is given more than once.`);
    const value = values[0]?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  const query: LogsQuery = {};
  const key = one("key");
  if (key !== undefined) {
    if (!KEY_ID.test(key)) throw new BadQuery("That key filter is not a key id.");
    query.key = key;
  }
  const model = one("model");
  if (model !== undefined) {
    if (!MODEL_ID.test(model)) throw new BadQuery("That model filter is not a model id.");
    query.model = model;
  }
  const status = one("status");
  if (status !== undefined) {
    if (!(STATUSES as readonly string[]).includes(status)) throw new BadQuery(`Status must be one of ${STATUSES.join(", ")}.`);
    query.status = status as GenerationStatus;
  }
  const day = one("day");
  if (day !== undefined) {
    if (dayStart(day) === undefined) throw new BadQuery("Day must be a date (YYYY-MM-DD).");
    query.day = day;
  }
  const before = one("before");
  if (before !== undefined) {
    const match = CURSOR.exec(before);
    const at = match ? Number(match[1]) : NaN;
    if (!match || !Number.isSafeInteger(at)) throw new BadQuery("That page cursor is not valid: start again from the newest requests.");
    query.before = { at, id: match[2] };
  }
  return query;
}

/** Epoch ms of the UTC day's start, or undefined when `day` is no real date. */
function dayStart(day: string): number | undefined {
  const match = DAY.exec(day);
  if (!match) return undefined;
  const [year, month, date] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (year < 1970 || year > 9999) return undefined;
  const start = Date.UTC(year, month - 1, date);
  return new Date(start).toISOString().slice(0, 10) === day ? start : undefined;
}

/** The URL of a Logs page with these filters (and cursor). */
function logsUrl(query: LogsQuery, before?: { at: number; id: string }): string {
  const params = new URLSearchParams();
  if (query.key) params.set("key", query.key);
  if (query.model) params.set("model", query.model);
  if (query.status) params.set("status", query.status);
  if (query.day) params.set("day", query.day);
  if (before) params.set("before", `${before.at}_${before.id}`);
  const text = params.toString();
  return text === "" ? "/dashboard/logs" : `/dashboard/logs?${text}`;
}

function detailUrl(id: string): string {
  return `/dashboard/logs/${encodeURIComponent(id)}`;
}

function keyName(keys: ReadonlyMap<string, ApiKey>, keyId: string): string {
  const key = keys.get(keyId);
  if (!key) return keyId;
  return key.deletedAt === null ? key.name : `${key.name} (deleted)`;
}

/** The cache writes, split by lifetime when any was a 1-hour write (each is billed at its own price). */
function cacheWrites(g: Generation): string {
  const hour = g.cacheWrite1hTokens ?? 0;
  return hour === 0 ? String(g.cacheWriteTokens) : `${g.cacheWriteTokens} (5 min: ${g.cacheWriteTokens - hour}, 1 h: ${hour})`;
}

function statusText(g: Generation): string {
  return g.errorCode ? `${g.status} · ${g.errorCode}` : g.status;
}

/** The keys by id: the account's listing (the filter's options) plus, past KEYS_LISTED keys, the page's other keys one by one. */
async function keysById(deps: DashboardDeps, accountId: string, listed: readonly ApiKey[], rows: readonly Generation[]): Promise<Map<string, ApiKey>> {
  const byId = new Map(listed.map((k) => [k.id, k]));
  if (listed.length < KEYS_LISTED) return byId;
  const missing = [...new Set(rows.map((g) => g.keyId))].filter((id) => !byId.has(id));
  const found = await Promise.all(missing.map((id) => deps.store.getKey(id)));
  for (const key of found) if (key && key.accountId === accountId) byId.set(key.id, key);
  return byId;
}

function Filters(props: { query: LogsQuery; keys: readonly ApiKey[]; models: readonly string[] }): JSX.Element {
  const { query } = props;
  const models = query.model && !props.models.includes(query.model) ? [query.model, ...props.models] : props.models;
  const swap = { "hx-get": "/dashboard/logs", "hx-target": "#log", "hx-select": "#log", "hx-swap": "outerHTML", "hx-push-url": "true" };
  return (
    <form method="get" action="/dashboard/logs" role="search" aria-label="Filter requests" class="row filters" {...swap}>
      <label>
        Key
        <select name="key">
          <option value="">Any key</option>
          {props.keys.map((k) => (
            <option value={k.id} selected={k.id === query.key}>
              {Html.escapeHtml(k.deletedAt === null ? k.name : `${k.name} (deleted)`)}
            </option>
          ))}
        </select>
      </label>
      <label>
        Model
        <select name="model">
          <option value="">Any model</option>
          {models.map((m) => (
            <option value={m} selected={m === query.model}>
              {Html.escapeHtml(m)}
            </option>
          ))}
        </select>
      </label>
      <label>
        Status
        <select name="status">
          <option value="">Any status</option>
          {STATUSES.map((s) => (
            <option value={s} selected={s === query.status}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Day
        <input type="date" name="day" value={query.day ?? ""} />
      </label>
      <button type="submit">Filter</button>
      <a href="/dashboard/logs">Clear filters</a>
    </form>
  );
}

function LogTable(props: { rows: readonly Generation[]; keys: ReadonlyMap<string, ApiKey>; query: LogsQuery; older?: { at: number; id: string } }): JSX.Element {
  const { rows, query } = props;
  const filtered = Boolean(query.key || query.model || query.status || query.day);
  const pager = (href: string, label: string, rel?: string) => (
    <a href={href} rel={rel} hx-get={href} hx-target="#log" hx-select="#log" hx-swap="outerHTML" hx-push-url="true">
      {label}
    </a>
  );
  return (
    <section id="log" aria-label="Request log">
      {rows.length === 0 ? (
        <p class="muted">{filtered ? "No requests match these filters." : query.before ? "No older requests." : "No requests yet."}</p>
      ) : (
        <table aria-label="Requests" class="log">
          <thead>
            <tr>
              <th scope="col">Request</th>
              <th scope="col">Time (UTC)</th>
              <th scope="col">Key</th>
              <th scope="col">Model</th>
              <th scope="col" class="num">Prompt</th>
              <th scope="col" class="num">Completion</th>
              <th scope="col" class="num">Cached</th>
              <th scope="col" class="num">Cost (USD)</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((g, i) => (
              <>
                <tr class={g.status === "success" ? undefined : "bad"}>
                  <td class="mono">
                    <a href={detailUrl(g.id)} hx-get={detailUrl(g.id)} hx-target={`#d-${i}`} hx-swap="outerHTML" aria-label={`Request ${g.id}`}>
                      {Html.escapeHtml(g.id)}
                    </a>
                  </td>
                  <td>
                    <time datetime={isoUtc(g.createdAt)}>{isoUtc(g.createdAt)}</time>
                  </td>
                  <td safe>{keyName(props.keys, g.keyId)}</td>
                  <td safe>{g.model}</td>
                  <td class="num">{String(g.promptTokens)}</td>
                  <td class="num">{String(g.completionTokens)}</td>
                  <td class="num">{String(g.cachedTokens)}</td>
                  <td class="num">{usd(g.totalCost)}</td>
                  <td safe>{statusText(g)}</td>
                </tr>
                <tr id={`d-${i}`} class="detail-slot"></tr>
              </>
            ))}
          </tbody>
        </table>
      )}
      <nav class="pager" aria-label="Pages">
        {query.before ? pager(logsUrl(query), "Newest", "first") : ""}
        {props.older ? pager(logsUrl(query, props.older), "Older", "next") : ""}
      </nav>
    </section>
  );
}

function Facts(props: { items: readonly [string, string][] }): JSX.Element {
  return (
    <dl class="facts">
      {props.items.map(([term, value]) => (
        <>
          <dt>{term}</dt>
          <dd safe>{value}</dd>
        </>
      ))}
    </dl>
  );
}

/** One request in full: ids, timing, route (and the requested model when a fallback answered), tokens, the cost breakdown and the upstream attempts. */
function Detail(props: { g: Generation; keyName: string }): JSX.Element {
  const { g } = props;
  const ms = (value: number | null) => (value === null ? "—" : `${value} ms`);
  const attempts = g.attempts ?? [];
  // Only when a fallback answered: the model the client asked for (escaped by Facts, as every value).
  const requested: [string, string][] = g.requestedModel != null && g.requestedModel !== g.model ? [["Requested model", g.requestedModel]] : [];
  return (
    <section class="detail" aria-label={`Request detail ${g.id}`}>
      <div class="detail-grid">
        <Facts
          items={[
            ["Request id", g.id],
            ["Response id", g.responseId ?? g.id], // as /v1/generation answers it: the request id when the upstream id was not passed on
            ["Time (UTC)", isoUtc(g.createdAt)],
            ["Key", props.keyName],
            ["Model", g.model],
            ...requested,
            ["Provider", g.provider],
            ["Ingress format", g.ingress],
            ["Stream", g.stream ? "yes" : "no"],
            ["Status", statusText(g)],
            ["Latency", ms(g.latencyMs)],
            ["Time to first token", ms(g.timeToFirstTokenMs)],
          ]}
        />
        <Facts
          items={[
            ["Prompt tokens", String(g.promptTokens)],
            ["Completion tokens", String(g.completionTokens)],
            ["Cached tokens", String(g.cachedTokens)],
            ["Cache write tokens", cacheWrites(g)],
            ["Reasoning tokens", String(g.reasoningTokens)],
            ["Usage", g.usageEstimated ? "estimated by the gateway" : "reported by the upstream"],
          ]}
        />
        <Facts
          items={[
            ["Input cost", usd(g.inputCost)],
            ["Cache read cost", usd(g.cacheReadCost)],
            ["Cache write cost", usd(g.cacheWriteCost)],
            ["Output cost", usd(g.outputCost)],
            ["Total cost", usd(g.totalCost)],
            ["Unbilled", usd(g.unbilledCost ?? 0)],
            ["Cache discount", usd(g.cacheDiscount ?? 0)],
          ]}
        />
      </div>
      {attempts.length === 0 ? (
        <p class="muted">No upstream was tried.</p>
      ) : (
        <table class="attempts">
          <caption>Upstream attempts</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Deployment</th>
              <th scope="col" class="num">HTTP status</th>
              <th scope="col">Error class</th>
              <th scope="col" class="num">Latency</th>
            </tr>
          </thead>
          <tbody>
            {attempts.map((a, i) => (
              <tr>
                <td class="num">{String(i + 1)}</td>
                <td safe>{a.deployment}</td>
                <td class="num">{a.status === null ? "—" : String(a.status)}</td>
                <td safe>{a.error_class ?? (i === attempts.length - 1 && g.status === "success" ? "— (answered)" : "—")}</td>
                <td class="num">{`${a.latency_ms} ms`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export const logsPages: PageModule = (app, deps) => {
  const modelIds = (): string[] => (deps.catalog ? deps.catalog.all().map((m) => m.id).sort() : []);

  async function logsPage(request: Request, viewer: UserViewer): Promise<Response> {
    const url = new URL(request.url);
    let query: LogsQuery;
    try {
      query = parseQuery(url);
    } catch (error) {
      if (!(error instanceof BadQuery)) throw error;
      return badQuery(viewer, error.message);
    }
    const accountId = viewer.account.id;
    const since = query.day === undefined ? undefined : dayStart(query.day);
    const filters: GenerationQuery = {
      limit: PAGE_SIZE + 1,
      keyId: query.key,
      model: query.model,
      status: query.status,
      since,
      until: since === undefined ? undefined : since + DAY_MS,
      before: query.before?.at,
      beforeId: query.before?.id,
    };
    const keys = await deps.store.listKeys(accountId, { limit: KEYS_LISTED });
    if (query.key !== undefined && !keys.some((k) => k.id === query.key) && keys.length < KEYS_LISTED) {
      return badQuery(viewer, "No such key in this account.");
    }
    const found = await deps.store.listGenerations(accountId, filters);
    const rows = found.slice(0, PAGE_SIZE);
    const byId = await keysById(deps, accountId, keys, rows);
    const last = rows.at(-1);
    const older = found.length > PAGE_SIZE && last ? { at: last.createdAt, id: last.id } : undefined;
    const table = <LogTable rows={rows} keys={byId} query={query} older={older} />;
    // htmx swapping the table (filter form, pager) gets only the table; a history restore gets the whole page.
    if (isHtmx(request) && request.headers.get("hx-target") === "log" && request.headers.get("hx-history-restore-request") !== "true") {
      return html(table, { headers: { vary: "hx-request, hx-target" } });
    }
    return html(
      <Layout title="Logs" viewer={viewer} active="logs">
        <Filters query={query} keys={keys} models={modelIds()} />
        {table}
      </Layout>,
      { headers: { vary: "hx-request, hx-target" } },
    );
  }

  function badQuery(viewer: UserViewer, text: string): Promise<Response> {
    return html(
      <Layout title="Logs" viewer={viewer} active="logs">
        <Notice kind="error" text={text} />
        <p>
          <a href="/dashboard/logs">Show the newest requests</a>
        </p>
      </Layout>,
      { status: 400 },
    );
  }

  async function detailPage(request: Request, viewer: UserViewer, id: string): Promise<Response> {
    const accountId = viewer.account.id;
    const g = GENERATION_ID.test(id) ? await deps.store.findGeneration(accountId, id) : null;
    const fragment = isHtmx(request) && /^d-\d+$/.test(request.headers.get("hx-target") ?? "");
    if (g === null) {
      if (fragment) return html(<tr id={request.headers.get("hx-target")!} class="detail-slot"><td colspan={String(COLUMNS)}><Notice kind="error" text="No such request in this account." /></td></tr>, { status: 404 });
      return html(
        <Layout title="Request not found" viewer={viewer} active="logs">
          <Notice kind="error" text="No such request in this account." />
          <p>
            <a href="/dashboard/logs">Back to Logs</a>
          </p>
        </Layout>,
        { status: 404 },
      );
    }
    const key = await deps.store.getKey(g.keyId);
    const name = key && key.accountId === accountId ? keyName(new Map([[key.id, key]]), key.id) : g.keyId;
    if (fragment) {
      return html(
        <tr id={request.headers.get("hx-target")!} class="detail-row">
          <td colspan={String(COLUMNS)}>
            <Detail g={g} keyName={name} />
          </td>
        </tr>,
        { headers: { vary: "hx-request, hx-target" } },
      );
    }
    return html(
      <Layout title="Request detail" viewer={viewer} active="logs">
        <p>
          <a href="/dashboard/logs">Back to Logs</a>
        </p>
        <Detail g={g} keyName={name} />
      </Layout>,
      { headers: { vary: "hx-request, hx-target" } },
    );
  }

  app
    .get("/dashboard/logs", ({ request }) => deps.userPage(request, (viewer) => logsPage(request, viewer)), HIDDEN)
    .get(
      "/dashboard/logs/:id",
      ({ request, params }) => deps.userPage(request, (viewer) => detailPage(request, viewer, decodeParam(params.id))),
      HIDDEN,
    );
};

function decodeParam(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return "";
  }
}
