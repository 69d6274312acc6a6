import { describe, it } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/** Debian's chromium package (apt-get install -y chromium); CHROMIUM_PATH names another build. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const HAVE_CHROMIUM = existsSync(CHROMIUM);
const CI = process.env.CI === "true";

/**
 * Guards a browser suite: without Chromium it is skipped with a printed reason, except under CI=true where a
 * test fails instead (.ci/run installs Chromium). Use as `describe.skipIf(!browserSuite("name"))(...)`.
 */
export function browserSuite(name: string): boolean {
  if (HAVE_CHROMIUM) return true;
  if (CI) {
    describe(`${name} (CI)`, () => {
      it("has Chromium to run with", () => {
        throw new Error(`CI=true and no Chromium at ${CHROMIUM}: .ci/run installs Debian's chromium package`);
      });
    });
  } else {
    console.warn(`\n[e2e-browser] ******** SKIPPED ${name}: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH) ********\n`);
  }
  return false;
}

export const USER_PASSWORD = "correct horse battery staple";

export interface DashboardHarness {
  t: TestGateway;
  browser: Browser;
  /** A new account (credited `credit` USD by card unless 0: at least 5, the card minimum) with one user; returns what signs in. */
  newAccountUser(options?: { credit?: number; role?: "owner" | "member"; name?: string }): Promise<{ accountId: string; email: string; password: string }>;
  /** Another user on an existing account. */
  addUser(accountId: string, role?: "owner" | "member"): Promise<{ email: string; password: string }>;
  /** A fresh browser context (own cookies) with one page, signed in as the user. Requests leaving the gateway fail the test (see `offsite`). */
  signedIn(email: string, password?: string): Promise<{ context: BrowserContext; page: Page }>;
  /** A fresh context and page, not signed in. */
  anonymous(): Promise<{ context: BrowserContext; page: Page }>;
  /** URLs requested outside the gateway by any page of this harness (must stay empty: every asset is served by the gateway). */
  offsite: string[];
  stop(): Promise<void>;
}

let sequence = 0;

/** A gateway (SQLite, the fake upstream) and a headless Chromium whose pages can reach only the gateway. */
export async function startDashboardHarness(options: { env?: Record<string, string> } = {}): Promise<DashboardHarness> {
  const t = await startTestGateway({ env: options.env });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const origin = new URL(t.url).origin;
  const offsite: string[] = [];
  const contexts: BrowserContext[] = [];

  async function newContext(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ baseURL: t.url });
    contexts.push(context);
    await context.route("**/*", (route) => {
      const url = route.request().url();
      if (url.startsWith(origin)) return route.continue();
      offsite.push(url);
      return route.abort();
    });
    return { context, page: await context.newPage() };
  }

  async function addUser(accountId: string, role: "owner" | "member" = "owner") {
    const email = `user${++sequence}-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email, password: USER_PASSWORD, role });
    if (created.status !== 201) throw new Error(`user: ${created.status} ${JSON.stringify(created.body)}`);
    return { email, password: USER_PASSWORD };
  }

  return {
    t,
    browser,
    offsite,
    async newAccountUser({ credit = 10, role = "owner", name = "Acme test account" } = {}) {
      const account = await t.admin("POST", "/admin/v1/accounts", { name });
      if (account.status !== 201) throw new Error(`account: ${JSON.stringify(account.body)}`);
      const accountId = account.body.data.id as string;
      if (credit > 0) {
        const credited = await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: credit, kind: "card", reference: crypto.randomUUID() });
        if (credited.status !== 201) throw new Error(`credit: ${JSON.stringify(credited.body)}`);
      }
      return { accountId, ...(await addUser(accountId, role)) };
    },
    addUser,
    async signedIn(email, password = USER_PASSWORD) {
      const { context, page } = await newContext();
      await page.goto("/dashboard/sign-in");
      await page.getByLabel("Email").fill(email);
      await page.getByLabel("Password").fill(password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(/\/dashboard\/keys$/);
      return { context, page };
    },
    anonymous: newContext,
    async stop() {
      for (const context of contexts) await context.close().catch(() => {});
      await browser?.close();
      await t?.stop();
    },
  };
}
