import { InvalidRequestError, NotFoundError } from "../../../core/errors.ts";
import { usdToNano, type NanoUsd } from "../../../core/money.ts";
import { parseTimestamp } from "../../admin/timestamp.ts";
import { MAX_AMOUNT_USD, MAX_RATE_LIMIT, PRINTABLE } from "../../admin/schema.ts";
import { generateApiKey, hashApiKey, maskApiKey } from "../../auth/keys.ts";
import { RecordConflictError } from "../../storage/errors.ts";
import { asHttpError } from "../../storage/http-errors.ts";
import type { ApiKey, NewApiKey } from "../../storage/repository.ts";
import { HIDDEN, type DashboardDeps, type Form, type PageModule, type UserViewer } from "../deps.ts";
import { CsrfField, Layout, Notice } from "../layout.tsx";
import { randomToken, sha256 } from "../session.ts";
import { field, html, redirect, usd } from "../web.ts";

/** Keys shown on one page (each costs two small reads: its spend and its newest request). */
export const KEYS_PER_PAGE = 100;
/** listKeys returns deleted keys too: at most this many batches are scanned for one page of live ones. */
const MAX_BATCHES = 10;
const DAY_MS = 86_400_000;
const PRINTABLE_TEXT = new RegExp(PRINTABLE);

/** The create form's fields as typed (kept on a refusal). */
interface KeyForm {
  /** The form's one-time id (hidden): the key's id is derived from it, so a re-sent form (a reload) creates nothing. */
  formId: string;
  name: string;
  budget: string;
  models: string;
  rpm: string;
  tpm: string;
  expires: string;
}

const EMPTY_FORM: Omit<KeyForm, "formId"> = { name: "", budget: "", models: "", rpm: "", tpm: "", expires: "" };
const FORM_ID = /^[A-Za-z0-9_-]{22,64}$/;

/** One row of the table: the key and what is derived for it. */
interface KeyRow {
  key: ApiKey;
  spend: NanoUsd;
  lastUsed: number | null;
}

interface Listing {
  rows: KeyRow[];
  /** The cursor of the next (older) page, when there is one. */
  next: { before: number; beforeId: string } | null;
}

/**
 * The Keys page: the account's live keys (label, created, last used, spend / limit, models, rate limits,
 * expiry); owners create keys (the full key shown once, in the creation answer only) and delete them (a
 * deleted key answers 401 at once: the auth cache forgets it).
 */
export const keysPages: PageModule = (app, deps) => {
  app
    .get("/dashboard/keys", ({ request }) => deps.userPage(request, async (viewer) =>
        keysPage(deps, viewer, {
          cursor: cursorOf(request),
          deletedName: new URL(request.url).searchParams.get("deleted")?.slice(0, 200),
          resent: new URL(request.url).searchParams.get("resent") === "1",
        }),
      ), HIDDEN)
    .post(
      "/dashboard/keys",
      ({ request, body }) => deps.userAction(request, body as Form, (viewer, form) => createKey(deps, viewer, form), "owner"),
      HIDDEN,
    )
    .post(
      "/dashboard/keys/:id/delete",
      ({ request, params, body }) => deps.userAction(request, body as Form, (viewer, form) => deleteKey(deps, viewer, params.id, form), "owner"),
      HIDDEN,
    );
};

/** The keyset cursor of `?before=<created ms>&beforeId=<key id>` (both or neither). */
function cursorOf(request: Request): { before: number; beforeId: string } | undefined {
  const query = new URL(request.url).searchParams;
  const before = query.get("before");
  const beforeId = query.get("beforeId");
  if (before === null && beforeId === null) return undefined;
  if (before === null || beforeId === null || !/^\d{1,15}$/.test(before) || beforeId.length === 0 || beforeId.length > 200) {
    throw new InvalidRequestError("This page link is broken: open the Keys page from the navigation.");
  }
  return { before: Number(before), beforeId };
}

/** One page of the account's live keys, newest first, with each key's spend and last use. */
async function listLiveKeys(deps: DashboardDeps, accountId: string, cursor: { before: number; beforeId: string } | undefined): Promise<Listing> {
  const live: ApiKey[] = [];
  let start = cursor;
  let exhausted = false;
  let lastScanned: ApiKey | undefined;
  scan: for (let batch = 0; batch < MAX_BATCHES; batch++) {
    const keys = await deps.store.listKeys(accountId, { limit: KEYS_PER_PAGE + 1, ...start });
    for (const key of keys) {
      lastScanned = key;
      if (key.deletedAt === null) live.push(key);
      if (live.length > KEYS_PER_PAGE) break scan; // one more than a page: there is a next page
    }
    if (keys.length <= KEYS_PER_PAGE || !lastScanned) {
      exhausted = true;
      break;
    }
    start = { before: lastScanned.createdAt, beforeId: lastScanned.id };
  }
  let next: Listing["next"] = null;
  if (live.length > KEYS_PER_PAGE) {
    live.length = KEYS_PER_PAGE;
    const last = live[KEYS_PER_PAGE - 1]!;
    next = { before: last.createdAt, beforeId: last.id };
  } else if (!exhausted && lastScanned) {
    // Many deleted keys in a row: this page ends early and the next one goes on from where the scan stopped.
    next = { before: lastScanned.createdAt, beforeId: lastScanned.id };
  }
  const rows = await Promise.all(
    live.map(async (key): Promise<KeyRow> => {
      const [spend, newest] = await Promise.all([deps.store.keyUsage(key.id), deps.store.listGenerations(accountId, { limit: 1, keyId: key.id })]);
      return { key, spend, lastUsed: newest[0]?.createdAt ?? null };
    }),
  );
  return { rows, next };
}

async function keysPage(
  deps: DashboardDeps,
  viewer: UserViewer,
  options: {
    cursor?: { before: number; beforeId: string };
    status?: number;
    error?: string;
    form?: KeyForm;
    created?: { key: ApiKey; secret: string };
    /** The name of a key just deleted (from ?deleted=, after the redirect). */
    deletedName?: string;
    /** The create form came again (a reload of its answer): its key exists and is not shown again. */
    resent?: boolean;
  },
): Promise<Response> {
  const listing = await listLiveKeys(deps, viewer.account.id, options.cursor);
  const owner = viewer.user.role === "owner";
  return html(
    <Layout title="Keys" viewer={viewer} active="keys">
      {options.error ? <Notice kind="error" text={options.error} /> : ""}
      {options.resent ? (
        <Notice
          kind="ok"
          text="This form was already sent: its key was created then and shown only that once. If you did not copy it, delete it and create another."
        />
      ) : (
        ""
      )}
      {options.deletedName ? <Notice kind="ok" text={`Key ${options.deletedName} deleted: it no longer works.`} /> : ""}
      {options.created ? <NewKey name={options.created.key.name} secret={options.created.secret} /> : ""}
      <KeyTable rows={listing.rows} viewer={viewer} owner={owner} />
      {options.cursor || listing.next ? (
        <p class="pager">
          {options.cursor ? <a href="/dashboard/keys">Newest keys</a> : ""}
          {listing.next ? (
            <a href={`/dashboard/keys?before=${listing.next.before}&beforeId=${encodeURIComponent(listing.next.beforeId)}`}>Older keys</a>
          ) : (
            ""
          )}
        </p>
      ) : (
        ""
      )}
      {owner ? (
        <CreateForm
          viewer={viewer}
          values={!options.created && options.form ? options.form : { ...EMPTY_FORM, formId: randomToken(16) }}
          models={chatModels(deps)}
        />
      ) : (
        <p class="muted">Only an owner of the account can create or delete keys.</p>
      )}
    </Layout>,
    { status: options.status ?? 200 },
  );
}

function NewKey(props: { name: string; secret: string }): JSX.Element {
  return (
    <section class="created">
      <Notice kind="ok" text={`Key "${props.name}" created. Copy it now: it is shown only this once and cannot be shown again.`} />
      <label for="new-key">New key</label>
      <div class="newkey">
        <input id="new-key" type="text" readonly value={props.secret} autocomplete="off" spellcheck="false" />
        <button type="button" data-copy="new-key">
          Copy
        </button>
      </div>
    </section>
  );
}

function KeyTable(props: { rows: KeyRow[]; viewer: UserViewer; owner: boolean }): JSX.Element {
  if (props.rows.length === 0) return <p class="muted">No keys yet.</p>;
  return (
    <table class="keys">
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Created</th>
          <th scope="col">Last used</th>
          <th scope="col" class="num">
            Spend / limit
          </th>
          <th scope="col">Models</th>
          <th scope="col">Rate limits</th>
          <th scope="col">Expires</th>
          {props.owner ? (
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          ) : (
            ""
          )}
        </tr>
      </thead>
      <tbody>
        {props.rows.map(({ key, spend, lastUsed }) => (
          <tr>
            <td>
              <span class="key-name" safe>
                {key.name}
              </span>
              <br />
              <code class="muted" safe>
                {key.label}
              </code>
            </td>
            <td>
              <When at={key.createdAt} />
            </td>
            <td>{lastUsed === null ? <span class="muted">never</span> : <When at={lastUsed} />}</td>
            <td class="num spend" safe>
              {`${usd(spend)} / ${key.limit === null ? "no limit" : usd(key.limit)}`}
            </td>
            <td safe>{key.models === null ? "all" : key.models.join(", ")}</td>
            <td safe>{rateLimits(key)}</td>
            <td>{key.expiresAt === null ? <span class="muted">never</span> : <Expiry at={key.expiresAt} />}</td>
            {props.owner ? (
              <td>
                <form
                  method="post"
                  action={`/dashboard/keys/${encodeURIComponent(key.id)}/delete`}
                  class="inline"
                  data-confirm={`Delete key ${key.name}? Programs using it stop working at once.`}
                >
                  <CsrfField viewer={props.viewer} />
                  <button type="submit" class="danger">
                    Delete
                  </button>
                </form>
              </td>
            ) : (
              ""
            )}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function CreateForm(props: { viewer: UserViewer; values: KeyForm; models: string[] }): JSX.Element {
  const v = props.values;
  return (
    <>
      <h2>Create a key</h2>
      <form method="post" action="/dashboard/keys" class="stack">
        <CsrfField viewer={props.viewer} />
        <input type="hidden" name="form_id" value={v.formId} />
        <label>
          Name
          <input name="name" required maxlength="200" value={v.name} />
        </label>
        <label>
          Budget (USD)
          <input name="budget" inputmode="decimal" pattern="\d+(\.\d{1,9})?" value={v.budget} aria-describedby="budget-hint" />
        </label>
        <small id="budget-hint" class="muted">
          Optional: the most this key may spend, e.g. 5 or 0.25. Empty: only the account's balance limits it.
        </small>
        <label>
          Models
          <input name="models" value={v.models} aria-describedby="models-hint" />
        </label>
        <small id="models-hint" class="muted">
          Optional: the model ids this key may call, separated by commas. Empty: every model.
        </small>
        {props.models.length > 0 ? (
          <details class="model-ids">
            <summary>Chat model ids</summary>
            <code safe>{props.models.join(", ")}</code>
          </details>
        ) : (
          ""
        )}
        <label>
          Requests per minute
          <input name="rpm" type="number" min="1" max={String(MAX_RATE_LIMIT)} step="1" value={v.rpm} />
        </label>
        <label>
          Tokens per minute
          <input name="tpm" type="number" min="1" max={String(MAX_RATE_LIMIT)} step="1" value={v.tpm} />
        </label>
        <small class="muted">Empty rate limits: the account's defaults.</small>
        <label>
          Expires
          <input name="expires" type="date" value={v.expires} aria-describedby="expires-hint" />
        </label>
        <small id="expires-hint" class="muted">
          Optional: the key stops working at the end of this day (UTC).
        </small>
        <button type="submit">Create key</button>
      </form>
    </>
  );
}

function When(props: { at: number }): JSX.Element {
  const iso = new Date(props.at).toISOString();
  return (
    <time datetime={iso} title={iso}>
      {`${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`}
    </time>
  );
}

/** A key made here expires at the midnight UTC after its day: shown as that day's end; any other time to the minute. */
function Expiry(props: { at: number }): JSX.Element {
  if (props.at % DAY_MS !== 0) return <When at={props.at} />;
  const iso = new Date(props.at).toISOString();
  return (
    <time datetime={iso} title={iso}>
      {`${new Date(props.at - DAY_MS).toISOString().slice(0, 10)} (end of day UTC)`}
    </time>
  );
}

function rateLimits(key: ApiKey): string {
  if (key.requestsPerMinute === null && key.tokensPerMinute === null) return "account default";
  const rpm = key.requestsPerMinute === null ? "default" : key.requestsPerMinute.toLocaleString("en-US");
  const tpm = key.tokensPerMinute === null ? "default" : key.tokensPerMinute.toLocaleString("en-US");
  return `${rpm} RPM / ${tpm} TPM`;
}

function chatModels(deps: DashboardDeps): string[] {
  return deps.catalog ? deps.catalog.all().filter((model) => model.kind === "chat").map((model) => model.id) : [];
}

function formOf(form: Form): KeyForm {
  const formId = field(form, "form_id");
  return {
    formId: FORM_ID.test(formId) ? formId : randomToken(16),
    name: field(form, "name").slice(0, 400),
    budget: field(form, "budget").slice(0, 60),
    models: field(form, "models").slice(0, 20_000),
    rpm: field(form, "rpm").slice(0, 30),
    tpm: field(form, "tpm").slice(0, 30),
    expires: field(form, "expires").slice(0, 30),
  };
}

/** The same rules as POST /admin/v1/accounts/:id/keys, for the form's text fields; throws InvalidRequestError. */
function validated(deps: DashboardDeps, accountId: string, form: KeyForm): Omit<NewApiKey, "id" | "keyHash" | "label"> {
  if (form.name === "") throw new InvalidRequestError("Give the key a name.");
  if (form.name.length > 200 || !PRINTABLE_TEXT.test(form.name)) {
    throw new InvalidRequestError("The name must be 1 to 200 characters, without control characters.");
  }
  let limit: NanoUsd | null = null;
  if (form.budget !== "") {
    const bad = `Budget (USD) must be a positive amount of at most ${MAX_AMOUNT_USD} with at most 9 decimals, e.g. 5 or 0.25.`;
    if (!/^\d+(\.\d+)?$/.test(form.budget) || Number(form.budget) > MAX_AMOUNT_USD) throw new InvalidRequestError(bad);
    try {
      limit = usdToNano(form.budget);
    } catch {
      throw new InvalidRequestError(bad);
    }
    if (limit <= 0) throw new InvalidRequestError(bad);
  }
  let models: string[] | null = null;
  const ids = [...new Set(form.models.split(/[\s,]+/).filter((id) => id !== ""))];
  if (ids.length > 0) {
    if (ids.length > 1000) throw new InvalidRequestError("Models: at most 1000 model ids.");
    const malformed = ids.find((id) => id.length > 200 || !PRINTABLE_TEXT.test(id));
    if (malformed !== undefined) throw new InvalidRequestError("Models: each model id is 1 to 200 characters, without control characters.");
    const unknown = deps.catalog ? ids.filter((id) => !deps.catalog!.get(id)) : [];
    if (unknown.length > 0) {
      const listed = unknown.slice(0, 10).join(", ") + (unknown.length > 10 ? ` and ${unknown.length - 10} more` : "");
      throw new InvalidRequestError(`Unknown model ids in Models: ${listed}.`);
    }
    models = ids;
  }
  const requestsPerMinute = rate(form.rpm, "Requests per minute");
  const tokensPerMinute = rate(form.tpm, "Tokens per minute");
  let expiresAt: number | null = null;
  if (form.expires !== "") {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(form.expires)) throw new InvalidRequestError("Expires must be a day (YYYY-MM-DD).");
    // The end of that day, UTC: the key answers until midnight UTC after it.
    expiresAt = parseTimestamp(form.expires, "Expires") + DAY_MS;
    if (expiresAt <= deps.now()) throw new InvalidRequestError("Expires must be today or a later day (UTC): that day is over.");
  }
  return { accountId, name: form.name, limit, models, requestsPerMinute, tokensPerMinute, expiresAt };
}

function rate(value: string, label: string): number | null {
  if (value === "") return null;
  const n = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 1 && n <= MAX_RATE_LIMIT)) throw new InvalidRequestError(`${label} must be a whole number from 1 to ${MAX_RATE_LIMIT}, or empty.`);
  return n;
}

async function createKey(deps: DashboardDeps, viewer: UserViewer, raw: Form): Promise<Response> {
  const form = formOf(raw);
  let fields;
  try {
    fields = validated(deps, viewer.account.id, form);
  } catch (error) {
    if (error instanceof InvalidRequestError) return keysPage(deps, viewer, { status: 400, error: error.message, form });
    throw error;
  }
  const secret = generateApiKey();
  // The id comes from the form's one-time id (per account): a form sent twice (a reload of the answer re-posts
  // it) finds its key made and creates no second one; the id has the admin API's shape (key_ + 24 hex).
  const id = "key_" + sha256(`dashboard-key:${viewer.account.id}:${form.formId}`).slice(0, 24);
  const resent = async () => (await deps.store.getKey(id))?.accountId === viewer.account.id;
  // Looked up first: SQLite's createKey reports a taken primary key as a raw SQLiteError, not a RecordConflictError.
  if (await resent()) return redirect("/dashboard/keys?resent=1");
  let key: ApiKey;
  try {
    key = await deps.store.createKey({ id, keyHash: hashApiKey(secret), label: maskApiKey(secret), ...fields });
  } catch (error) {
    if (error instanceof RecordConflictError && (await resent())) return redirect("/dashboard/keys?resent=1");
    throw asHttpError(error);
  }
  deps.log.info("dashboard key created", { account_id: viewer.account.id, user_id: viewer.user.id, key_id: key.id });
  // Answered directly (never a redirect): the only time the full key exists outside the caller. no-store (html()).
  return keysPage(deps, viewer, { status: 201, created: { key, secret } });
}

async function deleteKey(deps: DashboardDeps, viewer: UserViewer, id: string, form: Form): Promise<Response> {
  const key = id.length <= 200 ? await deps.store.getKey(id) : null;
  // Another account's key reads exactly like an unknown one.
  if (!key || key.accountId !== viewer.account.id || key.deletedAt !== null) throw new NotFoundError("There is no such key in this account.");
  if (field(form, "confirmed") !== "yes") return confirmPage(viewer, key);
  const gone = await deps.store.deleteKey(key.id);
  if (!gone) throw new NotFoundError("There is no such key in this account.");
  await deps.auth.forget(gone.keyHash);
  deps.log.info("dashboard key deleted", { account_id: viewer.account.id, user_id: viewer.user.id, key_id: gone.id });
  return redirect(`/dashboard/keys?deleted=${encodeURIComponent(gone.name)}`);
}

/** Without JavaScript (no window.confirm): the question as a page, whose button posts again with confirmed=yes. */
function confirmPage(viewer: UserViewer, key: ApiKey): Promise<Response> {
  return html(
    <Layout title="Delete key?" viewer={viewer} active="keys">
      <p safe>{`Delete key ${key.name} (${key.label})? Programs using it stop working at once.`}</p>
      <form method="post" action={`/dashboard/keys/${encodeURIComponent(key.id)}/delete`} class="row">
        <CsrfField viewer={viewer} />
        <input type="hidden" name="confirmed" value="yes" />
        <button type="submit" class="danger">
          Delete
        </button>
        <a href="/dashboard/keys">Cancel</a>
      </form>
    </Layout>,
  );
}
