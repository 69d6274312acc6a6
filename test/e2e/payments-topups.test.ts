import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { usdToNano } from "../../src/core/money.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { FAKE_STRIPE_SECRET_KEY, startFakeStripe, type FakeStripe } from "../fake-stripe/server.ts";
import { startFakeTronGrid, type FakeTronGrid } from "../fake-trongrid/server.ts";

setDefaultTimeout(30_000);

/** The payments core through real HTTP on a real gateway: the top-up API, its refusals, the operator's routes, blocks. */

const RECEIVING_ADDRESS = "TQrY8tryqsYVCYS3MFbtffiPp2ccyn4STm";

async function call(t: TestGateway, method: string, path: string, key?: string, body?: unknown) {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(t.url + path, { method, headers, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) });
  const text = await response.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: response.status, body: json };
}

/** A top-up row as a processor would leave it, made through the running gateway's own store (no processor in this gateway). */
async function storedTopup(t: TestGateway, accountId: string, fields: Partial<{ method: "card" | "usdt"; amount: number; expiresAt: number | null; payAmountMicro: number }> = {}) {
  const store = t.gateway.service("storage")!;
  const id = "tu_" + Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString("hex");
  const method = fields.method ?? "card";
  return store.createTopup({
    id,
    accountId,
    method,
    amount: usdToNano(fields.amount ?? 20),
    network: method === "usdt" ? "tron" : null,
    payTo: method === "usdt" ? RECEIVING_ADDRESS : null,
    payAmountMicro: method === "usdt" ? (fields.payAmountMicro ?? 20_000_417) : null,
    expiresAt: fields.expiresAt ?? null,
  });
}


const PASSWORD = "correct horse battery staple";

/** A browser without a browser: a cookie jar over fetch, forms posted urlencoded, redirects not followed. */
class Browser {
  cookies = new Map<string, string>();
  constructor(readonly base: string) {}
  async fetch(path: string, init: RequestInit = {}) {
    const cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    const response = await fetch(this.base + path, { redirect: "manual", ...init, headers: { cookie, ...(init.headers as Record<string, string>) } });
    for (const set of response.headers.getSetCookie()) {
      const [pair] = set.split(";");
      const eq = pair!.indexOf("=");
      if (/Max-Age=0/.test(set)) this.cookies.delete(pair!.slice(0, eq));
      else this.cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    return response;
  }
  post(path: string, form: Record<string, string>) {
    return this.fetch(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(form) });
  }
}

const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";

/** A signed-in dashboard user of a new account. */
async function dashboardUser(t: TestGateway, role: "owner" | "member" = "owner", accountId?: string) {
  const account = accountId ?? (await t.admin("POST", "/admin/v1/accounts", { name: "Billing" })).body.data.id;
  const email = `u-${crypto.randomUUID().slice(0, 8)}@example.com`;
  expect((await t.admin("POST", `/admin/v1/accounts/${account}/users`, { email, password: PASSWORD, role })).status).toBe(201);
  const browser = new Browser(t.url);
  const form = await (await browser.fetch("/dashboard/sign-in")).text();
  expect((await browser.post("/dashboard/sign-in", { email, password: PASSWORD, _csrf: csrfOf(form) })).status).toBe(303);
  return { browser, accountId: account as string };
}

describe("top-ups without a processor", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { STRIPE_SECRET_KEY: "", USDT_TRON_ADDRESS: "", TOPUP_REQUESTS_PER_SECOND: "0" } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("refuses a top-up naming that no payment method is configured", async () => {
    const { key } = await t.newAccountWithKey();
    for (const method of ["card", "usdt"]) {
      const answer = await call(t, "POST", "/v1/credits/topups", key, { method, amount: 20 });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ code: "invalid_request", param: "method" });
      expect(answer.body.error.message).toContain("no payment method is configured");
    }
    const unknown = await call(t, "POST", "/v1/credits/topups", key, { method: "paypal", amount: 20 });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: "invalid_request", param: "method" });
    expect(t.gateway.service("payments")!.methods()).toEqual([]);
  });

  it("the dashboard's Billing page says to ask the operator", async () => {
    const { browser } = await dashboardUser(t);
    const billing = await (await browser.fetch("/dashboard/billing")).text();
    expect(billing).toContain("Top-ups: ask your operator");
    expect(billing).not.toContain('action="/dashboard/billing/topups"');
  });

  it("needs a key (401) on every top-up route, and refuses a deleted one", async () => {
    const { key, keyId } = await t.newAccountWithKey();
    for (const [method, path] of [
      ["POST", "/v1/credits/topups"],
      ["GET", "/v1/credits/topups"],
      ["GET", "/v1/credits/topups/tu_000000000000000000000000"],
    ] as const) {
      const none = await call(t, method, path, undefined, method === "POST" ? { method: "card", amount: 20 } : undefined);
      expect({ path, status: none.status }).toEqual({ path, status: 401 });
      const wrong = await call(t, method, path, "sk-gw-not-a-key", method === "POST" ? { method: "card", amount: 20 } : undefined);
      expect({ path, status: wrong.status }).toEqual({ path, status: 401 });
    }
    expect((await t.admin("DELETE", `/admin/v1/keys/${keyId}`)).status).toBe(200);
    expect((await call(t, "GET", "/v1/credits/topups", key)).status).toBe(401);
  });

  it("refuses hostile amounts with 400 param amount, before looking for a processor", async () => {
    const { key } = await t.newAccountWithKey();
    const hostile: unknown[] = [-5, "-5", 0, "0", "0.00", 10.001, "10.001", "5.5.5", 1e300, "1e300", "1e3", 1e-7, "abc", "", " ", "NaN", "Infinity", 100_000.01, "100000.01", 1e21, null, true, {}, [20], "20 USD", "0x14", "+20", "٢٠"];
    for (const amount of hostile) {
      const answer = await call(t, "POST", "/v1/credits/topups", key, { method: "card", amount });
      expect({ amount, status: answer.status, param: answer.body?.error?.param, code: answer.body?.error?.code }).toEqual({ amount, status: 400, param: "amount", code: "invalid_request" });
    }
    const missing = await call(t, "POST", "/v1/credits/topups", key, { method: "card" });
    expect(missing.status).toBe(400);
    expect(missing.body.error.param).toBe("amount");
    // Not a JSON object at all.
    for (const body of ["not json", "[1,2]", "null"]) {
      const answer = await call(t, "POST", "/v1/credits/topups", key, body);
      expect({ body, status: answer.status }).toEqual({ body, status: 400 });
    }
  });

  it("lists and reads only the caller's own top-ups; another account's id is a 404", async () => {
    const a = await t.newAccountWithKey();
    const b = await t.newAccountWithKey();
    const empty = await call(t, "GET", "/v1/credits/topups", a.key);
    expect(empty).toEqual({ status: 200, body: { data: [], has_more: false, next_before: null } });

    const first = await storedTopup(t, a.accountId, { amount: 20 });
    const second = await storedTopup(t, a.accountId, { method: "usdt", amount: 20, payAmountMicro: 20_000_417, expiresAt: Date.now() + 3_600_000 });
    const own = await call(t, "GET", `/v1/credits/topups/${first.id}`, a.key);
    expect(own.status).toBe(200);
    expect(own.body.data).toMatchObject({ id: first.id, method: "card", amount: 20, status: "pending", checkout_url: null, flag: null, taken_back: 0, credited: false, expires_at: null });
    const usdt = await call(t, "GET", `/v1/credits/topups/${second.id}`, a.key);
    expect(usdt.body.data).toMatchObject({ method: "usdt", pay_to: RECEIVING_ADDRESS, pay_amount: "20.000417", network: "tron", token: "USDT" });
    expect(usdt.body.data.checkout_url).toBeUndefined();

    const other = await call(t, "GET", `/v1/credits/topups/${first.id}`, b.key);
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe("not_found");
    for (const id of ["tu_ffffffffffffffffffffffff", "nope", "tu_" + "a".repeat(500)]) expect((await call(t, "GET", `/v1/credits/topups/${id}`, a.key)).status).toBe(404);
    expect((await call(t, "GET", "/v1/credits/topups", b.key)).body.data).toEqual([]);

    // Newest first in (created_at, id) order (both may share a millisecond), paged by the next_before (the last id).
    const [newer, older] = [first, second].sort((x, y) => y.createdAt - x.createdAt || (y.id > x.id ? 1 : -1));
    const page1 = await call(t, "GET", "/v1/credits/topups?limit=1", a.key);
    expect(page1.body.data.map((row: any) => row.id)).toEqual([newer!.id]);
    expect(page1.body).toMatchObject({ has_more: true, next_before: newer!.id });
    const page2 = await call(t, "GET", `/v1/credits/topups?limit=1&before=${newer!.id}`, a.key);
    expect(page2.body.data.map((row: any) => row.id)).toEqual([older!.id]);
    expect(page2.body).toMatchObject({ has_more: false, next_before: null });
    // Another account's top-up is no cursor.
    expect((await call(t, "GET", `/v1/credits/topups?before=${newer!.id}`, b.key)).status).toBe(400);
    for (const query of ["limit=0", "limit=101", "limit=x", "before=yesterday", "limt=5", "limit=1&limit=2"]) {
      const answer = await call(t, "GET", `/v1/credits/topups?${query}`, a.key);
      expect({ query, status: answer.status }).toEqual({ query, status: 400 });
    }
  });

  it("the operator's payment routes need the admin token", async () => {
    const { accountId, key } = await t.newAccountWithKey();
    const routes = [
      ["GET", "/admin/v1/payments/unmatched"],
      ["GET", "/admin/v1/payments/reconcile?since=0"],
      ["GET", `/admin/v1/accounts/${accountId}/topups`],
      ["POST", `/admin/v1/accounts/${accountId}/unblock`],
    ] as const;
    for (const [method, path] of routes) {
      for (const token of ["wrong-token", key]) {
        const answer = await t.admin(method, path, undefined, token);
        expect({ path, status: answer.status }).toEqual({ path, status: 401 });
      }
      const bare = await fetch(t.url + path, { method });
      expect({ path, status: bare.status }).toEqual({ path, status: 401 });
    }
  });

  it("lists unmatched transfers newest first, paged, amounts as exact 6-decimal strings", async () => {
    const store = t.gateway.service("storage")!;
    const base = Date.now();
    const ids = ["tron:" + "a".repeat(64), "tron:" + "b".repeat(64), "tron:" + "c".repeat(64)];
    for (const [index, id] of ids.entries()) {
      const recorded = await store.recordUnmatchedTransfer({
        id,
        network: "tron",
        token: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
        from: "TJmmqjb1DK9TTZbQXzRQ2AuA94z4gKAPFh",
        to: RECEIVING_ADDRESS,
        amountMicro: 12_345_678 + index,
        at: base + index,
        reason: "no open top-up of this exact amount",
        recordedAt: base + index,
      });
      expect(recorded).toBe(true);
    }
    const first = await t.admin("GET", "/admin/v1/payments/unmatched?limit=2");
    expect(first.status).toBe(200);
    expect(first.body.data.map((row: any) => row.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.data[0]).toMatchObject({ amount: "12.345680", network: "tron", to: RECEIVING_ADDRESS, reason: "no open top-up of this exact amount" });
    expect(first.body.has_more).toBe(true);
    const second = await t.admin("GET", `/admin/v1/payments/unmatched?limit=2&before=${encodeURIComponent(first.body.next_before)}`);
    expect(second.body.data.map((row: any) => row.id)).toEqual([ids[0]]);
    expect(second.body.has_more).toBe(false);
    expect((await t.admin("GET", "/admin/v1/payments/unmatched?before=whenever")).status).toBe(400);
  });

  it("reconcile needs since; without processors it reports none", async () => {
    const missing = await t.admin("GET", "/admin/v1/payments/reconcile");
    expect(missing.status).toBe(400);
    expect(missing.body.error.param).toBe("since");
    expect((await t.admin("GET", "/admin/v1/payments/reconcile?since=2030-02-30")).status).toBe(400);
    const report = await t.admin("GET", "/admin/v1/payments/reconcile?since=2020-01-01T00:00:00Z");
    expect(report).toMatchObject({ status: 200, body: { data: { since: "2020-01-01T00:00:00.000Z", processors: [] } } });
  });

  it("an account's top-ups for the operator; an unknown account is a 404", async () => {
    const { accountId } = await t.newAccountWithKey();
    const topup = await storedTopup(t, accountId);
    const listed = await t.admin("GET", `/admin/v1/accounts/${accountId}/topups`);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([expect.objectContaining({ id: topup.id, account_id: accountId, processor_ref: null, payment_ref: null })]);
    expect((await t.admin("GET", "/admin/v1/accounts/acct_doesnotexist/topups")).status).toBe(404);
    expect((await t.admin("POST", "/admin/v1/accounts/acct_doesnotexist/unblock")).status).toBe(404);
  });

  it("a dispute blocks the account's keys (403) until the operator unblocks it", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 1, kind: "bonus" });
    const other = await t.newAccountWithKey();
    const payments = t.gateway.service("payments")!;
    const topup = await storedTopup(t, accountId, { amount: 20 });
    const credited = await payments.apply({ id: "test:evt-credit-" + topup.id, processor: "test", type: "payment.succeeded", receivedAt: Date.now() }, { kind: "credit", topupId: topup.id, paymentRef: "pi_test_" + topup.id });
    expect(credited).toMatchObject({ applied: true, amount: usdToNano(20) });
    expect((await call(t, "GET", "/v1/credits", key)).body.data.balance).toBe(21);
    // The key is cached by auth now: the dispute must reach it at once in this instance.
    expect((await call(t, "GET", `/v1/credits/topups/${topup.id}`, key)).body.data).toMatchObject({ status: "credited", credited: true });

    const disputed = await payments.apply(
      { id: "test:evt-dispute-" + topup.id, processor: "test", type: "charge.dispute.created", receivedAt: Date.now() },
      { kind: "take-back", topupId: topup.id, takeBack: "dispute", reference: "dp_test_" + topup.id, amount: usdToNano(20) },
    );
    expect(disputed.applied).toBe(true);
    const refused = await call(t, "GET", "/v1/credits", key);
    expect(refused.status).toBe(403);
    expect(refused.body.error.type).toBe("permission_error");
    expect(refused.body.error.message).toMatch(/^this account is blocked: .+; contact the operator$/);
    const chat = await call(t, "POST", "/v1/chat/completions", key, { model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] });
    expect(chat.status).toBe(403);
    expect((await call(t, "GET", "/v1/credits", other.key)).status).toBe(200); // only that account

    const unblocked = await t.admin("POST", `/admin/v1/accounts/${accountId}/unblock`);
    expect(unblocked).toMatchObject({ status: 200, body: { data: { id: accountId, blocked: false, was_blocked: true } } });
    const again = await call(t, "GET", "/v1/credits", key);
    expect(again.status).toBe(200);
    expect(again.body.data.balance).toBe(1); // the dispute took the 20 back
    expect((await call(t, "GET", `/v1/credits/topups/${topup.id}`, key)).body.data).toMatchObject({ status: "disputed", taken_back: 20, credited: true });
    const twice = await t.admin("POST", `/admin/v1/accounts/${accountId}/unblock`, {});
    expect(twice.body.data.was_blocked).toBe(false);
  });

  it("expires pending top-ups past their expiry once (the sweep's work, driven directly)", async () => {
    const { accountId, key } = await t.newAccountWithKey();
    const payments = t.gateway.service("payments")!;
    const now = Date.now();
    // Marked expired 30 minutes after its deadline: a transfer sent just before it may still be confirmed.
    const due = await storedTopup(t, accountId, { method: "usdt", expiresAt: now - 31 * 60_000, payAmountMicro: 20_000_011 });
    const inGrace = await storedTopup(t, accountId, { method: "usdt", expiresAt: now - 1_000, payAmountMicro: 20_000_013 });
    const open = await storedTopup(t, accountId, { method: "usdt", expiresAt: now + 3_600_000, payAmountMicro: 20_000_012 });
    expect(await payments.expireDue(now)).toBeGreaterThanOrEqual(1);
    expect((await call(t, "GET", `/v1/credits/topups/${due.id}`, key)).body.data.status).toBe("expired");
    expect((await call(t, "GET", `/v1/credits/topups/${inGrace.id}`, key)).body.data.status).toBe("pending");
    expect((await call(t, "GET", `/v1/credits/topups/${open.id}`, key)).body.data.status).toBe("pending");
    expect(await payments.expireDue(now)).toBe(0);
  });
});

describe("top-ups with Stripe and USDT on (fakes of both)", () => {
  let t: TestGateway;
  let stripe: FakeStripe;
  let tron: FakeTronGrid;
  beforeAll(async () => {
    stripe = await startFakeStripe();
    tron = await startFakeTronGrid();
    t = await startTestGateway({
      env: {
        STRIPE_SECRET_KEY: FAKE_STRIPE_SECRET_KEY,
        STRIPE_WEBHOOK_SECRET: "whsec_test_payments_topups",
        STRIPE_API_BASE: stripe.url,
        USDT_TRON_ADDRESS: RECEIVING_ADDRESS,
        TRON_API_URL: tron.url,
        USDT_POLL_MS: "3600000",
        TOPUP_REQUESTS_PER_SECOND: "0",
      },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await stripe?.stop();
    await tron?.stop();
  });

  it("the dashboard's Billing page: the form, a refusal as a notice, a USDT top-up's page with the exact amount", async () => {
    const { browser, accountId } = await dashboardUser(t);
    const billing = await (await browser.fetch("/dashboard/billing")).text();
    expect(billing).toContain('action="/dashboard/billing/topups"');
    expect(billing).toContain("Amount (USD)");
    expect(billing).toContain("card (minimum 5 USD)");
    expect(billing).toContain("USDT (minimum 12 USD)");
    const csrf = csrfOf(billing);

    const low = await browser.post("/dashboard/billing/topups", { amount: "3", method: "card", _csrf: csrf });
    expect(low.status).toBe(400);
    const lowPage = await low.text();
    expect(lowPage).toContain("the minimum card top-up is 5 USD");
    expect(lowPage).toContain('value="3"'); // the form keeps what was typed

    const usdt = await browser.post("/dashboard/billing/topups", { amount: "12.50", method: "usdt", _csrf: csrf });
    expect(usdt.status).toBe(303);
    const location = usdt.headers.get("location")!;
    expect(location).toMatch(/^\/dashboard\/billing\/topups\/tu_[0-9a-f]{24}$/);
    const id = location.split("/").pop()!;
    const stored = (await t.admin("GET", `/admin/v1/accounts/${accountId}/topups`)).body.data.find((row: any) => row.id === id);
    const page = await (await browser.fetch(location)).text();
    expect(page).toContain(stored.pay_amount);
    expect(page).toContain(RECEIVING_ADDRESS);
    expect(page).toContain("exact amount");
    expect(page).toContain("pending");

    const card = await browser.post("/dashboard/billing/topups", { amount: "5", method: "card", _csrf: csrf });
    expect(card.status).toBe(303);
    const cardPage = await (await browser.fetch(card.headers.get("location")!)).text();
    expect(cardPage).toContain("by card");
    const table = await (await browser.fetch("/dashboard/billing")).text();
    expect(table).toContain('aria-label="Top-ups"');
    expect(table).toContain(`/dashboard/billing/topups/${id}`);

    // Another account's top-up page reads like an unknown one; a member may look but not top up; no CSRF: 403.
    const stranger = await dashboardUser(t);
    expect((await stranger.browser.fetch(location)).status).toBe(404);
    const member = await dashboardUser(t, "member", accountId);
    const memberBilling = await (await member.browser.fetch("/dashboard/billing")).text();
    expect(memberBilling).toContain("Only an account owner can top up");
    expect((await member.browser.post("/dashboard/billing/topups", { amount: "20", method: "card", _csrf: csrfOf(memberBilling) })).status).toBe(403);
    expect((await browser.post("/dashboard/billing/topups", { amount: "20", method: "card" })).status).toBe(403);
  });

  it("offers both methods with their minimums", () => {
    expect(t.gateway.service("payments")!.methods()).toEqual([
      { method: "card", minimumUsd: 5 },
      { method: "usdt", minimumUsd: 12 },
    ]);
  });

  it("refuses a card top-up below 5 and a USDT one below 12, naming the minimum; nothing is stored", async () => {
    const { key } = await t.newAccountWithKey();
    const card = await call(t, "POST", "/v1/credits/topups", key, { method: "card", amount: 4.99 });
    expect(card.status).toBe(400);
    expect(card.body.error).toMatchObject({ code: "invalid_request", param: "amount", message: "the minimum card top-up is 5 USD" });
    const usdt = await call(t, "POST", "/v1/credits/topups", key, { method: "usdt", amount: "11.99" });
    expect(usdt.status).toBe(400);
    expect(usdt.body.error).toMatchObject({ code: "invalid_request", param: "amount" });
    expect(usdt.body.error.message).toContain("12 USD");
    expect((await call(t, "GET", "/v1/credits/topups", key)).body.data).toEqual([]);
  });

  it("a card top-up answers 201 with its Checkout URL; a USDT one with where and exactly what to pay", async () => {
    const { key } = await t.newAccountWithKey();
    const card = await call(t, "POST", "/v1/credits/topups", key, { method: "card", amount: "5.00" });
    expect(card.status).toBe(201);
    expect(card.body.data).toMatchObject({ method: "card", amount: 5, status: "pending", credited: false, taken_back: 0, flag: null });
    expect(card.body.data.id).toMatch(/^tu_[0-9a-f]{24}$/);
    expect(typeof card.body.data.checkout_url).toBe("string");
    const usdt = await call(t, "POST", "/v1/credits/topups", key, { method: "usdt", amount: 12 });
    expect(usdt.status).toBe(201);
    expect(usdt.body.data).toMatchObject({ method: "usdt", amount: 12, status: "pending", pay_to: RECEIVING_ADDRESS, network: "tron", token: "USDT" });
    expect(usdt.body.data.pay_amount).toMatch(/^12\.00\d{4}$/);
    expect(Date.parse(usdt.body.data.expires_at)).toBeGreaterThan(Date.now());
    const listed = await call(t, "GET", "/v1/credits/topups", key);
    expect(listed.body.data.map((row: any) => row.id).sort()).toEqual([usdt.body.data.id, card.body.data.id].sort());
  });

  it("Stripe down: 502/503 with a clear message, and the top-up stays pending", async () => {
    const { key } = await t.newAccountWithKey();
    stripe.outage = true;
    try {
      const answer = await call(t, "POST", "/v1/credits/topups", key, { method: "card", amount: 20 });
      expect([502, 503]).toContain(answer.status);
      expect(answer.body.error.message).toContain("stays pending");
    } finally {
      stripe.outage = false;
    }
    const listed = await call(t, "GET", "/v1/credits/topups", key);
    expect(listed.body.data).toEqual([expect.objectContaining({ status: "pending", checkout_url: null })]);
  });

  it("reconcile: a Checkout paid at Stripe but never credited here (no webhook came) is paid_not_credited", async () => {
    const { accountId, key } = await t.newAccountWithKey();
    const since = Date.now() - 60_000;
    const made = await call(t, "POST", "/v1/credits/topups", key, { method: "card", amount: 7 });
    expect(made.status).toBe(201);
    const row = (await t.admin("GET", `/admin/v1/accounts/${accountId}/topups`)).body.data[0];
    expect(row).toMatchObject({ id: made.body.data.id, account_id: accountId });
    expect(row.processor_ref).toMatch(/^cs_/);
    stripe.completeSession(row.processor_ref);
    const report = await t.admin("GET", `/admin/v1/payments/reconcile?since=${since}`);
    expect(report.status).toBe(200);
    const stripeReport = report.body.data.processors.find((processor: any) => processor.name === "stripe");
    expect(stripeReport.differences).toContainEqual(expect.objectContaining({ topup_id: row.id, kind: "paid_not_credited", processor_amount: 7, our_amount: 0 }));
  });

  it("documents the top-up routes (201 for a new one) and the operator's payment routes", async () => {
    const document: any = await (await fetch(`${t.url}/swagger/json`)).json();
    expect(Object.keys(document.paths["/v1/credits/topups"].post.responses)).toContain("201");
    expect(document.paths["/v1/credits/topups"].get).toBeDefined();
    expect(document.paths["/v1/credits/topups/{id}"].get).toBeDefined();
    for (const path of ["/admin/v1/payments/unmatched", "/admin/v1/payments/reconcile", "/admin/v1/accounts/{id}/topups"]) expect(document.paths[path].get).toBeDefined();
    expect(document.paths["/admin/v1/accounts/{id}/unblock"].post).toBeDefined();
  });

  it("a card plan with card payments on answers a subscription checkout to pay (no cycle yet)", async () => {
    const { accountId } = await t.newAccountWithKey();
    const bought = await t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "pro", funding: "card" });
    expect(bought.status).toBe(201);
    expect(bought.body.data).toMatchObject({ plan: "pro", funding: "card", status: "pending" });
    expect(typeof bought.body.data.checkout_url).toBe("string");
    const funds = await t.admin("GET", `/admin/v1/accounts/${accountId}/funds`);
    expect(funds.status).toBe(200);
    expect((await t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "gold", funding: "card" })).status).toBe(400);
    expect((await t.admin("POST", "/admin/v1/accounts/acct_doesnotexist/plan", { plan: "pro", funding: "card" })).status).toBe(404);
  });
});
