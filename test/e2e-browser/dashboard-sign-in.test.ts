import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import type { Page } from "playwright-core";
import { browserSuite, startDashboardHarness, USER_PASSWORD, type DashboardHarness } from "./dashboard-harness.ts";

setDefaultTimeout(60_000);

/**
 * Presses "Sign in" and waits until the answer's page has replaced the form (the URL stays the same, so waiting
 * for the URL would return at once, and a locator could still read the old page); resolves with its status.
 */
async function submit(page: Page): Promise<number> {
  const [response] = await Promise.all([
    page.waitForResponse((response) => response.request().method() === "POST"),
    page.waitForNavigation({ waitUntil: "domcontentloaded" }),
    page.getByRole("button", { name: "Sign in" }).click(),
  ]);
  return response.status();
}

describe.skipIf(!browserSuite("the dashboard's sign-in in Chromium"))("dashboard sign-in in headless Chromium", () => {
  let h: DashboardHarness;

  beforeAll(async () => {
    h = await startDashboardHarness();
  });
  afterAll(() => h?.stop());

  it("signs in by the labelled fields, shows the navigation, and signs out for good", async () => {
    const { email } = await h.newAccountUser();
    const { page } = await h.signedIn(email);
    const nav = page.getByRole("navigation", { name: "Main" });
    for (const name of ["Keys", "Logs", "Usage", "Billing", "Route proof"]) await expect(nav.getByRole("link", { name }).count()).resolves.toBe(1);
    await nav.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/dashboard\/sign-in$/);
    await page.goto("/dashboard/keys");
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    expect(h.offsite).toEqual([]);
  });

  it("refuses a wrong password, then rate-limits that email even for the right one", async () => {
    const { email } = await h.newAccountUser();
    const { page } = await h.anonymous();
    await page.goto("/dashboard/sign-in");
    for (let attempt = 0; attempt < 5; attempt++) {
      await page.getByLabel("Email").fill(email);
      await page.getByLabel("Password").fill(`wrong password ${attempt}`);
      expect(await submit(page)).toBe(401);
      expect(await page.getByRole("alert").textContent()).toBe("Wrong email or password.");
    }
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(USER_PASSWORD);
    expect(await submit(page)).toBe(429);
    expect(await page.getByRole("alert").textContent()).toMatch(/^Too many sign-in attempts\. Try again in \d+ minutes?\.$/);
    expect(new URL(page.url()).pathname).toBe("/dashboard/sign-in");
    // Another user is not locked out by it.
    const other = await h.newAccountUser();
    await h.signedIn(other.email);
    expect(h.offsite).toEqual([]);
  });
});
