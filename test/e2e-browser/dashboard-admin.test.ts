import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import type { BrowserContext, Page, Response } from "playwright-core";
import { usdToNano } from "../../src/core/money.ts";
import { ADMIN_TOKEN } from "../helpers/gateway.ts";
import { browserSuite, startDashboardHarness, type DashboardHarness } from "./dashboard-harness.ts";

setDefaultTimeout(60_000);

const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS === "1";
const SCREENSHOT_DIR = resolve(import.meta.dir, "../../docs/screenshots");
/** An account name that is markup: it must show as text, never run. */
const HOSTILE_NAME = `Zephyr Widgets <img src=x onerror=alert(1)> ${crypto.randomUUID().slice(0, 6)}`;
const NEW_USER_PASSWORD = "operator made this 1 password";

/** "$12.50" (the page's money) as exact nano-USD. */
function nanoOf(text: string | null): number {
  const match = /^(-)?\$(\d+\.\d+)$/.exec((text ?? "").trim());
  if (!match) throw new Error(`not a USD figure: ${JSON.stringify(text)}`);
  return (match[1] ? -1 : 1) * usdToNano(match[2]!);
}

describe.skipIf(!browserSuite("dashboard operators"))("dashboard: operators at /dashboard/admin", () => {
  let h: DashboardHarness;
  let operator: { context: BrowserContext; page: Page };
  let accountId: string;
  const dialogs: string[] = [];

  beforeAll(async () => {
    // Loopback is a trusted proxy here, so a browser context can speak for another client address (X-Forwarded-For):
    // the per-address sign-in limit is tested on one address without locking out the others.
    h = await startDashboardHarness({ env: { TRUSTED_PROXIES: "127.0.0.1, ::1" } });
  }, 60_000);

  afterAll(async () => {
    await h?.stop();
  });

  function watch(page: Page): Page {
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    return page;
  }

  /** Submits the page's form by clicking `button` and returns the answer to that POST. */
  async function submit(page: Page, button: string): Promise<Response> {
    // The navigation too: waitForLoadState alone may answer for the old page, whose alert a locator would then read.
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === "POST" && r.request().isNavigationRequest()),
      page.waitForNavigation({ waitUntil: "domcontentloaded" }),
      page.getByRole("button", { name: button, exact: true }).click(),
    ]);
    return response;
  }

  async function apiBalance(id: string): Promise<number> {
    const answer = await h.t.admin("GET", `/admin/v1/accounts/${id}`);
    expect(answer.status).toBe(200);
    return usdToNano(answer.body.data.balance);
  }

  async function pageBalance(page: Page): Promise<number> {
    return nanoOf(await page.getByTestId("balance").textContent());
  }

  it("refuses a wrong admin token (401) and limits failed attempts per client address (the 6th is 429, even with the right token)", async () => {
    const { page } = await h.anonymous();
    watch(page);
    await page.setExtraHTTPHeaders({ "x-forwarded-for": "203.0.113.77" });
    await page.goto("/dashboard/admin/sign-in");
    expect(await page.getByLabel("Admin token").getAttribute("type")).toBe("password");
    for (let attempt = 1; attempt <= 5; attempt++) {
      await page.getByLabel("Admin token").fill(`wrong-token-${attempt}`);
      const answer = await submit(page, "Sign in");
      expect(answer.status()).toBe(401);
      await expect(page.getByRole("alert").textContent()).resolves.toContain("Wrong admin token");
    }
    await page.getByLabel("Admin token").fill(ADMIN_TOKEN);
    const limited = await submit(page, "Sign in");
    expect(limited.status()).toBe(429);
    expect(Number(await limited.headerValue("retry-after"))).toBeGreaterThan(0);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("Too many sign-in attempts");
    expect(new URL(page.url()).pathname).toBe("/dashboard/admin/sign-in");
  });

  it("refuses a sign-in form posted without its pre-session token (login CSRF)", async () => {
    const { context } = await h.anonymous();
    const answer = await context.request.post("/dashboard/admin/sign-in", { form: { token: ADMIN_TOKEN }, maxRedirects: 0 });
    expect(answer.status()).toBe(403);
    expect(answer.headers()["set-cookie"] ?? "").not.toContain("gw_session=");
  });

  it("signs an operator in with the admin token", async () => {
    operator = await h.anonymous();
    watch(operator.page);
    const { page } = operator;
    await page.goto("/dashboard/admin");
    expect(new URL(page.url()).pathname).toBe("/dashboard/admin/sign-in"); // no session: to the sign-in
    await page.getByLabel("Admin token").fill(ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/dashboard\/admin$/);
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Accounts");
    expect(await page.getByRole("link", { name: "Accounts" }).getAttribute("aria-current")).toBe("page");
  });

  it("finds an account by part of its name; its name shows as text; its page shows the exact balance of GET /admin/v1/accounts/:id", async () => {
    const created = await h.t.admin("POST", "/admin/v1/accounts", { name: HOSTILE_NAME });
    expect(created.status).toBe(201);
    accountId = created.body.data.id;
    expect((await h.t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: "7.123456789", kind: "card", reference: crypto.randomUUID() })).status).toBe(201);
    await h.newAccountUser({ name: "Unrelated Holdings", credit: 6 });

    const { page } = operator;
    await page.goto("/dashboard/admin");
    await page.getByLabel("Search accounts").fill("yr widgets <IMG");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForURL(/\?q=/);
    const link = page.getByRole("link", { name: HOSTILE_NAME, exact: true });
    await link.waitFor();
    expect(await page.locator("tbody tr").count()).toBe(1);
    expect(await page.getByRole("link", { name: "Unrelated Holdings" }).count()).toBe(0);
    expect(await page.locator("main img").count()).toBe(0);
    const row = page.locator("tbody tr").first();
    expect(nanoOf(await row.locator("td").nth(3).textContent())).toBe(usdToNano("7.123456789"));
    expect((await row.locator("td").nth(4).textContent())?.trim()).toBe("0");

    await link.click();
    await page.waitForURL(new RegExp(`/dashboard/admin/accounts/${accountId}$`));
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe(`Account ${HOSTILE_NAME}`);
    expect(await pageBalance(page)).toBe(await apiBalance(accountId));
    expect(await pageBalance(page)).toBe(7_123_456_789);
    expect(nanoOf(await page.getByTestId("total-credits").textContent())).toBe(7_123_456_789);
    expect(nanoOf(await page.getByTestId("total-usage").textContent())).toBe(0);
    expect(await page.locator("main img").count()).toBe(0);
  });

  it("credits through the form by exactly the amount, once per reference; refuses a 3 USD card credit naming the minimum", async () => {
    const { page } = operator;
    await page.goto(`/dashboard/admin/accounts/${accountId}`);
    const before = await pageBalance(page);
    const reference = `inv-${crypto.randomUUID()}`;

    await page.getByLabel("Amount (USD)").fill("12.345678901");
    await page.getByLabel("Kind", { exact: true }).selectOption("card");
    await page.getByLabel("Reference").fill(reference);
    expect((await submit(page, "Credit account")).status()).toBe(303);
    await page.waitForURL(/done=credited/);
    await expect(page.getByRole("status").textContent()).resolves.toBe("Credit added.");
    expect(await pageBalance(page)).toBe(before + 12_345_678_901);
    expect(await apiBalance(accountId)).toBe(before + 12_345_678_901);
    await page.getByRole("cell", { name: reference }).waitFor();

    // The same reference again: nothing added.
    await page.getByLabel("Amount (USD)").fill("12.345678901");
    await page.getByLabel("Kind", { exact: true }).selectOption("card");
    await page.getByLabel("Reference").fill(reference);
    await submit(page, "Credit account");
    await page.waitForURL(/done=duplicate/);
    await expect(page.getByRole("status").textContent()).resolves.toContain("already credited, nothing added");
    expect(await pageBalance(page)).toBe(before + 12_345_678_901);
    expect(await page.getByRole("cell", { name: reference }).count()).toBe(1);

    // Below the card minimum: a 400 page naming it, the values kept.
    await page.getByLabel("Amount (USD)").fill("3");
    await page.getByLabel("Kind", { exact: true }).selectOption("card");
    await page.getByLabel("Reference").fill("too-small-1");
    expect((await submit(page, "Credit account")).status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("minimum card top-up is 5 USD");
    expect(await page.getByLabel("Amount (USD)").inputValue()).toBe("3");
    expect(await page.getByLabel("Reference").inputValue()).toBe("too-small-1");
    expect(await apiBalance(accountId)).toBe(before + 12_345_678_901);

    // Not a number: 400, nothing credited.
    await page.getByLabel("Amount (USD)").fill("12,5");
    await page.getByLabel("Kind", { exact: true }).selectOption("bonus");
    await page.getByLabel("Reference").fill("bad-amount-1");
    expect((await submit(page, "Credit account")).status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("Invalid amount");
    expect(await page.getByLabel("Kind", { exact: true }).inputValue()).toBe("bonus");
    expect(await apiBalance(accountId)).toBe(before + 12_345_678_901);
  });

  it("starts a plan: refused when the balance is short of the price, started when paid by card", async () => {
    const { page } = operator;
    await page.goto(`/dashboard/admin/accounts/${accountId}`);
    const before = await pageBalance(page); // 19.469135690 USD: short of the pro plan's 20
    await page.getByLabel("Plan", { exact: true }).selectOption("pro");
    await page.getByLabel("Funding", { exact: true }).selectOption("balance");
    const refused = await submit(page, "Start plan");
    expect(refused.status()).toBeGreaterThanOrEqual(400);
    expect(refused.status()).toBeLessThan(500);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("The plan costs $20 and the available balance is $19.46913569");
    expect(await pageBalance(page)).toBe(before);

    await page.getByLabel("Plan", { exact: true }).selectOption("pro");
    await page.getByLabel("Funding", { exact: true }).selectOption("card");
    await submit(page, "Start plan");
    await page.waitForURL(/done=plan/);
    await expect(page.getByRole("status").textContent()).resolves.toBe("Plan started.");
    await expect(page.locator("dl.facts").textContent()).resolves.toContain("pro, funded by card");
    expect(await pageBalance(page)).toBe(before + 5_000_000_000); // the plan's bonus credit
    expect(await apiBalance(accountId)).toBe(before + 5_000_000_000);
  });

  it("adds a user through the form who can then sign in at /dashboard/sign-in; a user's session never opens operator pages", async () => {
    const { page } = operator;
    await page.goto(`/dashboard/admin/accounts/${accountId}`);
    const email = `Added-${crypto.randomUUID().slice(0, 8)}@Example.com`;
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill("short");
    await page.getByLabel("Role", { exact: true }).selectOption("member");
    // The browser's own check (minlength) would stop a short password: post it as a script would.
    await page.locator("form[action$='/users'] input[name=password]").evaluate((input) => input.removeAttribute("minlength"));
    expect((await submit(page, "Add user")).status()).toBe(400);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("Password must be 10 to 256 characters");
    expect(await page.getByLabel("Email").inputValue()).toBe(email);
    expect(await page.getByLabel("Role", { exact: true }).inputValue()).toBe("member");

    await page.getByLabel("Password").fill(NEW_USER_PASSWORD);
    await submit(page, "Add user");
    await page.waitForURL(/done=user/);
    await page.getByRole("cell", { name: email.toLowerCase(), exact: true }).waitFor();
    const listed = await h.t.admin("GET", `/admin/v1/accounts/${accountId}/users`);
    expect(listed.body.data).toEqual([expect.objectContaining({ email: email.toLowerCase(), role: "member" })]);

    // The same email again: 409, nothing added.
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(NEW_USER_PASSWORD);
    expect((await submit(page, "Add user")).status()).toBe(409);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("already exists");

    const user = await h.signedIn(email.toLowerCase(), NEW_USER_PASSWORD);
    watch(user.page);
    await user.page.goto("/dashboard/admin");
    expect(new URL(user.page.url()).pathname).toBe("/dashboard/admin/sign-in");
    await user.page.goto(`/dashboard/admin/accounts/${accountId}`);
    expect(new URL(user.page.url()).pathname).toBe("/dashboard/admin/sign-in");
    // The user's session with its own CSRF token still cannot post an operator form.
    const before = await apiBalance(accountId);
    const csrf = JSON.parse((await user.page.locator("body").getAttribute("hx-headers")) ?? "{}")["x-csrf-token"] as string | undefined;
    const posted = await user.context.request.post(`/dashboard/admin/accounts/${accountId}/credit`, {
      form: { _csrf: csrf ?? "", amount: "50", kind: "bonus", reference: "user-tried" },
      maxRedirects: 0,
    });
    expect(posted.status()).toBe(303);
    expect(posted.headers().location).toBe("/dashboard/admin/sign-in");
    expect(await apiBalance(accountId)).toBe(before);

    // And an operator's session never opens an account's pages.
    await page.goto("/dashboard/keys");
    expect(new URL(page.url()).pathname).not.toBe("/dashboard/keys");
    expect(new URL(page.url()).pathname).toBe("/dashboard/admin");
  });

  it("refuses an operator POST without the CSRF token (403) and takes it with the token", async () => {
    const { page, context } = operator;
    await page.goto(`/dashboard/admin/accounts/${accountId}`);
    const before = await apiBalance(accountId);
    const form = { amount: "1.5", kind: "bonus", reference: `csrf-${crypto.randomUUID()}` };
    const refused = await context.request.post(`/dashboard/admin/accounts/${accountId}/credit`, { form, maxRedirects: 0 });
    expect(refused.status()).toBe(403);
    expect(await refused.text()).toContain("CSRF");
    const forged = await context.request.post(`/dashboard/admin/accounts/${accountId}/credit`, { form: { ...form, _csrf: "x".repeat(64) }, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    expect(await apiBalance(accountId)).toBe(before);

    const csrf = (await page.locator("form[action$='/credit'] input[name=_csrf]").getAttribute("value")) ?? "";
    const taken = await context.request.post(`/dashboard/admin/accounts/${accountId}/credit`, { form: { ...form, _csrf: csrf }, maxRedirects: 0 });
    expect(taken.status()).toBe(303);
    expect(await apiBalance(accountId)).toBe(before + 1_500_000_000);
  });

  it("takes the screenshots (DASHBOARD_SCREENSHOTS=1)", async () => {
    if (!SCREENSHOTS) return;
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    const { page } = operator;
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto("/dashboard/admin");
    await page.screenshot({ path: resolve(SCREENSHOT_DIR, "admin-accounts.png"), fullPage: true });
    await page.goto(`/dashboard/admin/accounts/${accountId}`);
    await page.screenshot({ path: resolve(SCREENSHOT_DIR, "admin-account.png"), fullPage: true });
  });

  it("answers 404 for an unknown account and pages the accounts list with Older", async () => {
    const { page } = operator;
    const missing = await page.goto("/dashboard/admin/accounts/acct_nope");
    expect(missing?.status()).toBe(404);
    await expect(page.getByRole("alert").textContent()).resolves.toContain("No such account");

    // More accounts than a page holds: "Older" shows the rest, none twice.
    const prefix = `Paging ${crypto.randomUUID().slice(0, 6)}`;
    for (let index = 0; index < 52; index++) expect((await h.t.admin("POST", "/admin/v1/accounts", { name: `${prefix} ${index}` })).status).toBe(201);
    await page.goto(`/dashboard/admin?q=${encodeURIComponent(prefix)}`);
    const first = await page.locator("tbody tr td:first-child").allTextContents();
    expect(first).toHaveLength(50);
    expect(first[0]).toBe(`${prefix} 51`);
    await page.getByRole("link", { name: "Older" }).click();
    await page.waitForURL(/before=/);
    const second = await page.locator("tbody tr td:first-child").allTextContents();
    expect(second).toEqual([`${prefix} 1`, `${prefix} 0`]);
    expect(await page.getByRole("link", { name: "Older" }).count()).toBe(0);
  });

  it("signs out: the session is revoked", async () => {
    const { page, context } = operator;
    await page.goto("/dashboard/admin");
    const cookie = (await context.cookies()).find((c) => c.name === "gw_session")?.value;
    expect(cookie).toBeDefined();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/dashboard\/admin\/sign-in$/);
    await page.goto("/dashboard/admin");
    expect(new URL(page.url()).pathname).toBe("/dashboard/admin/sign-in");
    // The old cookie, replayed, opens nothing either.
    const replayed = await fetch(`${h.t.url}/dashboard/admin`, { headers: { cookie: `gw_session=${cookie}` }, redirect: "manual" });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get("location")).toBe("/dashboard/admin/sign-in");
  });

  it("loaded nothing from outside the gateway and raised no dialog", () => {
    expect(h.offsite).toEqual([]);
    expect(dialogs).toEqual([]);
  });
});
