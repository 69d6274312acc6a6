import { usdToNano, type NanoUsd } from "../../../core/money.ts";
import type { BudgetService, FundsView } from "../../budget/index.ts";
import { creditsView } from "../../cost-api/views.ts";
import type { LedgerEntry, PlanCycle } from "../../storage/repository.ts";
import { HIDDEN, type PageModule } from "../deps.ts";
import { Layout } from "../layout.tsx";
import { html } from "../web.ts";
import { usd } from "./usage.tsx";

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

/** GET /dashboard/billing: balance and totals (the figures of GET /v1/credits), the plan and its windows, the credit history. */
export const billingPages: PageModule = (app, deps) => {
  app.get(
    "/dashboard/billing",
    ({ request, query }) =>
      deps.userPage(request, async (viewer) => {
        const accountId = viewer.account.id;
        const budget = deps.budget; // without the budget plugin: the plan without its windows
        const cursor = cursorOf(query as Record<string, string | undefined>);
        const [totals, page, cycle, funds] = await Promise.all([
          deps.store.accountTotals(accountId),
          deps.store.listLedgerEntries(accountId, { limit: PAGE_SIZE + 1, ...cursor }),
          deps.store.activePlan(accountId, deps.now()),
          budget?.funds(accountId),
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
            <h2>Top up</h2>
            <p>Top-ups: ask your operator. Card payments will be offered here once they exist.</p>
            <h2>Plan</h2>
            <PlanSection cycle={cycle} budget={budget} funds={funds} />
            <h2 id="history">Credit history</h2>
            <History entries={entries} next={next} paged={cursor.before !== undefined} />
          </Layout>,
        );
      }),
    HIDDEN,
  );
};
