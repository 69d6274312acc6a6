import { GatewayError, NotFoundError } from "../../../core/errors.ts";
import { usdToNano, type NanoUsd } from "../../../core/money.ts";
import type { BudgetService, FundsView } from "../../budget/index.ts";
import { creditsView } from "../../cost-api/views.ts";
import type { PaymentsService } from "../../payments/processor.ts";
import { METHOD_LABELS } from "../../payments/service.ts";
import { microToDecimal } from "../../payments/views.ts";
import type { LedgerEntry, PlanCycle, Topup, TopupMethod } from "../../storage/repository.ts";
import { HIDDEN, type DashboardDeps, type Form, type PageModule, type UserViewer } from "../deps.ts";
import { CsrfField, Layout, Notice } from "../layout.tsx";
import { field, html, redirect, usd } from "../web.ts";

/** The account's newest top-ups shown on the Billing page. */
const TOPUPS_SHOWN = 20;
const TOPUP_ID = /^tu_[0-9a-f]{24}$/;

const PAGE_SIZE = 50;
/** A ledger entry id in a cursor: what the store issues (letters, digits, _ and -). */
const ENTRY_ID = /^[A-Za-z0-9_-]{1,100}$/;

/** A USD figure of an API answer (the nearest double to an exact nano-USD amount) back to its exact amount. */
function exact(usdNumber: number): string {
  return usd(usdToNano(usdNumber));
}

/** A time as the page shows it: UTC to the second, the full ISO time in `datetime`. */
function Time(props: { ms: number }): JSX.Element {
  const iso = new Date(props.ms).toISOString();
  return (
    <time datetime={iso} safe>
      {iso.slice(0, 19).replace("T", " ") + " UTC"}
    </time>
  );
}

const WINDOW_NAMES: Record<string, string> = { four_hours: "4 hours (rolling)", week: "7 days (rolling)" };

function windowName(name: string, month: "calendar" | "rolling" | undefined): string {
  if (name === "month") return month === "rolling" ? "30 days (rolling)" : "Calendar month (UTC)";
  return WINDOW_NAMES[name] ?? name;
}

/** The plan in force and its spend windows (cap, spent or held now) as the budget enforces them. */
function PlanSection(props: { cycle: PlanCycle | null; budget: BudgetService | undefined; funds: FundsView | undefined }): JSX.Element {
  const { cycle, budget, funds } = props;
  if (!cycle) {
    return (
      <p>
        No plan: requests are paid from the balance as they go.
        {budget && Object.keys(budget.plans).length > 0 ? ` Plans offered: ${Object.keys(budget.plans).join(", ")} (ask your operator).` : ""}
      </p>
    );
  }
  const config = budget?.plans[cycle.plan];
  const windows = Object.entries(funds?.windows ?? {});
  return (
    <>
      <dl class="facts" aria-label="Plan">
        <dt>Plan</dt>
        <dd safe>{cycle.plan}</dd>
        <dt>Price</dt>
        <dd>{usd(cycle.price) + " per 30 days"}</dd>
        <dt>Paid by</dt>
        <dd safe>{cycle.funding === "card" ? "card (renews)" : cycle.renewing ? `${cycle.funding} (renews)` : `${cycle.funding} (does not renew)`}</dd>
        <dt>Cycle</dt>
        <dd>
          <Time ms={cycle.startedAt} /> to <Time ms={cycle.endsAt} />
        </dd>
      </dl>
      {windows.length === 0 ? (
        <p class="muted">{config ? "This plan has no spend windows." : "This plan is no longer configured: its windows are not enforced."}</p>
      ) : (
        <table aria-label="Spend windows">
          <thead>
            <tr>
              <th scope="col">Window</th>
              <th scope="col">Since</th>
              <th scope="col" class="num">Spent or held</th>
              <th scope="col" class="num">Cap</th>
              <th scope="col" class="num">Left</th>
            </tr>
          </thead>
          <tbody>
            {windows.map(([name, window]) => {
              const cap = usdToNano(window.cap);
              const spent = usdToNano(window.spent_or_held);
              return (
                <tr>
                  <td safe>{windowName(name, config?.month)}</td>
                  <td>
                    <Time ms={Date.parse(window.start)} />
                  </td>
                  <td class="num">{usd(spent)}</td>
                  <td class="num">{usd(cap)}</td>
                  <td class="num">{usd(Math.max(0, cap - spent))}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}

/** The credit history: credits and plan purchases, newest first, 50 a page, by keyset. */
function History(props: { entries: LedgerEntry[]; next: LedgerEntry | undefined; paged: boolean }): JSX.Element {
  if (props.entries.length === 0) return <p class="notice">{props.paged ? "No older entries." : "No credits yet."}</p>;
  return (
    <>
      <table aria-label="Credit history">
        <thead>
          <tr>
            <th scope="col">Time (UTC)</th>
            <th scope="col">Kind</th>
            <th scope="col" class="num">Amount (USD)</th>
            <th scope="col">Reference</th>
          </tr>
        </thead>
        <tbody>
          {props.entries.map((entry) => (
            <tr>
              <td>
                <Time ms={entry.createdAt} />
              </td>
              <td safe>{entry.kind}</td>
              <td class="num">{usd(entry.amount)}</td>
              <td safe>{entry.reference}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <nav class="pager" aria-label="Credit history pages">
        {props.paged ? <a href="/dashboard/billing#history">Newest entries</a> : ""}
        {props.next ? <a href={`/dashboard/billing?before=${props.next.createdAt}&before_id=${encodeURIComponent(props.next.id)}#history`}>Older entries</a> : ""}
      </nav>
    </>
  );
}

/** The cursor of the history's page (none, or both parts well formed: anything else is the first page). */
function cursorOf(query: Record<string, string | undefined>): { before?: number; beforeId?: string } {
  const before = Number(query.before);
  const beforeId = query.before_id;
  if (!Number.isSafeInteger(before) || before < 0 || typeof beforeId !== "string" || !ENTRY_ID.test(beforeId)) return {};
  return { before, beforeId };
}

/** The top-up form's fields as typed (kept on a refusal). */
interface TopupForm {
  amount: string;
  method: string;
}

/** "Top up": the form when a processor is configured (owners only), else the operator's way. */
function TopupSection(props: { viewer: UserViewer; payments: PaymentsService | undefined; form?: TopupForm }): JSX.Element {
  const methods = props.payments?.methods() ?? [];
  if (methods.length === 0) return <p>Top-ups: ask your operator. No payment method is configured on this gateway.</p>;
  if (props.viewer.user.role !== "owner") return <p>Only an account owner can top up. Minimums: {minimums(methods)}.</p>;
  return (
    <form method="post" action="/dashboard/billing/topups" class="stack" aria-labelledby="topup-heading">
      <CsrfField viewer={props.viewer} />
      <label>
        Amount (USD)
        <input name="amount" inputmode="decimal" required maxlength="20" pattern="\d+(\.\d{1,2})?" value={props.form?.amount ?? ""} placeholder="20.00" />
      </label>
      <div class="field">
        <label for="field-method">Method</label>
        <select id="field-method" name="method">
          {methods.map(({ method, minimumUsd }) => (
            <option value={method} selected={props.form?.method === method} safe>
              {`${METHOD_LABELS[method]} (minimum ${minimumUsd} USD)`}
            </option>
          ))}
        </select>
      </div>
      <p class="muted">Whole cents, at most 100,000 USD. The amount is credited once the payment is confirmed.</p>
      <button type="submit">Top up</button>
    </form>
  );
}

function minimums(methods: { method: TopupMethod; minimumUsd: number }[]): string {
  return methods.map(({ method, minimumUsd }) => `${METHOD_LABELS[method]} ${minimumUsd} USD`).join(", ");
}

/** The account's newest top-ups, each linking to its page. */
function TopupTable(props: { topups: Topup[] }): JSX.Element {
  if (props.topups.length === 0) return "";
  return (
    <table aria-label="Top-ups">
      <thead>
        <tr>
          <th scope="col">Time (UTC)</th>
          <th scope="col">Method</th>
          <th scope="col" class="num">Amount (USD)</th>
          <th scope="col">Status</th>
          <th scope="col">Flag</th>
        </tr>
      </thead>
      <tbody>
        {props.topups.map((topup) => (
          <tr>
            <td>
              <a href={`/dashboard/billing/topups/${topup.id}`}>
                <Time ms={topup.createdAt} />
              </a>
            </td>
            <td safe>{METHOD_LABELS[topup.method]}</td>
            <td class="num">{usd(topup.amount)}</td>
            <td safe>{topup.status}</td>
            <td safe>{topup.flag ?? ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** GET /dashboard/billing/topups/:id: where and what to pay (USDT: the exact amount), and the status. */
function topupPage(viewer: UserViewer, topup: Topup): Promise<Response> {
  const pending = topup.status === "pending";
  return html(
    <Layout title="Top-up" viewer={viewer} active="billing">
      <dl class="facts" aria-label="Top-up">
        <dt>Top-up</dt>
        <dd safe>{topup.id}</dd>
        <dt>Method</dt>
        <dd safe>{METHOD_LABELS[topup.method]}</dd>
        <dt>Amount</dt>
        <dd>{usd(topup.amount)}</dd>
        <dt>Status</dt>
        <dd safe>{topup.status}</dd>
        <dt>Created</dt>
        <dd>
          <Time ms={topup.createdAt} />
        </dd>
        {topup.expiresAt !== null ? (
          <>
            <dt>{pending ? "Expires" : "Expiry"}</dt>
            <dd>
              <Time ms={topup.expiresAt} />
            </dd>
          </>
        ) : (
          ""
        )}
        {topup.flag ? (
          <>
            <dt>Flag</dt>
            <dd safe>{topup.flag}</dd>
          </>
        ) : (
          ""
        )}
        {topup.takenBack > 0 ? (
          <>
            <dt>Taken back</dt>
            <dd>{usd(topup.takenBack)}</dd>
          </>
        ) : (
          ""
        )}
      </dl>
      {topup.method === "usdt" && topup.payAmountMicro !== null ? (
        <>
          <h2>Send exactly</h2>
          <dl class="facts" aria-label="Payment">
            <dt>Amount</dt>
            <dd>
              <code safe>{microToDecimal(topup.payAmountMicro)}</code> USDT
            </dd>
            <dt>To</dt>
            <dd>
              <code safe>{topup.payTo ?? ""}</code>
            </dd>
            <dt>Network</dt>
            <dd safe>{topup.network === "tron" ? "tron (TRC-20)" : (topup.network ?? "")}</dd>
            <dt>Token</dt>
            <dd>USDT</dd>
          </dl>
          <p class="muted">
            Send this exact amount, to the last decimal: its last digits identify this top-up. Another amount, another token or a transfer after the expiry is
            not credited automatically (the operator sees it).
          </p>
        </>
      ) : (
        ""
      )}
      {topup.method === "card" && pending && topup.checkoutUrl ? (
        <p>
          <a href={topup.checkoutUrl} rel="noreferrer">
            Pay {usd(topup.amount)} by card
          </a>{" "}
          (Stripe Checkout).
        </p>
      ) : (
        ""
      )}
      {pending ? <p class="muted">Reload this page to see the status: it changes once the payment is confirmed.</p> : ""}
      <p>
        <a href="/dashboard/billing">Back to Billing</a>
      </p>
    </Layout>,
  );
}

/** POST /dashboard/billing/topups: a top-up through the payments plugin; refusals as a notice on the Billing page. */
async function topUp(deps: DashboardDeps, viewer: UserViewer, raw: Form, request: Request): Promise<Response> {
  const form: TopupForm = { amount: field(raw, "amount").slice(0, 40), method: field(raw, "method").slice(0, 20) };
  const payments = deps.payments;
  if (!payments || payments.methods().length === 0) return billingPage(deps, viewer, {}, { status: 400, error: "No payment method is configured on this gateway: ask your operator.", form });
  let topup: Topup;
  try {
    topup = await payments.createTopup(viewer.account.id, form.method as TopupMethod, form.amount, payments.context(request));
  } catch (error) {
    // The refusal (400: amount, minimum, method) or the processor's failure (502/503) next to the form; anything else an error page.
    if (error instanceof GatewayError && error.status !== 500) return billingPage(deps, viewer, {}, { status: error.status, error: error.message, form });
    throw error;
  }
  deps.log.info("dashboard top-up created", { account_id: viewer.account.id, user_id: viewer.user.id, topup_id: topup.id, method: topup.method });
  // Its own page: USDT shows where and what to send; card links to the checkout. (Not a 303 straight to the checkout:
  // the pages' CSP has form-action 'self', and browsers apply it to the redirect that follows a form post.)
  return redirect(`/dashboard/billing/topups/${topup.id}`);
}

/** GET /dashboard/billing: balance and totals (the figures of GET /v1/credits), the plan and its windows, the credit history. */
export const billingPages: PageModule = (app, deps) => {
  app
    .get("/dashboard/billing", ({ request, query }) => deps.userPage(request, (viewer) => billingPage(deps, viewer, query as Record<string, string | undefined>)), HIDDEN)
    .post(
      "/dashboard/billing/topups",
      ({ request, body }) => deps.userAction(request, body as Form, (viewer, form) => topUp(deps, viewer, form, request), "owner"),
      HIDDEN,
    )
    .get(
      "/dashboard/billing/topups/:id",
      ({ request, params }) =>
        deps.userPage(request, async (viewer) => {
          const topup = TOPUP_ID.test(params.id) ? await deps.store.getTopup(params.id) : null;
          // Another account's top-up reads exactly like an unknown one.
          if (!topup || topup.accountId !== viewer.account.id) throw new NotFoundError("There is no such top-up in this account.");
          return topupPage(viewer, topup);
        }),
      HIDDEN,
    );
};

/** The Billing page; `refused`: a top-up form sent back with why (a notice) and its status. */
async function billingPage(
  deps: DashboardDeps,
  viewer: UserViewer,
  query: Record<string, string | undefined>,
  refused?: { status: number; error: string; form: TopupForm },
): Promise<Response> {
  const accountId = viewer.account.id;
  const budget = deps.budget; // without the budget plugin: the plan without its windows
  const cursor = cursorOf(query);
  const [totals, page, cycle, funds, topups] = await Promise.all([
    deps.store.accountTotals(accountId),
    deps.store.listLedgerEntries(accountId, { limit: PAGE_SIZE + 1, ...cursor }),
    deps.store.activePlan(accountId, deps.now()),
    budget?.funds(accountId),
    deps.payments ? deps.store.listTopups(accountId, { limit: TOPUPS_SHOWN }) : [],
  ]);
  const credits = creditsView(totals); // the answer of GET /v1/credits
  const entries = page.slice(0, PAGE_SIZE);
  const next = page.length > PAGE_SIZE ? entries[entries.length - 1] : undefined;
  const held: NanoUsd | undefined = funds ? usdToNano(funds.held) : undefined;
  return html(
    <Layout title="Billing" viewer={viewer} active="billing">
      <dl class="facts" aria-label="Balance">
        <dt>Balance</dt>
        <dd>{exact(credits.balance)}</dd>
        <dt>Total credits</dt>
        <dd>{exact(credits.total_credits)}</dd>
        <dt>Total usage</dt>
        <dd>{exact(credits.total_usage)}</dd>
        {funds && held !== undefined && held > 0 ? (
          <>
            <dt>Held by requests in flight</dt>
            <dd>{usd(held)}</dd>
          </>
        ) : (
          ""
        )}
      </dl>
      <p class="muted">
        The figures of <code>GET /v1/credits</code>, exact to the nano-dollar. Total usage includes plan purchases paid from the balance.
      </p>
      <h2 id="topup-heading">Top up</h2>
      {refused ? <Notice kind="error" text={refused.error} /> : ""}
      <TopupSection viewer={viewer} payments={deps.payments} form={refused?.form} />
      <TopupTable topups={topups} />
      <h2>Plan</h2>
      <PlanSection cycle={cycle} budget={budget} funds={funds} />
      <h2 id="history">Credit history</h2>
      <History entries={entries} next={next} paged={cursor.before !== undefined} />
    </Layout>,
    { status: refused?.status ?? 200 },
  );
}
