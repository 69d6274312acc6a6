import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Page } from "playwright-core";
import { usdToNano } from "../../src/core/money.ts";
import { browserSuite, startDashboardHarness, type DashboardHarness } from "./dashboard-harness.ts";

setDefaultTimeout(60_000);

const DAY_MS = 86_400_000;
const HOSTILE = `<img src=x onerror=alert(1)>`;
const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS === "1" ? resolve(import.meta.dir, "../../docs/screenshots") : undefined;

/** "$1,234.000123456" / "-$20.00" → exact nano-USD. */
function nanoOf(text: string): number {
  const match = /^(-)?\$([\d,]+(?:\.\d+)?)$/.exec(text.trim());
  if (!match) throw new Error(`not a USD amount: "${text}"`);
  const nano = usdToNano(match[2]!.replaceAll(",", ""));
  return match[1] ? -nano : nano;
}

function int(text: string): number {
  return Number(text.trim().replaceAll(",", ""));
}

function dayBefore(day: string, days: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) - days * DAY_MS).toISOString().slice(0, 10);
}

/** Loads `path` counting the requests it makes: exactly one document, no fetch or XHR. */
async function visit(page: Page, path: string): Promise<void> {
  const seen: string[] = [];
  const listener = (request: { resourceType(): string; url(): string }) => {
    if (["document", "fetch", "xhr"].includes(request.resourceType())) seen.push(`${request.resourceType()} ${request.url()}`);
  };
  page.on("request", listener);
  const response = await page.goto(path);
  await page.waitForLoadState("load");
  page.off("request", listener);
  expect(response?.status()).toBe(200);
  expect(seen).toHaveLength(1);
  expect(seen[0]).toStartWith("document ");
}

describe.skipIf(!browserSuite("dashboard usage and billing"))("dashboard: usage and billing", () => {
  let h: DashboardHarness;
  let accountId: string;
  let email: string;
  let key: string;
  let other: { accountId: string; email: string };
  let dialogs = 0;

  async function api(path: string, bearer = key): Promise<any> {
    const response = await fetch(h.t.url + path, { headers: { authorization: `Bearer ${bearer}` } });
    expect(response.status).toBe(200);
    return ((await response.json()) as any).data;
  }

  async function credit(target: string, amount: string, kind: string, reference: string) {
    const answer = await h.t.admin("POST", `/admin/v1/accounts/${target}/credits`, { amount, kind, reference });
    expect(answer.status).toBe(201);
  }

  async function signedIn(as: string): Promise<Page> {
    const { page } = await h.signedIn(as);
    page.on("dialog", (dialog) => {
      dialogs++;
      void dialog.dismiss();
    });
    await page.setViewportSize({ width: 1280, height: 800 });
    return page;
  }

  beforeAll(async () => {
    h = await startDashboardHarness();
    ({ accountId, email } = await h.newAccountUser({ credit: 0, name: "Usage & billing account" }));
    // The plan first (card-funded: its bonus is credited, nothing debited), then the two credits the history must show newest first.
    expect((await h.t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "pro", funding: "card" })).status).toBe(201);
    await Bun.sleep(3); // distinct created_at milliseconds: the order newest first is then the order of these calls
    await credit(accountId, "7.123456789", "card", "card-topup-0001");
    await Bun.sleep(3);
    await credit(accountId, "2.5", "voucher", HOSTILE);
    const created = await h.t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "usage test key" });
    expect(created.status).toBe(201);
    key = created.body.data.key;

    // Traffic on two models through the official SDK, with usage the fake upstream reports exactly.
    const client = h.t.client(key);
    const ask = (model: string, usage: Record<string, number>) =>
      client.chat.completions.create({ model, messages: [{ role: "user", content: `hello [[fake ${JSON.stringify({ usage })}]]` }] });
    await ask("gpt-5.6-luna", { prompt_tokens: 1234, completion_tokens: 567, cached_tokens: 200 });
    await ask("gpt-5.6-luna", { prompt_tokens: 17, completion_tokens: 3 });
    await ask("deepseek-flash", { prompt_tokens: 4321, completion_tokens: 765, cached_tokens: 1000 });

    const b = await h.newAccountUser({ credit: 5, name: "Another account" });
    other = { accountId: b.accountId, email: b.email };
  }, 60_000);

  afterAll(async () => {
    await h?.stop();
  });

  /** The page's window and table, with `/v1/usage` for the same days read around it (reread if a UTC midnight fell in between). */
  async function usageAndReport(page: Page, days: number) {
    for (let attempt = 0; ; attempt++) {
      const before = await api("/v1/usage");
      await visit(page, `/dashboard/usage?days=${days}`);
      const [startDay, endDay] = await page.locator("#usage-window time").evaluateAll((times) => times.map((time) => time.getAttribute("datetime")!));
      const report = await api(`/v1/usage?start_date=${startDay}&end_date=${endDay}`);
      if (report.end_date !== before.end_date && attempt < 2) continue;
      return { startDay: startDay!, endDay: endDay!, report, defaultReport: before };
    }
  }

  async function tableOf(page: Page) {
    const table = page.getByRole("table", { name: "Usage by day and model" });
    const rows = await table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? "")));
    const total = await table.locator("tfoot tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? ""))[0]!);
    return { rows, total };
  }

  for (const days of [7, 30, 92]) {
    it(`Usage for ${days} days: every day and model, the total and the chart's total equal /v1/usage's for the same days`, async () => {
      const page = await signedIn(email);
      const { startDay, endDay, report, defaultReport } = await usageAndReport(page, days);
      expect(dayBefore(endDay, days - 1)).toBe(startDay);
      expect(report.start_date).toBe(startDay);
      expect(report.end_date).toBe(endDay);
      if (days === 30) expect([defaultReport.start_date, defaultReport.end_date]).toEqual([startDay, endDay]); // the API's default window
      expect(await page.getByRole("link", { name: `${days} days` }).getAttribute("aria-current")).toBe("page");

      const { rows, total } = await tableOf(page);
      const expected: string[][] = [];
      for (const day of report.days) {
        for (const [model, counters] of Object.entries(day.models as Record<string, any>)) {
          expected.push([day.date, model, String(counters.requests), String(counters.prompt_tokens), String(counters.completion_tokens), String(counters.cached_tokens), String(usdToNano(counters.cost))]);
        }
      }
      const shown = rows.map(([day, model, requests, prompt, completion, cached, cost]) => [day!, model!, String(int(requests!)), String(int(prompt!)), String(int(completion!)), String(int(cached!)), String(nanoOf(cost!))]);
      const order = (a: string[], b: string[]) => (a.join("|") < b.join("|") ? -1 : 1);
      expect(shown.sort(order)).toEqual(expected.sort(order));
      expect(new Set(shown.map((row) => row[1])).size).toBe(2); // two models
      expect(shown.length).toBeGreaterThanOrEqual(2);

      // The total row: requests, tokens and cost of the report's total, the cost exact to the nano-dollar.
      const [requests, prompt, completion, cached, cost] = total;
      expect(int(requests!)).toBe(report.total.requests);
      expect(int(prompt!)).toBe(report.total.prompt_tokens);
      expect(int(completion!)).toBe(report.total.completion_tokens);
      expect(int(cached!)).toBe(report.total.cached_tokens);
      expect(nanoOf(cost!)).toBe(usdToNano(report.total.cost));
      expect(report.total.requests).toBe(3);
      expect(report.total.cost).toBeGreaterThan(0);

      // The chart: a figure with a caption, the svg an image whose name states the same total.
      const chart = page.getByRole("img", { name: /^Daily cost by model/ });
      const label = (await chart.getAttribute("aria-label"))!;
      expect(label).toContain(`${startDay} to ${endDay} (UTC)`);
      expect(/total (\$[\d,.]+)/.exec(label)![1]).toBe(cost!.trim());
      expect(await page.locator("figure.chart figcaption").textContent()).toContain(cost!.trim());
      expect(await page.locator("figure.chart svg[role=img] rect").count()).toBe(shown.length); // one segment per day and model
      expect(await page.getByRole("list", { name: "Models" }).getByRole("listitem").allTextContents()).toEqual(expect.arrayContaining(["gpt-5.6-luna", "deepseek-flash"]));

      if (SCREENSHOTS && days === 30) {
        mkdirSync(SCREENSHOTS, { recursive: true });
        await page.screenshot({ path: join(SCREENSHOTS, "usage.png"), fullPage: true });
      }
      await page.context().close();
    });
  }

  it("Usage: the window links work as plain links; an unknown window is the 30-day default", async () => {
    const page = await signedIn(email);
    await visit(page, "/dashboard/usage?days=5");
    expect(await page.getByRole("link", { name: "30 days" }).getAttribute("aria-current")).toBe("page");
    await page.getByRole("link", { name: "7 days" }).click();
    await page.waitForURL(/days=7$/);
    expect(await page.getByRole("link", { name: "7 days" }).getAttribute("aria-current")).toBe("page");
    await page.context().close();
  });

  it("Billing: balance, total credits and total usage are /v1/credits' to the nano-dollar; the history newest first; the plan's windows are the budget's", async () => {
    const page = await signedIn(email);
    const credits = await api("/v1/credits");
    await visit(page, "/dashboard/billing");
    const facts = await page.locator('dl[aria-label="Balance"]').evaluate((dl) => {
      const out: Record<string, string> = {};
      for (const dt of dl.querySelectorAll("dt")) out[dt.textContent!.trim()] = (dt.nextElementSibling?.textContent ?? "").trim();
      return out;
    });
    expect(nanoOf(facts["Balance"]!)).toBe(usdToNano(credits.balance));
    expect(nanoOf(facts["Total credits"]!)).toBe(usdToNano(credits.total_credits));
    expect(nanoOf(facts["Total usage"]!)).toBe(usdToNano(credits.total_usage));
    expect(usdToNano(credits.total_credits)).toBe(usdToNano("7.123456789") + usdToNano("2.5") + usdToNano(5)); // the two credits and the plan's bonus
    expect(credits.total_usage).toBeGreaterThan(0);

    // The history: both credits, newest first, with kind, exact amount and reference (the hostile one as text).
    const history = page.getByRole("table", { name: "Credit history" });
    const rows = await history.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? "")));
    expect(rows[0]!.slice(1)).toEqual(["voucher", "$2.50", HOSTILE]);
    expect(rows[1]!.slice(1)).toEqual(["card", "$7.123456789", "card-topup-0001"]);
    expect(rows[0]![0]).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    expect(rows.length).toBeGreaterThanOrEqual(3); // the plan's entries before them
    expect(await page.locator("main img").count()).toBe(0);
    expect(dialogs).toBe(0);

    // The plan and its windows: cap and spent or held as GET /admin/v1/accounts/:id/funds answers (nothing in flight now).
    const funds = (await h.t.admin("GET", `/admin/v1/accounts/${accountId}/funds`)).body.data;
    const windows = await page.getByRole("table", { name: "Spend windows" }).locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? "")));
    expect(windows.map((row) => row[0])).toEqual(["4 hours (rolling)", "7 days (rolling)", "Calendar month (UTC)"]);
    const names = ["four_hours", "week", "month"];
    windows.forEach((row, index) => {
      const window = funds.windows[names[index]!];
      expect(nanoOf(row[2]!)).toBe(usdToNano(window.spent_or_held));
      expect(nanoOf(row[3]!)).toBe(usdToNano(window.cap));
    });
    expect(usdToNano(funds.windows.four_hours.spent_or_held)).toBe(usdToNano(credits.total_usage)); // every request so far is in the 4-hour window
    expect(await page.locator('dl[aria-label="Plan"]').textContent()).toContain("pro");
    expect(await page.getByText("Top-ups: ask your operator").count()).toBe(1);

    if (SCREENSHOTS) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, "billing.png"), fullPage: true });
    }
    await page.context().close();
  });

  it("Billing: the history pages by keyset, 50 a page", async () => {
    const { accountId: many, email: manyEmail } = await h.newAccountUser({ credit: 0, name: "Many credits" });
    for (let i = 0; i < 52; i++) await credit(many, "0.01", "bonus", `bonus-${String(i).padStart(3, "0")}`);
    const page = await signedIn(manyEmail);
    await visit(page, "/dashboard/billing");
    const references = async () =>
      page.getByRole("table", { name: "Credit history" }).locator("tbody tr td:nth-child(4)").allTextContents();
    const first = await references();
    expect(first).toHaveLength(50);
    await page.getByRole("link", { name: "Older entries" }).click();
    await page.waitForURL(/before_id=/);
    const second = await references();
    expect(second).toHaveLength(2);
    expect(new Set([...first, ...second]).size).toBe(52);
    expect(await page.getByRole("link", { name: "Older entries" }).count()).toBe(0);
    await page.context().close();
  });

  it("another account's user sees none of it; no request left the gateway", async () => {
    const page = await signedIn(other.email);
    await visit(page, "/dashboard/usage?days=92");
    expect(await page.getByText("No usage in these 92 days.").count()).toBe(1);
    expect(await page.getByRole("table", { name: "Usage by day and model" }).count()).toBe(0);
    expect(await page.getByRole("img", { name: /Daily cost/ }).count()).toBe(0);

    await visit(page, "/dashboard/billing");
    const body = (await page.locator("main").textContent())!;
    expect(body).not.toContain("card-topup-0001");
    expect(body).not.toContain("7.123456789");
    const facts = await page.locator('dl[aria-label="Balance"] dd').allTextContents();
    expect(facts.slice(0, 3)).toEqual(["$5.00", "$5.00", "$0.00"]);
    expect(body).toContain("No plan");
    // Signed out: both pages send to the sign-in page.
    const { page: anonymous } = await h.anonymous();
    for (const path of ["/dashboard/usage", "/dashboard/billing"]) {
      await anonymous.goto(path);
      expect(new URL(anonymous.url()).pathname).toBe("/dashboard/sign-in");
    }
    expect(h.offsite).toEqual([]);
    expect(dialogs).toBe(0);
  });
});
