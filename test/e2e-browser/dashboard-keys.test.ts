import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdirSync } from "node:fs";
import type { Page } from "playwright-core";
import { usdToNano } from "../../src/core/money.ts";
import { browserSuite, startDashboardHarness, type DashboardHarness } from "./dashboard-harness.ts";

// A cold Chromium start under load takes seconds; each test signs in (argon2id) at least once.
setDefaultTimeout(60_000);

const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS === "1";
const HOSTILE = `<img src=x onerror=alert(1)>`;

/** The CSRF token of the page's session (every signed-in page carries it in the sign-out form). */
function csrfOf(page: Page): Promise<string> {
  return page.locator('input[name="_csrf"]').first().inputValue();
}

/** GET /v1/key with a key: status and body. */
async function keyInfo(h: DashboardHarness, key: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${h.t.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, body: await response.json() };
}

async function apiStatus(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (error) {
    return (error as { status?: number }).status ?? -1;
  }
}

/** The account's keys as the admin API lists them (deleted ones included). */
async function adminKeys(h: DashboardHarness, accountId: string): Promise<{ id: string; name: string; deleted_at?: string | null }[]> {
  const listed = await h.t.admin("GET", `/admin/v1/accounts/${accountId}/keys?limit=100`);
  expect(listed.status).toBe(200);
  return listed.body.data;
}

async function createInForm(page: Page, fields: { name: string; budget?: string; models?: string; rpm?: string; tpm?: string; expires?: string }) {
  await page.getByLabel("Name", { exact: true }).fill(fields.name);
  if (fields.budget !== undefined) await page.getByLabel("Budget (USD)").fill(fields.budget);
  if (fields.models !== undefined) await page.getByLabel("Models").fill(fields.models);
  if (fields.rpm !== undefined) await page.getByLabel("Requests per minute").fill(fields.rpm);
  if (fields.tpm !== undefined) await page.getByLabel("Tokens per minute").fill(fields.tpm);
  if (fields.expires !== undefined) await page.getByLabel("Expires").fill(fields.expires);
  // The navigation too: waitForLoadState alone may answer for the old page, whose notice a locator would then read.
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/dashboard/keys"),
    page.waitForNavigation({ waitUntil: "load" }),
    page.getByRole("button", { name: "Create key" }).click(),
  ]);
  return response;
}

describe.skipIf(!browserSuite("dashboard Keys page"))("dashboard Keys page in headless Chromium", () => {
  let h: DashboardHarness;

  beforeAll(async () => {
    h = await startDashboardHarness();
  }, 60_000);
  afterAll(async () => {
    await h?.stop();
  });

  it("an owner creates a key with a budget and an allowlist, sees it once, uses it, sees its spend, deletes it and it answers 401 at once", async () => {
    const owner = await h.newAccountUser({ credit: 10 });
    const { context, page } = await h.signedIn(owner.email);
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(h.t.url).origin });

    const response = await createInForm(page, { name: "ci key", budget: "0.5", models: "gpt-6-luna", rpm: "600", tpm: "100000" });
    expect(response.status()).toBe(201);
    expect(response.headers()["cache-control"]).toBe("no-store");

    const field = page.getByLabel("New key");
    expect(await field.getAttribute("readonly")).not.toBeNull();
    await page.getByRole("button", { name: "Copy" }).click();
    const key = await field.inputValue();
    expect(key).toMatch(/^sk-gw-[A-Za-z0-9]{40}$/);
    expect(await page.evaluate("navigator.clipboard.readText()")).toBe(key);
    if (SCREENSHOTS) {
      mkdirSync("docs/screenshots", { recursive: true });
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.screenshot({ path: "docs/screenshots/keys.png", fullPage: true });
    }

    // The key works for its allowed model and is refused (403) for any other.
    const client = h.t.client(key);
    const answer = await client.chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hello" }] });
    expect(answer.choices.length).toBeGreaterThan(0);
    expect(await apiStatus(client.chat.completions.create({ model: "deepseek-flash", messages: [{ role: "user", content: "hello" }] }))).toBe(403);

    // Shown once. Reloading the creation answer re-sends its form: that creates no second key and shows none.
    await page.reload();
    expect(new URL(page.url()).search).toBe("?resent=1");
    expect(await page.getByRole("status").innerText()).toContain("already sent");
    expect(await page.content()).not.toContain(key);
    expect(await page.getByLabel("New key").count()).toBe(0);
    expect((await adminKeys(h, owner.accountId)).map((k) => k.name)).toEqual(["ci key"]);
    // Nor does a fresh load, a reload of it, or another page.
    await page.goto("/dashboard/keys");
    expect(await page.content()).not.toContain(key);
    expect(await page.getByLabel("New key").count()).toBe(0);
    await page.reload();
    expect(await page.content()).not.toContain(key);
    await page.goto("/dashboard/logs");
    await page.goto("/dashboard/keys");
    expect(await page.content()).not.toContain(key);

    // The row: the label, the allowlist, the rate limits, last used, and the spend equal to GET /v1/key's usage, to the nano-dollar.
    // (Waits until the request is metered, should that ever lag its answer; then the page is read.)
    let info = await keyInfo(h, key);
    for (let tries = 0; info.status === 200 && info.body.data.usage === 0 && tries < 100; tries++) {
      await Bun.sleep(50);
      info = await keyInfo(h, key);
    }
    expect(info.status).toBe(200);
    const usage = info.body.data;
    expect(usage.usage).toBeGreaterThan(0);
    await page.reload();
    const row = page.getByRole("row").filter({ hasText: "ci key" });
    expect(await row.count()).toBe(1);
    const cells = await row.getByRole("cell").allInnerTexts();
    expect(cells[0]).toContain(usage.label);
    expect(cells[2]).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
    const [spend, limit] = cells[3]!.split(" / ");
    expect(spend).toMatch(/^\$\d+\.\d{2,9}$/);
    expect(usdToNano(spend!.slice(1))).toBe(usdToNano(usage.usage));
    expect(limit).toBe("$0.50");
    expect(cells[4]).toBe("gpt-6-luna");
    expect(cells[5]).toBe("600 RPM / 100,000 TPM");
    expect(cells[6]).toBe("never");

    // Delete, confirmed in the dialog: the very next API call is refused 401.
    let question = "";
    page.once("dialog", (dialog) => {
      question = dialog.message();
      void dialog.accept();
    });
    await Promise.all([page.waitForURL(/\/dashboard\/keys\?deleted=/), row.getByRole("button", { name: "Delete" }).click()]);
    expect(question).toBe("Delete key ci key? Programs using it stop working at once.");
    expect(await page.getByRole("status").innerText()).toContain("ci key");
    expect(await page.getByRole("row").filter({ hasText: "ci key" }).count()).toBe(0);
    expect(await apiStatus(client.chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "again" }] }))).toBe(401);
    expect((await keyInfo(h, key)).status).toBe(401);
    await context.close();
  });

  it("a key with an expiry day and no limits shows 'all', 'account default' and the day's end", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const { context, page } = await h.signedIn(owner.email);
    const response = await createInForm(page, { name: "expiring", expires: "2099-12-31" });
    expect(response.status()).toBe(201);
    const cells = await page.getByRole("row").filter({ hasText: "expiring" }).getByRole("cell").allInnerTexts();
    expect(cells[2]).toBe("never");
    expect(cells[3]).toBe("$0.00 / no limit");
    expect(cells[4]).toBe("all");
    expect(cells[5]).toBe("account default");
    expect(cells[6]).toBe("2099-12-31 (end of day UTC)");
    const created = (await adminKeys(h, owner.accountId))[0];
    const key = await h.t.admin("GET", `/admin/v1/accounts/${owner.accountId}/keys`);
    expect(key.body.data[0].expires_at).toMatch(/^2100-01-01T00:00:00/);
    expect(created!.name).toBe("expiring");
    await context.close();
  });

  it("the form refuses an unknown model id or a past day with a 400 notice naming it, keeping the values, and creates nothing", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const { context, page } = await h.signedIn(owner.email);
    let response = await createInForm(page, { name: "typo", budget: "2", models: "gpt-6-luna, gpt-nope-9" });
    expect(response.status()).toBe(400);
    expect(await page.getByRole("alert").innerText()).toContain("gpt-nope-9");
    expect(await page.getByLabel("Name", { exact: true }).inputValue()).toBe("typo");
    expect(await page.getByLabel("Budget (USD)").inputValue()).toBe("2");
    expect(await page.getByLabel("Models").inputValue()).toBe("gpt-6-luna, gpt-nope-9");

    response = await createInForm(page, { name: "typo", models: "gpt-6-luna", expires: "2001-02-03" });
    expect(response.status()).toBe(400);
    expect(await page.getByRole("alert").innerText()).toContain("Expires");
    expect(await page.getByLabel("Expires").inputValue()).toBe("2001-02-03");

    // A budget past 9 decimals (the browser's own pattern check is bypassed: a forged form).
    const forged = await page.request.post("/dashboard/keys", { form: { _csrf: await csrfOf(page), name: "typo", budget: "0.0000000001" } });
    expect(forged.status()).toBe(400);
    expect(await forged.text()).toContain("Budget (USD)");
    expect(await adminKeys(h, owner.accountId)).toEqual([]);
    await context.close();
  });

  it("without JavaScript a delete asks on a page of its own first; only its Delete button deletes", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const made = await h.t.admin("POST", `/admin/v1/accounts/${owner.accountId}/keys`, { name: "no-js key" });
    expect(made.status).toBe(201);
    const { context, page } = await h.signedIn(owner.email);
    const cdp = await context.newCDPSession(page);
    await cdp.send("Emulation.setScriptExecutionDisabled", { value: true });
    await page.goto("/dashboard/keys");

    await Promise.all([
      page.waitForNavigation({ waitUntil: "load" }),
      page.getByRole("row").filter({ hasText: "no-js key" }).getByRole("button", { name: "Delete" }).click(),
    ]);
    expect(await page.getByRole("heading", { level: 1 }).innerText()).toBe("Delete key?");
    expect(await page.locator("main").innerText()).toContain("Delete key no-js key");
    expect((await keyInfo(h, made.body.data.key)).status).toBe(200); // not yet deleted

    await Promise.all([page.waitForURL(/\/dashboard\/keys\?deleted=/), page.getByRole("button", { name: "Delete" }).click()]);
    expect((await keyInfo(h, made.body.data.key)).status).toBe(401);
    await context.close();
  });

  it("a member sees the keys but no create or delete controls, and its forged POSTs (valid CSRF token) are refused 403", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const made = await h.t.admin("POST", `/admin/v1/accounts/${owner.accountId}/keys`, { name: "team key" });
    const member = await h.addUser(owner.accountId, "member");
    const { context, page } = await h.signedIn(member.email);
    expect(await page.getByRole("row").filter({ hasText: "team key" }).count()).toBe(1);
    expect(await page.getByRole("button", { name: "Create key" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Delete" }).count()).toBe(0);
    expect(await page.getByLabel("Name", { exact: true }).count()).toBe(0);

    const csrf = await csrfOf(page);
    const create = await page.request.post("/dashboard/keys", { form: { _csrf: csrf, name: "member key" } });
    expect(create.status()).toBe(403);
    const remove = await page.request.post(`/dashboard/keys/${made.body.data.id}/delete`, { form: { _csrf: csrf, confirmed: "yes" } });
    expect(remove.status()).toBe(403);
    expect((await adminKeys(h, owner.accountId)).map((k) => k.name)).toEqual(["team key"]);
    expect((await keyInfo(h, made.body.data.key)).status).toBe(200);
    await context.close();
  });

  it("a POST without the CSRF token is refused 403 and creates or deletes nothing", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const made = await h.t.admin("POST", `/admin/v1/accounts/${owner.accountId}/keys`, { name: "kept" });
    const { context, page } = await h.signedIn(owner.email);
    const create = await page.request.post("/dashboard/keys", { form: { name: "no token" } });
    expect(create.status()).toBe(403);
    const wrong = await page.request.post("/dashboard/keys", { form: { _csrf: "x".repeat(64), name: "wrong token" } });
    expect(wrong.status()).toBe(403);
    const remove = await page.request.post(`/dashboard/keys/${made.body.data.id}/delete`, { form: { confirmed: "yes" } });
    expect(remove.status()).toBe(403);
    expect((await adminKeys(h, owner.accountId)).map((k) => k.name)).toEqual(["kept"]);
    expect((await keyInfo(h, made.body.data.key)).status).toBe(200);
    await context.close();
  });

  it("a user of another account neither sees this account's keys nor deletes them (404)", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const made = await h.t.admin("POST", `/admin/v1/accounts/${owner.accountId}/keys`, { name: "private key of A" });
    const stranger = await h.newAccountUser({ credit: 5, name: "Other account" });
    const { context, page } = await h.signedIn(stranger.email);
    const content = await page.content();
    expect(content).not.toContain("private key of A");
    expect(content).not.toContain(made.body.data.label);
    expect(content).not.toContain(made.body.data.id);

    const csrf = await csrfOf(page);
    const asked = await page.request.post(`/dashboard/keys/${made.body.data.id}/delete`, { form: { _csrf: csrf } });
    expect(asked.status()).toBe(404);
    expect(await asked.text()).not.toContain("private key of A");
    const remove = await page.request.post(`/dashboard/keys/${made.body.data.id}/delete`, { form: { _csrf: csrf, confirmed: "yes" } });
    expect(remove.status()).toBe(404);
    expect((await keyInfo(h, made.body.data.key)).status).toBe(200);
    expect((await adminKeys(h, owner.accountId)).map((k) => k.name)).toEqual(["private key of A"]);
    await context.close();
  });

  it("a hostile key name is shown as text: in the table, the dialog and the deleted notice", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const { context, page } = await h.signedIn(owner.email);
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    const response = await createInForm(page, { name: HOSTILE });
    expect(response.status()).toBe(201);
    expect(await page.locator("main img").count()).toBe(0);
    expect(await page.getByRole("status").innerText()).toContain(HOSTILE);
    const row = page.getByRole("row").filter({ hasText: HOSTILE });
    expect(await row.count()).toBe(1);
    expect(await row.locator(".key-name").innerText()).toBe(HOSTILE);

    await page.goto("/dashboard/keys");
    await Promise.all([page.waitForURL(/\?deleted=/), page.getByRole("row").filter({ hasText: HOSTILE }).getByRole("button", { name: "Delete" }).click()]);
    expect(dialogs).toEqual([`Delete key ${HOSTILE}? Programs using it stop working at once.`]);
    expect(await page.getByRole("status").innerText()).toContain(HOSTILE);
    expect(await page.locator("img").count()).toBe(0);
    await context.close();
  });

  it("more than 100 live keys are paged (keyset), and deleted keys are never listed", async () => {
    const owner = await h.newAccountUser({ credit: 5 });
    const ids: string[] = [];
    for (let i = 0; i < 103; i++) {
      const made = await h.t.admin("POST", `/admin/v1/accounts/${owner.accountId}/keys`, { name: `bulk ${String(i).padStart(3, "0")}` });
      expect(made.status).toBe(201);
      ids.push(made.body.data.id);
    }
    expect((await h.t.admin("DELETE", `/admin/v1/keys/${ids[50]}`)).status).toBe(200);
    const { context, page } = await h.signedIn(owner.email);
    const names = async () => page.locator("tbody .key-name").allInnerTexts();
    const first = await names();
    expect(first.length).toBe(100);
    await page.getByRole("link", { name: "Older keys" }).click();
    await page.waitForURL(/before=/);
    const second = await names();
    expect(second.length).toBe(2);
    expect(await page.getByRole("link", { name: "Older keys" }).count()).toBe(0);
    const all = [...first, ...second];
    expect(new Set(all).size).toBe(102);
    expect(all).not.toContain("bulk 050");
    await context.close();
  });

  it("sign-in page screenshot (DASHBOARD_SCREENSHOTS=1 only)", async () => {
    if (!SCREENSHOTS) return;
    const { context, page } = await h.anonymous();
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto("/dashboard/sign-in");
    mkdirSync("docs/screenshots", { recursive: true });
    await page.screenshot({ path: "docs/screenshots/sign-in.png", fullPage: true });
    await context.close();
  });

  it("no page asked for anything outside the gateway", () => {
    expect(h.offsite).toEqual([]);
  });
});
