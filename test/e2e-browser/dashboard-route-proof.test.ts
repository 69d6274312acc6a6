import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { usdToNano } from "../../src/core/money.ts";
import { browserSuite, startDashboardHarness, type DashboardHarness } from "./dashboard-harness.ts";

setDefaultTimeout(60_000);

/**
 * The configured prompt of this suite: the fake upstream answers the text of its [[fake]] directive, so the
 * answer (and the prompt shown on the page) carry markup that must show as text.
 */
const HOSTILE = `<img src=x onerror="document.title='pwned'">`;
const PROMPT = `Name the model you are. [[fake {"text":"${HOSTILE.replaceAll('"', '\\"')} I am the fake model."}]]`;
const ANSWER = `${HOSTILE} I am the fake model.`;
const ROOT = resolve(import.meta.dir, "../..");

describe.skipIf(!browserSuite("dashboard route proof"))("dashboard: route proof", () => {
  let h: DashboardHarness;
  let configDir: string;

  beforeAll(async () => {
    // The real plugins-config.yaml with this suite's prompt; the deepseek provider points at a closed port.
    configDir = mkdtempSync(join(tmpdir(), "route-proof-config-"));
    const yaml = readFileSync(join(ROOT, "plugins-config.yaml"), "utf8");
    const withPrompt = yaml.replace(/^(\s+prompt:) .*$/m, `$1 '${PROMPT.replaceAll("'", "''")}'`);
    expect(withPrompt).not.toBe(yaml);
    writeFileSync(join(configDir, "plugins-config.yaml"), withPrompt);
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    const deadUrl = `http://127.0.0.1:${closed.port}/v1`;
    closed.stop(true);
    h = await startDashboardHarness({
      env: { GATEWAY_CONFIG: join(configDir, "plugins-config.yaml"), GATEWAY_CATALOG: join(ROOT, "catalog.yaml"), DEEPSEEK_BASE_URL: deadUrl },
    });
  }, 60_000);

  afterAll(async () => {
    await h?.stop();
    if (configDir) rmSync(configDir, { recursive: true, force: true });
  });

  const chatRequests = () => h.t.fake.requests.filter((r) => r.path.startsWith("/v1/chat/completions"));

  async function account(id: string) {
    const answer = await h.t.admin("GET", `/admin/v1/accounts/${id}`);
    expect(answer.status).toBe(200);
    return answer.body.data as { total_credits: number; total_usage: number; balance: number };
  }

  async function houseAccountId(): Promise<string> {
    const found = await h.t.admin("GET", `/admin/v1/accounts?q=${encodeURIComponent("house: route proofs")}`);
    expect(found.status).toBe(200);
    expect(found.body.data).toHaveLength(1);
    return found.body.data[0].id;
  }

  /** The signed-in page's session cookie and CSRF token, for posts made outside the browser. */
  async function credentials(context: BrowserContext, page: Page): Promise<{ cookie: string; csrf: string }> {
    const cookies = await context.cookies();
    const cookie = cookies.map((c) => `${c.name}=${c.value}`).join("; ");
    const csrf = await page.locator('input[name="_csrf"]').first().getAttribute("value");
    expect(csrf).toBeTruthy();
    return { cookie, csrf: csrf! };
  }

  function post(creds: { cookie: string; csrf: string }, model: string): Promise<Response> {
    return fetch(`${h.t.url}/dashboard/route-proof`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie: creds.cookie, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ _csrf: creds.csrf, model }).toString(),
    });
  }

  it("runs once with zero balance and no key, paid by the house; a failed try is released; a second run is refused", async () => {
    const user = await h.newAccountUser({ credit: 0 });
    const { context, page } = await h.signedIn(user.email);
    await page.getByRole("link", { name: "Route proof" }).click();
    await page.waitForURL(/\/dashboard\/route-proof$/);
    // The configured prompt is shown, as text.
    await expect(page.locator("blockquote.prompt").textContent()).resolves.toBe(PROMPT);
    expect(await page.locator("main img").count()).toBe(0);

    // A provider that does not answer: the error is shown, nothing is counted, the proof can be tried again.
    await page.getByLabel("Model").selectOption("deepseek-flash");
    await page.getByRole("button", { name: "Run route proof" }).click();
    const failure = await page.getByRole("alert").textContent();
    expect(failure).toContain("got no answer");
    expect(chatRequests()).toHaveLength(0);
    await page.goto("/dashboard/route-proof");
    await expect(page.getByRole("button", { name: "Run route proof" }).isVisible()).resolves.toBe(true);

    // The proof through the fake upstream.
    h.t.fake.reset();
    await page.getByLabel("Model").selectOption("gpt-6-luna");
    await page.getByRole("button", { name: "Run route proof" }).click();
    await page.waitForURL(/\/dashboard\/route-proof$/);
    const facts = page.locator("dl.facts");
    const fact = (name: string) => facts.locator(`dt:text-is("${name}") + dd`);
    await expect(fact("Model").textContent()).resolves.toContain("gpt-6-luna");
    const latency = await fact("Latency").textContent();
    expect(latency).toMatch(/^\d+ ms$/);
    await expect(facts.locator("dd.answer").textContent()).resolves.toBe(ANSWER);
    await expect(page.locator("blockquote.prompt").textContent()).resolves.toBe(PROMPT);
    expect(await page.locator("main img").count()).toBe(0);
    expect(await page.title()).not.toBe("pwned");
    const requestId = (await fact("Request id").textContent())!.trim();
    expect(requestId.length).toBeGreaterThan(0);
    const paid = await page.getByText(/^Paid by the house: /).textContent();
    expect(await page.getByRole("button", { name: "Run route proof" }).count()).toBe(0);

    // Exactly one upstream request, with the configured prompt.
    const sent = chatRequests();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body.messages).toEqual([{ role: "user", content: PROMPT }]);

    // Nothing on the account: no credit, no usage, no request.
    expect(await account(user.accountId)).toMatchObject({ total_credits: 0, total_usage: 0, balance: 0 });
    const own = await h.t.admin("GET", `/admin/v1/accounts/${user.accountId}/requests`);
    expect(own.body.data).toEqual([]);

    // The house paid: its usage is the proof's cost (the failed try cost nothing), as the page says.
    const house = await houseAccountId();
    const houseRequests = (await h.t.admin("GET", `/admin/v1/accounts/${house}/requests`)).body.data as { id: string; cost: number; status: string }[];
    const proof = houseRequests.find((r) => r.id === requestId);
    expect(proof?.status).toBe("success");
    const cost = usdToNano(proof!.cost);
    expect(cost).toBeGreaterThan(0);
    const houseTotals = await account(house);
    expect(usdToNano(houseTotals.total_usage)).toBe(cost);
    expect(paid).toStartWith(`Paid by the house: $${formatUsd(cost)} `);

    // The temporary keys are gone.
    const keys = (await h.t.admin("GET", `/admin/v1/accounts/${house}/keys`)).body.data as { deleted_at: string | null }[];
    expect(keys.length).toBe(2);
    for (const key of keys) expect(key.deleted_at).not.toBeNull();

    // A second run is refused and sends nothing.
    const again = await post(await credentials(context, page), "gpt-6-luna");
    expect(again.status).toBe(409);
    expect(await again.text()).toContain("already been run");
    expect(chatRequests()).toHaveLength(1);
    expect(h.offsite).toEqual([]);
  });

  it("runs one proof for two concurrent posts of one account; a member may run it; an unknown model is a 400", async () => {
    const owner = await h.newAccountUser({ credit: 0 });
    const member = await h.addUser(owner.accountId, "member");
    const { context, page } = await h.signedIn(member.email);
    await page.goto("/dashboard/route-proof");
    const creds = await credentials(context, page);

    const unknown = await post(creds, "<b>no-such-model</b>");
    expect(unknown.status).toBe(400);
    expect(await unknown.text()).not.toContain("<b>no-such-model</b>");

    const before = chatRequests().length;
    const answers = await Promise.all([post(creds, "gpt-6-luna"), post(creds, "gpt-6-luna")]);
    expect(answers.map((a) => a.status).sort()).toEqual([303, 409]);
    expect(chatRequests().length).toBe(before + 1);

    await page.reload();
    await expect(page.locator("dl.facts dd.answer").textContent()).resolves.toBe(ANSWER);
    expect(await account(owner.accountId)).toMatchObject({ total_credits: 0, total_usage: 0, balance: 0 });
    const keys = (await h.t.admin("GET", `/admin/v1/accounts/${await houseAccountId()}/keys`)).body.data as { deleted_at: string | null }[];
    for (const key of keys) expect(key.deleted_at).not.toBeNull();
    expect(h.offsite).toEqual([]);
  });
});

// The screenshot for docs/, with the configured (plain) prompt: DASHBOARD_SCREENSHOTS=1 only.
describe.skipIf(process.env.DASHBOARD_SCREENSHOTS !== "1" || !browserSuite("dashboard route proof screenshot"))("dashboard: route proof screenshot", () => {
  it("takes docs/screenshots/route-proof.png after a proof", async () => {
    const h = await startDashboardHarness();
    try {
      const user = await h.newAccountUser({ credit: 0 });
      const { page } = await h.signedIn(user.email);
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.goto("/dashboard/route-proof");
      await page.getByLabel("Model").selectOption("gpt-6-luna");
      await page.getByRole("button", { name: "Run route proof" }).click();
      await page.waitForURL(/\/dashboard\/route-proof$/);
      await page.locator("dl.facts").waitFor();
      mkdirSync(join(ROOT, "docs/screenshots"), { recursive: true });
      await page.screenshot({ path: join(ROOT, "docs/screenshots/route-proof.png"), fullPage: true });
      expect(h.offsite).toEqual([]);
    } finally {
      await h.stop();
    }
  });
});

function formatUsd(nano: number): string {
  const whole = Math.floor(nano / 1e9);
  const fraction = String(nano % 1e9).padStart(9, "0").replace(/0+$/, "");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}
