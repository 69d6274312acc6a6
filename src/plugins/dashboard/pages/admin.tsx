import { ConflictError, GatewayError, InvalidRequestError, NotFoundError } from "../../../core/errors.ts";
import { usdToNano } from "../../../core/money.ts";
import { IPV6_CLIENT_PREFIX, addressGroup } from "../../../core/client-ip.ts";
import { creditAccount } from "../../admin/credit.ts";
import { ID_PATTERN } from "../../admin/schema.ts";
import { checkPassword, checkRole, newUser, normalizeEmail } from "../../auth/users.ts";
import { storeCall } from "../../storage/http-errors.ts";
import { CREDIT_KINDS, USER_ROLES, type Account, type PlanCycle } from "../../storage/repository.ts";
import { HIDDEN, type Form, type OperatorViewer, type PageModule } from "../deps.ts";
import { CsrfField, Layout, Notice } from "../layout.tsx";
import { preSessionAccepted, signedIn } from "../pre-session.ts";
import { preSessionPage } from "../pre-session-page.tsx";
import { field, html, redirect, usd } from "../web.ts";

/** Accounts per page of the operators' list (each row reads its totals and users: kept small). */
const PAGE_SIZE = 50;
/** Ledger entries shown on an account's page. */
const LEDGER_ROWS = 20;
/** Keys counted on an account's page before "or more". */
const KEYS_COUNTED = 10_000;
/** An admin token longer than this is not compared (the real one is far shorter). */
const TOKEN_MAX = 1_000;
const SEARCH_MAX = 200;

const ID = new RegExp(ID_PATTERN);
// Names are printable: no control characters, no unpaired surrogates (the admin API's PRINTABLE, for a search).
const PRINTABLE = /^(?:[^\u0000-\u001f\u007f\ud800-\udfff]|[\ud800-\udbff][\udc00-\udfff])*$/;

/** Confirmations after a redirect, by a fixed code (no text travels in the URL). */
const DONE: Record<string, string> = {
  credited: "Credit added.",
  duplicate: "This reference was already credited, nothing added.",
  plan: "Plan started.",
  user: "User added: they can sign in at /dashboard/sign-in.",
};

/** Form values kept when a form on an account's page is refused. */
interface Kept {
  credit?: { amount: string; kind: string; reference: string };
  plan?: { plan: string; funding: string };
  user?: { email: string; role: string };
}

interface Shown {
  status?: number;
  notice?: { kind: "error" | "ok"; text: string };
  kept?: Kept;
}

/**
 * The operators' pages at /dashboard/admin (never under /admin/, which the admin plugin guards with the bearer
 * token): sign-in with the admin token, accounts (search, balance, users), an account's page with its ledger,
 * and the forms that credit it (the admin API's rules: admin/credit.ts), start a plan and add a user.
 */
export const adminPages: PageModule = (app, deps) => {
  const { store, sessions } = deps;

  // ---- sign-in and sign-out ------------------------------------------------------------------------------

  function signInForm(request: Request, notice?: { status: number; text: string }): Promise<Response> {
    return preSessionPage(request, deps.config.secure_cookie, {
      title: "Operator sign-in",
      action: "/dashboard/admin/sign-in",
      submit: "Sign in",
      notice,
      fields: (
        <label>
          Admin token
          <input type="password" name="token" autocomplete="current-password" required maxlength={String(TOKEN_MAX)} />
        </label>
      ),
      after: (
        <p class="muted">
          People of an account: <a href="/dashboard/sign-in">sign in with email and password</a>.
        </p>
      ),
    });
  }

  app
    .get(
      "/dashboard/admin/sign-in",
      async ({ request }) => ((await sessions.viewer(request).catch(() => null))?.kind === "operator" ? redirect("/dashboard/admin") : signInForm(request)),
      HIDDEN,
    )
    .post(
      "/dashboard/admin/sign-in",
      async ({ request, body }) => {
        const form = body as Form;
        const token = typeof form?.token === "string" ? form.token : "";
        if (!preSessionAccepted(request, form)) {
          return signInForm(request, { status: 403, text: "This form has expired or came from another site. Try again." });
        }
        const ip = deps.gateway.clientIp(request);
        // Failures are counted per client address (a shared count would let anyone lock the operators out).
        const failures = "admin-token:" + addressGroup(ip, IPV6_CLIENT_PREFIX);
        const wait = await deps.counters.admitSignIn("operators", ip, failures);
        if (wait > 0) {
          const minutes = Math.ceil(wait / 60);
          const response = await signInForm(request, { status: 429, text: `Too many sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.` });
          response.headers.set("retry-after", String(wait));
          return response;
        }
        if (!deps.admin) return signInForm(request, { status: 503, text: "Operator sign-in needs the admin plugin, which is not enabled." });
        if (token.length === 0 || token.length > TOKEN_MAX || !deps.admin.tokenMatches(token)) {
          deps.counters.failedSignIn("operators", failures);
          deps.log.warn("dashboard operator sign-in refused", { ip });
          return signInForm(request, { status: 401, text: "Wrong admin token." });
        }
        deps.log.info("dashboard operator signed in", { ip });
        return signedIn(sessions, request, null, "/dashboard/admin", deps.config.secure_cookie);
      },
      HIDDEN,
    )
    .post(
      "/dashboard/admin/sign-out",
      ({ request, body }) =>
        deps.operatorAction(request, body as Form, async () => redirect("/dashboard/admin/sign-in", { "set-cookie": await sessions.revoke(request) })),
      HIDDEN,
    );

  // ---- accounts --------------------------------------------------------------------------------------------

  async function accountsPage(request: Request, viewer: OperatorViewer): Promise<Response> {
    const params = new URL(request.url).searchParams;
    const q = (params.get("q") ?? "").trim();
    const before = params.get("before") ?? "";
    let problem: string | undefined;
    if (q.length > SEARCH_MAX || !PRINTABLE.test(q)) problem = `A search is at most ${SEARCH_MAX} characters, without control characters.`;
    let start: { before?: number; beforeId?: string } = {};
    if (!problem && before !== "") {
      const last = ID.test(before) ? await store.getAccount(before) : null;
      if (last) start = { before: last.createdAt, beforeId: last.id };
      else problem = "This page link is no longer valid: start from the newest accounts.";
    }
    const rows = problem ? [] : await store.listAccounts({ limit: PAGE_SIZE + 1, q: q === "" ? undefined : q, ...start });
    const more = rows.length > PAGE_SIZE;
    const shown = more ? rows.slice(0, PAGE_SIZE) : rows;
    const details = await Promise.all(
      shown.map(async (account) => {
        const [totals, users] = await Promise.all([store.accountTotals(account.id), store.listUsers(account.id)]);
        return { account, balance: totals.balance, users: users.length };
      }),
    );
    const older = more ? `/dashboard/admin?${new URLSearchParams({ ...(q ? { q } : {}), before: shown[shown.length - 1]!.id })}` : undefined;
    const newest = before !== "" ? `/dashboard/admin${q ? `?${new URLSearchParams({ q })}` : ""}` : undefined;

    return html(
      <Layout title="Accounts" viewer={viewer} active="accounts">
        {problem ? <Notice kind="error" text={problem} /> : ""}
        <form method="get" action="/dashboard/admin" class="row" role="search">
          <label>
            Search accounts
            <input type="search" name="q" value={q} maxlength={String(SEARCH_MAX)} placeholder="name or id" />
          </label>
          <button type="submit">Search</button>
        </form>
        <table>
          <caption class="muted table-note">{q ? <>Accounts whose name or id contains “<span safe>{q}</span>”, newest first</> : "Every account, newest first"}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">ID</th>
              <th scope="col">Created</th>
              <th scope="col" class="num">
                Balance
              </th>
              <th scope="col" class="num">
                Users
              </th>
            </tr>
          </thead>
          <tbody>
            {details.length === 0 ? (
              <tr>
                <td colspan="5" class="muted">
                  {q ? "No account matches." : "No accounts yet."}
                </td>
              </tr>
            ) : (
              details.map(({ account, balance, users }) => (
                <tr>
                  <td>
                    <a href={accountPath(account.id)} safe>
                      {account.name}
                    </a>
                  </td>
                  <td>
                    <code safe>{account.id}</code>
                  </td>
                  <td safe>{when(account.createdAt)}</td>
                  <td class="num" safe>
                    {usd(balance)}
                  </td>
                  <td class="num">{String(users)}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>
        <p class="pager">
          {newest ? <a href={newest}>Newest</a> : ""}
          {older ? <a href={older}>Older</a> : ""}
        </p>
      </Layout>,
      { status: problem ? 400 : 200 },
    );
  }

  app.get("/dashboard/admin", ({ request }) => deps.operatorPage(request, (viewer) => accountsPage(request, viewer)), HIDDEN);

  // ---- one account -----------------------------------------------------------------------------------------

  async function existingAccount(id: string): Promise<Account> {
    const account = ID.test(id) ? await store.getAccount(id) : null;
    if (!account) throw new NotFoundError("No such account.");
    return account;
  }

  async function activeKeys(accountId: string): Promise<{ count: number; more: boolean }> {
    let count = 0;
    let start: { before?: number; beforeId?: string } = {};
    for (let seen = 0; seen < KEYS_COUNTED; ) {
      const page = await store.listKeys(accountId, { limit: 500, ...start });
      seen += page.length;
      count += page.filter((key) => key.deletedAt === null).length;
      const last = page[page.length - 1];
      if (page.length < 500 || !last) return { count, more: false };
      start = { before: last.createdAt, beforeId: last.id };
    }
    return { count, more: true };
  }

  async function accountPage(viewer: OperatorViewer, account: Account, shown: Shown = {}): Promise<Response> {
    const [totals, users, ledger, keys, plan] = await Promise.all([
      store.accountTotals(account.id),
      store.listUsers(account.id),
      store.listLedgerEntries(account.id, { limit: LEDGER_ROWS }),
      activeKeys(account.id),
      store.activePlan(account.id, deps.now()),
    ]);
    const kept = shown.kept ?? {};
    const base = accountPath(account.id);
    const plans = deps.budget ? Object.entries(deps.budget.plans) : [];

    return html(
      <Layout title={`Account ${account.name}`} viewer={viewer} active="accounts">
        <p>
          <a href="/dashboard/admin">← Accounts</a>
        </p>
        {shown.notice ? <Notice kind={shown.notice.kind} text={shown.notice.text} /> : ""}
        <dl class="facts" aria-label="Account">
          <dt>Name</dt>
          <dd safe>{account.name}</dd>
          <dt>ID</dt>
          <dd>
            <code safe>{account.id}</code>
          </dd>
          <dt>Created</dt>
          <dd safe>{when(account.createdAt)}</dd>
          <dt>Balance</dt>
          <dd data-testid="balance" safe>
            {usd(totals.balance)}
          </dd>
          <dt>Total credits</dt>
          <dd data-testid="total-credits" safe>
            {usd(totals.credits)}
          </dd>
          <dt>Total usage</dt>
          <dd data-testid="total-usage" safe>
            {usd(totals.debits)}
          </dd>
          <dt>Keys</dt>
          <dd>{`${keys.count}${keys.more ? " or more" : ""} active`}</dd>
          <dt>Plan</dt>
          <dd safe>{planText(plan)}</dd>
        </dl>

        <h2>Users</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {users.length === 0 ? (
              <tr>
                <td colspan="3" class="muted">
                  No users yet.
                </td>
              </tr>
            ) : (
              users.map((user) => (
                <tr>
                  <td safe>{user.email}</td>
                  <td safe>{user.role}</td>
                  <td safe>{when(user.createdAt)}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>

        <h2>Ledger</h2>
        <table>
          <caption class="muted table-note">{`Credits and plan purchases, the ${LEDGER_ROWS} newest (request usage is in the account's logs)`}</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Kind</th>
              <th scope="col" class="num">
                Amount
              </th>
              <th scope="col">Reference</th>
            </tr>
          </thead>
          <tbody>
            {ledger.length === 0 ? (
              <tr>
                <td colspan="4" class="muted">
                  No credits yet.
                </td>
              </tr>
            ) : (
              ledger.map((entry) => (
                <tr>
                  <td safe>{when(entry.createdAt)}</td>
                  <td safe>{entry.kind}</td>
                  <td class="num" safe>
                    {usd(entry.amount)}
                  </td>
                  <td safe>{entry.reference}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>

        <h2 id="credit-heading">Credit account</h2>
        <form method="post" action={`${base}/credit`} class="stack" aria-labelledby="credit-heading">
          <CsrfField viewer={viewer} />
          <label>
            Amount (USD)
            <input name="amount" inputmode="decimal" required maxlength="40" value={kept.credit?.amount ?? ""} placeholder="25.00" />
          </label>
          <div class="field">
            <label for="field-kind">Kind</label>
            <select id="field-kind" name="kind">
              {CREDIT_KINDS.map((kind) => (
                <option value={kind} selected={(kept.credit?.kind ?? "card") === kind}>
                  {kind}
                </option>
              ))}
            </select>
          </div>
          <label>
            Reference
            <input name="reference" required maxlength="200" value={kept.credit?.reference ?? ""} placeholder="payment or voucher id" />
          </label>
          <p class="muted">Minimums: card 5 USD, usdt 12 USD. The same reference credits once.</p>
          <button type="submit">Credit account</button>
        </form>

        <h2 id="plan-heading">Start plan</h2>
        {plans.length === 0 ? (
          <p class="muted">{deps.budget ? "No plans are configured (the budget plugin's plans)." : "Plans need the budget plugin, which is not enabled."}</p>
        ) : (
          <form method="post" action={`${base}/plan`} class="stack" aria-labelledby="plan-heading">
            <CsrfField viewer={viewer} />
            <div class="field">
              <label for="field-plan">Plan</label>
              <select id="field-plan" name="plan">
                {plans.map(([name, config]) => (
                  <option value={name} selected={kept.plan?.plan === name} safe>
                    {`${name} (${usd(usdToNano(config.price))} per 30 days)`}
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="field-funding">Funding</label>
              <select id="field-funding" name="funding">
                <option value="balance" selected={kept.plan?.funding !== "card"}>
                  balance (the price is debited now)
                </option>
                <option value="card" selected={kept.plan?.funding === "card"}>
                  card (paid outside, renews)
                </option>
              </select>
            </div>
            <button type="submit">Start plan</button>
          </form>
        )}

        <h2 id="user-heading">Add user</h2>
        <form method="post" action={`${base}/users`} class="stack" aria-labelledby="user-heading">
          <CsrfField viewer={viewer} />
          <label>
            Email
            <input type="email" name="email" required maxlength="254" autocomplete="off" value={kept.user?.email ?? ""} />
          </label>
          <label>
            Password
            <input type="password" name="password" required minlength="10" maxlength="256" autocomplete="new-password" />
          </label>
          <div class="field">
            <label for="field-role">Role</label>
            <select id="field-role" name="role">
              {USER_ROLES.map((role) => (
                <option value={role} selected={(kept.user?.role ?? "owner") === role}>
                  {role}
                </option>
              ))}
            </select>
          </div>
          <button type="submit">Add user</button>
        </form>
      </Layout>,
      { status: shown.status ?? 200 },
    );
  }

  /** A refusal (a 4xx GatewayError) of a form on an account's page: the page again, the notice on top, the values kept. */
  async function refused(viewer: OperatorViewer, account: Account, error: unknown, kept: Kept): Promise<Response> {
    if (!(error instanceof GatewayError) || error.status >= 500) throw error;
    return accountPage(viewer, account, { status: error.status, notice: { kind: "error", text: sentence(error.message) }, kept });
  }

  app
    .get(
      "/dashboard/admin/accounts/:id",
      ({ request, params }) =>
        deps.operatorPage(request, async (viewer) => {
          const account = await existingAccount(params.id);
          const done = DONE[new URL(request.url).searchParams.get("done") ?? ""];
          return accountPage(viewer, account, done ? { notice: { kind: "ok", text: done } } : {});
        }),
      HIDDEN,
    )
    .post(
      "/dashboard/admin/accounts/:id/credit",
      ({ request, params, body }) =>
        deps.operatorAction(request, body as Form, async (viewer, form) => {
          const account = await existingAccount(params.id);
          const credit = { amount: field(form, "amount").slice(0, 64), kind: field(form, "kind"), reference: field(form, "reference") };
          try {
            if (credit.amount === "") throw new InvalidRequestError("Enter the amount in USD.");
            const result = await creditAccount(store, account.id, credit);
            deps.log.info("dashboard operator credit", { account_id: account.id, entry_id: result.entryId, kind: credit.kind, duplicate: result.duplicate });
            return redirect(`${accountPath(account.id)}?done=${result.duplicate ? "duplicate" : "credited"}`);
          } catch (error) {
            return refused(viewer, account, error, { credit: { ...credit, reference: credit.reference.slice(0, 200) } });
          }
        }),
      HIDDEN,
    )
    .post(
      "/dashboard/admin/accounts/:id/plan",
      ({ request, params, body }) =>
        deps.operatorAction(request, body as Form, async (viewer, form) => {
          const account = await existingAccount(params.id);
          const plan = { plan: field(form, "plan").slice(0, 100), funding: field(form, "funding") };
          try {
            if (!deps.budget) throw new InvalidRequestError("Plans need the budget plugin, which is not enabled.");
            if (plan.funding !== "balance" && plan.funding !== "card") throw new InvalidRequestError("Funding must be balance or card.");
            const { cycle } = await deps.budget.buyPlan(account.id, plan.plan, plan.funding);
            deps.log.info("dashboard operator started a plan", { account_id: account.id, plan: cycle.plan, funding: cycle.funding, cycle_id: cycle.id });
            return redirect(`${accountPath(account.id)}?done=plan`);
          } catch (error) {
            return refused(viewer, account, error, { plan });
          }
        }),
      HIDDEN,
    )
    .post(
      "/dashboard/admin/accounts/:id/users",
      ({ request, params, body }) =>
        deps.operatorAction(request, body as Form, async (viewer, form) => {
          const account = await existingAccount(params.id);
          const values = { email: field(form, "email").slice(0, 320), role: field(form, "role") || "owner" };
          const password = typeof form?.password === "string" ? form.password : "";
          try {
            // The cheap checks first (the password is never echoed), then the hash (argon2id is slow on purpose).
            const email = normalizeEmail(values.email);
            checkPassword(password);
            const role = checkRole(values.role);
            if (await store.findUserByEmail(email)) throw new ConflictError("A user with this email already exists.", { param: "email" });
            const user = await storeCall(store.createUser(await newUser({ accountId: account.id, email, password, role })));
            deps.log.info("dashboard operator added a user", { account_id: account.id, user_id: user.id, role });
            return redirect(`${accountPath(account.id)}?done=user`);
          } catch (error) {
            return refused(viewer, account, error, { user: values });
          }
        }),
      HIDDEN,
    );
};

function accountPath(id: string): string {
  return `/dashboard/admin/accounts/${encodeURIComponent(id)}`;
}

/** A time as "2025-01-31 14:05 UTC". */
function when(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

function planText(plan: PlanCycle | null): string {
  if (!plan) return "None";
  return `${plan.plan}, funded by ${plan.funding}, ${when(plan.startedAt)} to ${when(plan.endsAt)}${plan.renewing ? ", renews" : ""}`;
}

/** An API error message as a sentence on a page: capitalized, ending with a full stop. */
function sentence(text: string): string {
  const first = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(first) ? first : first + ".";
}
