import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdirSync } from "node:fs";
import type { Page } from "playwright-core";
import { usdToNano } from "../../src/core/money.ts";
import { browserSuite, startDashboardHarness, USER_PASSWORD, type DashboardHarness } from "./dashboard-harness.ts";

// A cold Chromium start on a loaded 2-core machine takes seconds.
setDefaultTimeout(60_000);

/** A key name that must show as text, never as markup. */
const HOSTILE = `<img src=x onerror=alert(1)>`;
const directive = (d: object) => `[[fake ${JSON.stringify(d)}]]`;

interface Made {
  id: string;
  keyName: string;
  model: string;
  record: any; // GET /v1/generation's data
}

/** The rows of the Logs table as text cells (the empty detail slots left out). */
async function tableRows(page: Page): Promise<{ id: string; time: string; key: string; model: string; prompt: string; completion: string; cached: string; cost: string; status: string }[]> {
  const rows = page.getByRole("table", { name: "Requests" }).locator("tbody > tr:not(.detail-slot):not(.detail-row)");
  const cells = await rows.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll(":scope > td")].map((td) => td.textContent ?? "")));
  return cells.map(([id, time, key, model, prompt, completion, cached, cost, status]) => ({ id, time, key, model, prompt, completion, cached, cost, status }));
}

/** Counts the page's document, fetch and xhr requests (assets and their cache are not counted). */
function countRequests(page: Page): { urls: string[] } {
  const seen = { urls: [] as string[] };
  page.on("request", (request) => {
    if (["document", "fetch", "xhr"].includes(request.resourceType())) seen.urls.push(request.url());
  });
  return seen;
}

/** Nano-USD of a "$0.000123456" cell. */
function cellNano(text: string): number {
  expect(text).toMatch(/^\$\d+\.\d{2,9}$/);
  return usdToNano(text.slice(1));
}

describe.skipIf(!browserSuite("dashboard Logs"))("dashboard Logs in headless Chromium", () => {
  let h: DashboardHarness;
  let owner: { accountId: string; email: string };
  let other: { accountId: string; email: string };
  let made: Made[] = [];
  let otherRequestId: string;
  let alphaKeyId: string;

  async function newKey(accountId: string, name: string): Promise<{ id: string; key: string }> {
    const created = await h.t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name });
    if (created.status !== 201) throw new Error(`key: ${JSON.stringify(created.body)}`);
    return { id: created.body.data.id, key: created.body.data.key };
  }

  /** The request's record from the cost API, once it is metered (a failed request's record may follow its answer). */
  async function recordOf(key: string, id: string): Promise<any> {
    for (;;) {
      const response = await fetch(`${h.t.url}/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${key}` } });
      if (response.status === 200) return ((await response.json()) as any).data;
      expect(response.status).toBe(404);
      await Bun.sleep(20);
    }
  }

  async function call(key: { key: string; name: string }, model: string, d: object): Promise<Made> {
    const messages = [{ role: "user" as const, content: `hello ${directive(d)}` }];
    let id: string | null;
    try {
      id = (await h.t.client(key.key).chat.completions.create({ model, messages }).withResponse()).response.headers.get("x-gateway-request-id");
    } catch (error: any) {
      id = error.headers?.get?.("x-gateway-request-id") ?? null; // an upstream failure: the SDK's APIError keeps the headers
      if (!id) throw error;
    }
    return { id: id!, keyName: key.name, model, record: await recordOf(key.key, id!) };
  }

  beforeAll(async () => {
    h = await startDashboardHarness();
    owner = await h.newAccountUser({ credit: 10, name: "Logs owner" });
    const alpha = { ...(await newKey(owner.accountId, "alpha key")), name: "alpha key" };
    const hostile = { ...(await newKey(owner.accountId, HOSTILE)), name: HOSTILE };
    alphaKeyId = alpha.id;
    // Two keys, two models, one upstream failure; one after another, so their order is the order of their records.
    made.push(await call(alpha, "gpt-6-luna", { usage: { prompt_tokens: 1237, completion_tokens: 411, cached_tokens: 203 } }));
    made.push(await call(hostile, "deepseek-flash", { usage: { prompt_tokens: 3001, completion_tokens: 777, cached_tokens: 1499 } }));
    made.push(await call(alpha, "deepseek-flash", { usage: { prompt_tokens: 17, completion_tokens: 5 } }));
    made.push(await call(hostile, "gpt-6-luna", { usage: { prompt_tokens: 999, completion_tokens: 1 } }));
    made.push(await call(alpha, "gpt-6-luna", { status: 500 }));
    // Newest first: (created_at, id) descending, as the store orders them.
    made.sort((a, b) => Date.parse(b.record.created_at) - Date.parse(a.record.created_at) || (a.id < b.id ? 1 : -1));

    other = await h.newAccountUser({ credit: 5, name: "Other account" });
    const otherKey = { ...(await newKey(other.accountId, "other key")), name: "other key" };
    otherRequestId = (await call(otherKey, "gpt-6-luna", { usage: { prompt_tokens: 5, completion_tokens: 5 } })).id;
  });

  afterAll(async () => {
    await h?.stop();
  });

  it("shows one row per request, newest first, with the exact cost of /v1/generation, in one request", async () => {
    expect(made.filter((m) => m.record.status === "failed")).toHaveLength(1);
    const { page } = await h.signedIn(owner.email);
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    const seen = countRequests(page);
    const response = await page.goto("/dashboard/logs");
    expect(response?.status()).toBe(200);
    expect(seen.urls).toHaveLength(1);

    const rows = await tableRows(page);
    expect(rows.map((r) => r.id)).toEqual(made.map((m) => m.id));
    for (const [i, row] of rows.entries()) {
      const { record, keyName, model } = made[i];
      expect(row.key).toBe(keyName); // the hostile name as text
      expect(row.model).toBe(model);
      expect(row.time).toBe(new Date(Date.parse(record.created_at)).toISOString());
      expect([row.prompt, row.completion, row.cached].map(Number)).toEqual([record.usage.prompt_tokens, record.usage.completion_tokens, record.usage.cached_tokens]);
      // To the nano-dollar: the cell and the cost API's number are the same decimal.
      expect(cellNano(row.cost)).toBe(usdToNano(record.total_cost));
      expect(row.status.startsWith(record.status)).toBe(true);
    }
    expect(rows.find((r) => r.status.startsWith("failed"))?.status).toMatch(/^failed · \w+/);
    expect(await page.getByRole("columnheader", { name: "Time (UTC)" }).count()).toBe(1);
    expect(await page.locator("img").count()).toBe(0);
    expect(dialogs).toEqual([]);
    expect(rows.map((r) => r.id)).not.toContain(otherRequestId);
  });

  it("narrows by key, model, status and day with the filter form (one request each), and by plain links", async () => {
    const { page } = await h.signedIn(owner.email);
    await page.goto("/dashboard/logs");
    const seen = countRequests(page);
    const search = page.getByRole("search");
    const apply = async (label: string, value: string) => {
      const before = seen.urls.length;
      if (label === "Day") await search.getByLabel(label).fill(value);
      else await search.getByLabel(label).selectOption(value);
      const swapped = page.waitForResponse((r) => r.url().includes("/dashboard/logs?"));
      await search.getByRole("button", { name: "Filter" }).click();
      await swapped;
      await page.waitForURL((await swapped).url());
      expect(seen.urls.length - before).toBe(1);
    };
    const shownIds = async () => (await tableRows(page)).map((r) => r.id);
    const ids = (keep: (m: Made) => boolean) => made.filter(keep).map((m) => m.id);

    await apply("Key", alphaKeyId);
    expect(await shownIds()).toEqual(ids((m) => m.keyName === "alpha key"));
    expect(page.url()).toContain(`key=${alphaKeyId}`);

    await apply("Model", "deepseek-flash");
    expect(await shownIds()).toEqual(ids((m) => m.keyName === "alpha key" && m.model === "deepseek-flash"));

    await apply("Key", "");
    expect(await shownIds()).toEqual(ids((m) => m.model === "deepseek-flash"));

    await apply("Model", "");
    await apply("Status", "failed");
    expect(await shownIds()).toEqual(ids((m) => m.record.status === "failed"));
    await apply("Status", "success");
    expect(await shownIds()).toEqual(ids((m) => m.record.status === "success"));
    await apply("Status", "");

    const today = made[0].record.created_at.slice(0, 10);
    await apply("Day", today);
    expect(await shownIds()).toEqual(ids((m) => m.record.created_at.startsWith(today)));
    await apply("Day", "2001-02-03");
    expect(await page.getByRole("table", { name: "Requests" }).count()).toBe(0);
    await expect(page.getByText("No requests match these filters.").isVisible()).resolves.toBe(true);

    // The same filters as plain links: a whole page each.
    await page.goto(`/dashboard/logs?model=gpt-6-luna&status=success`);
    expect(await shownIds()).toEqual(ids((m) => m.model === "gpt-6-luna" && m.record.status === "success"));
    expect(await page.getByLabel("Model").inputValue()).toBe("gpt-6-luna");

    // Anything else in a parameter is refused, never passed to the store.
    for (const bad of ["status=bogus", "day=2026-02-30", "before=garbage", "model=%3Cscript%3E", "key=key_nope", "status=failed&status=success"]) {
      const answer = await page.goto(`/dashboard/logs?${bad}`);
      expect({ bad, status: answer?.status() }).toEqual({ bad, status: 400 });
    }
  });

  it("filters with JavaScript off: the form and links work as plain HTML", async () => {
    const context = await h.browser.newContext({ baseURL: h.t.url, javaScriptEnabled: false });
    const origin = new URL(h.t.url).origin;
    await context.route("**/*", (route) => (route.request().url().startsWith(origin) ? route.continue() : (h.offsite.push(route.request().url()), route.abort())));
    try {
      const page = await context.newPage();
      await page.goto("/dashboard/sign-in");
      await page.getByLabel("Email").fill(owner.email);
      await page.getByLabel("Password").fill(USER_PASSWORD);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(/\/dashboard\/keys$/);
      await page.goto("/dashboard/logs");
      await page.getByRole("search").getByLabel("Status").selectOption("failed");
      await page.getByRole("search").getByRole("button", { name: "Filter" }).click();
      await page.waitForURL(/status=failed/);
      expect((await tableRows(page)).map((r) => r.id)).toEqual(made.filter((m) => m.record.status === "failed").map((m) => m.id));
      await page.getByRole("link", { name: `Request ${made[0].id}` }).click();
      await page.waitForURL(new RegExp(`/dashboard/logs/${made[0].id}$`));
      await expect(page.getByRole("region", { name: `Request detail ${made[0].id}` }).isVisible()).resolves.toBe(true);
    } finally {
      await context.close();
    }
  });

  it("opens a row's detail under it in one request: ids, latency, tokens, cost breakdown, the upstream attempts", async () => {
    const { page } = await h.signedIn(owner.email);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto("/dashboard/logs");
    const seen = countRequests(page);
    const target = made.find((m) => m.record.status === "success" && m.model === "gpt-6-luna")!;
    await page.getByRole("link", { name: `Request ${target.id}` }).click();
    const detail = page.getByRole("region", { name: `Request detail ${target.id}` });
    await detail.waitFor();
    expect(seen.urls).toEqual([`${h.t.url}/dashboard/logs/${target.id}`]);
    expect(page.url()).toBe(`${h.t.url}/dashboard/logs`); // the list stays

    const facts = Object.fromEntries(
      await detail.locator("dl.facts").evaluateAll((dls) => dls.flatMap((dl) => [...dl.querySelectorAll("dt")].map((dt) => [dt.textContent, dt.nextElementSibling?.textContent]))),
    );
    const { record } = target;
    expect(facts["Request id"]).toBe(target.id);
    expect(facts["Response id"]).toBe(record.id);
    expect(facts["Latency"]).toBe(`${record.latency_ms} ms`);
    expect(facts["Model"]).toBe("gpt-6-luna");
    expect(facts["Requested model"]).toBeUndefined(); // no fallback: the model asked is the one that answered
    expect(facts["Stream"]).toBe("no");
    expect(facts["Prompt tokens"]).toBe(String(record.usage.prompt_tokens));
    expect(facts["Reasoning tokens"]).toBe(String(record.usage.reasoning_tokens));
    expect(cellNano(facts["Total cost"])).toBe(usdToNano(record.total_cost));
    expect(cellNano(facts["Input cost"]) + cellNano(facts["Cache read cost"]) + cellNano(facts["Cache write cost"])).toBe(usdToNano(record.cost_breakdown.input));
    expect(cellNano(facts["Output cost"])).toBe(usdToNano(record.cost_breakdown.output));
    expect(facts["Usage"]).toBe(record.usage_estimated ? "estimated by the gateway" : "reported by the upstream");

    const attempts = detail.getByRole("table", { name: "Upstream attempts" });
    const attemptRows = await attempts.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
    expect(record.attempts.length).toBeGreaterThan(0);
    expect(attemptRows.map((r) => [r[1], r[2], r[4]])).toEqual(record.attempts.map((a: any) => [a.deployment, String(a.status), `${a.latency_ms} ms`]));

    // The failed request's detail names the error class of each attempt.
    const failed = made.find((m) => m.record.status === "failed")!;
    await page.getByRole("link", { name: `Request ${failed.id}` }).click();
    const failedDetail = page.getByRole("region", { name: `Request detail ${failed.id}` });
    await failedDetail.waitFor();
    const classes = await failedDetail.getByRole("table", { name: "Upstream attempts" }).locator("tbody tr td:nth-child(4)").allTextContents();
    expect(classes).toEqual(failed.record.attempts.map((a: any) => a.error_class));
    expect(seen.urls).toHaveLength(2);

    if (process.env.DASHBOARD_SCREENSHOTS === "1") {
      mkdirSync("docs/screenshots", { recursive: true });
      await page.screenshot({ path: "docs/screenshots/logs.png", fullPage: true });
    }

    // The detail as a page of its own (a plain link, a reload).
    const own = await page.goto(`/dashboard/logs/${target.id}`);
    expect(own?.status()).toBe(200);
    await expect(page.getByRole("region", { name: `Request detail ${target.id}` }).isVisible()).resolves.toBe(true);
  });

  it("pages 50 rows at a time by a keyset cursor: Older, then Newest", async () => {
    const paged = await h.newAccountUser({ credit: 5, name: "Paged account" });
    const key = { ...(await newKey(paged.accountId, "pager key")), name: "pager key" };
    const client = h.t.client(key.key);
    const ids: string[] = [];
    for (let i = 0; i < 53; i++) {
      const { response } = await client.chat.completions.create({ model: "deepseek-flash", messages: [{ role: "user", content: `n${i} ${directive({ usage: { prompt_tokens: 3, completion_tokens: 1 } })}` }] }).withResponse();
      ids.push(response.headers.get("x-gateway-request-id")!);
    }
    const { page } = await h.signedIn(paged.email);
    const seen = countRequests(page);
    await page.goto("/dashboard/logs");
    const first = (await tableRows(page)).map((r) => r.id);
    expect(first).toHaveLength(50);
    expect(await page.getByRole("link", { name: "Newest" }).count()).toBe(0);

    await page.getByRole("link", { name: "Older" }).click();
    await page.waitForURL(/before=/);
    await page.getByRole("link", { name: "Newest" }).waitFor();
    const second = (await tableRows(page)).map((r) => r.id);
    expect(second).toHaveLength(3);
    expect(await page.getByRole("link", { name: "Older" }).count()).toBe(0);
    // Every request once, newest first (the ids are time-ordered UUIDv7s, sequential requests).
    expect([...first, ...second].sort()).toEqual([...ids].sort());
    expect(new Set([...first, ...second]).size).toBe(53);

    await page.getByRole("link", { name: "Newest" }).click();
    await page.waitForURL(/\/dashboard\/logs$/);
    await page.getByRole("link", { name: "Older" }).waitFor();
    expect((await tableRows(page)).map((r) => r.id)).toEqual(first);
    expect(seen.urls).toHaveLength(3); // one per page view

    // The Older link works as a plain link too (a reload of the cursor URL).
    await page.reload();
    expect((await tableRows(page)).map((r) => r.id)).toEqual(first);
  });

  it("shows the requested model, as text, when a fallback answered", async () => {
    const fellBack = await h.newAccountUser({ credit: 5, name: "Fallback account" });
    const key = await newKey(fellBack.accountId, "fallback key");
    const id = `gen-${crypto.randomUUID().replaceAll("-", "")}`;
    // A record as metering writes it after a fallback (test/e2e/fallback-models.test.ts drives a real one); the asked
    // model is hostile here to prove it is escaped.
    h.t.gateway.service("storage")!.recordGeneration({
      id, responseId: null, accountId: fellBack.accountId, keyId: key.id, model: "gpt-6-luna", requestedModel: HOSTILE,
      provider: "openai", ingress: "openai-chat", stream: false, status: "success", errorCode: null, createdAt: Date.now(),
      latencyMs: 10, timeToFirstTokenMs: null, promptTokens: 1, completionTokens: 1, cachedTokens: 0, cacheWriteTokens: 0,
      reasoningTokens: 0, inputCost: 0, cacheReadCost: 0, cacheWriteCost: 0, outputCost: 0, totalCost: 0, attempts: null,
    });
    const { page } = await h.signedIn(fellBack.email);
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => void dialogs.push(dialog.message()));
    expect((await page.goto(`/dashboard/logs/${id}`))?.status()).toBe(200);
    const detail = page.getByRole("region", { name: `Request detail ${id}` });
    const facts = Object.fromEntries(
      await detail.locator("dl.facts").evaluateAll((dls) => dls.flatMap((dl) => [...dl.querySelectorAll("dt")].map((dt) => [dt.textContent, dt.nextElementSibling?.textContent]))),
    );
    expect(facts["Model"]).toBe("gpt-6-luna");
    expect(facts["Requested model"]).toBe(HOSTILE);
    expect(await detail.locator("img").count()).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it("another account's user sees none of these rows and gets 404 for their detail", async () => {
    const { page } = await h.signedIn(other.email);
    await page.goto("/dashboard/logs");
    const rows = await tableRows(page);
    expect(rows.map((r) => r.id)).toEqual([otherRequestId]);
    for (const m of made) {
      const answer = await page.goto(`/dashboard/logs/${m.id}`);
      expect(answer?.status()).toBe(404);
    }
    // Their own key ids are not a filter the other account can use.
    expect((await page.goto(`/dashboard/logs?key=${alphaKeyId}`))?.status()).toBe(400);
    const anonymous = await h.anonymous();
    await anonymous.page.goto(`/dashboard/logs/${made[0].id}`);
    expect(anonymous.page.url()).toContain("/dashboard/sign-in");
  });

  it("asked for nothing outside the gateway", () => {
    expect(h.offsite).toEqual([]);
  });
});
