import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * The dashboard's sessions, CSRF and escaping over plain HTTP (the browser suites in test/e2e-browser drive the
 * same pages in Chromium): what an attacker without a browser tries.
 */
const HOSTILE = `<img src=x onerror="alert(1)">`;

/** The markup outside quoted attribute values (inside one, a `<` is text: only its quote could end it, and that is escaped). */
const markup = (html: string) => html.replace(/="[^"]*"/g, '=""');
const PASSWORD = "correct horse battery staple";

let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway({ env: { DASHBOARD_SIGNUP: "true", ROUTE_PROOF_PER_HOUR: "1" } });
});
afterAll(() => t?.stop());

/** A cookie jar of one client: the Set-Cookie headers it was sent, as a Cookie header. */
class Client {
  cookies = new Map<string, string>();
  constructor(readonly base: string) {}
  get cookie() {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ");
  }
  async fetch(path: string, init: RequestInit = {}) {
    const response = await fetch(this.base + path, { redirect: "manual", ...init, headers: { cookie: this.cookie, ...(init.headers as Record<string, string>) } });
    for (const set of response.headers.getSetCookie()) {
      const [pair] = set.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (/Max-Age=0/.test(set)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }
  post(path: string, form: Record<string, string>, headers: Record<string, string> = {}) {
    return this.fetch(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: new URLSearchParams(form) });
  }
}

function csrfOf(html: string): string {
  return /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? "";
}

async function signIn(email: string, password = PASSWORD) {
  const client = new Client(t.url);
  const form = await (await client.fetch("/dashboard/sign-in")).text();
  const response = await client.post("/dashboard/sign-in", { email, password, _csrf: csrfOf(form) });
  return { client, response };
}

async function accountWithUser(name = "Acme") {
  const account = await t.admin("POST", "/admin/v1/accounts", { name });
  const accountId = account.body.data.id as string;
  const email = `u-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const user = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email, password: PASSWORD, role: "owner" });
  expect(user.status).toBe(201);
  return { accountId, email };
}

describe("dashboard sessions", () => {
  it("sets an HttpOnly, SameSite=Lax session cookie on sign-in, Secure when a proxy says https, and keeps only its hash", async () => {
    const { email } = await accountWithUser();
    const { client, response } = await signIn(email);
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe("/dashboard/keys");
    const set = response.headers.getSetCookie().find((c) => c.startsWith("gw_session="))!;
    expect(set).toContain("HttpOnly");
    expect(set).toContain("SameSite=Lax");
    expect(set).not.toContain("Secure");
    const id = client.cookies.get("gw_session")!;
    expect(id.length).toBeGreaterThanOrEqual(43);
    const { Database } = await import("bun:sqlite");
    const db = new Database(`${t.dataDir}/gateway.db`, { readonly: true });
    const rows = db.query("select id_hash from dashboard_sessions").all() as { id_hash: string }[];
    db.close();
    expect(rows.some((row) => row.id_hash === new Bun.CryptoHasher("sha256").update(id).digest("hex"))).toBe(true);
    expect(rows.some((row) => row.id_hash === id)).toBe(false);

    const overHttps = new Client(t.url);
    const form = await (await overHttps.fetch("/dashboard/sign-in", { headers: { "x-forwarded-proto": "https" } })).text();
    const secure = await overHttps.post("/dashboard/sign-in", { email, password: PASSWORD, _csrf: csrfOf(form) }, { "x-forwarded-proto": "https" });
    expect(secure.headers.getSetCookie().find((c) => c.startsWith("gw_session="))).toContain("Secure");
  });

  it("answers a wrong password and an unknown email alike, and never with a session", async () => {
    const { email } = await accountWithUser();
    const wrong = await signIn(email, "not the password at all");
    const unknown = await signIn("nobody-" + crypto.randomUUID().slice(0, 6) + "@example.com");
    expect(wrong.response.status).toBe(401);
    expect(unknown.response.status).toBe(401);
    expect(wrong.client.cookies.has("gw_session")).toBe(false);
    const text = (html: string) => /role="alert">([^<]*)</.exec(html)?.[1];
    expect(text(await wrong.response.text())).toBe(text(await unknown.response.text()));
  });

  it("refuses a sign-in without the form's token (login CSRF)", async () => {
    const { email } = await accountWithUser();
    const client = new Client(t.url);
    await client.fetch("/dashboard/sign-in");
    const response = await client.post("/dashboard/sign-in", { email, password: PASSWORD });
    expect(response.status).toBe(403);
    expect(client.cookies.has("gw_session")).toBe(false);
  });

  it("sign out revokes the session on the server: the old cookie opens nothing afterwards", async () => {
    const { email } = await accountWithUser();
    const { client } = await signIn(email);
    const stolen = client.cookies.get("gw_session")!;
    const page = await (await client.fetch("/dashboard/keys")).text();
    expect(page).toContain("Sign out");
    const out = await client.post("/dashboard/sign-out", { _csrf: csrfOf(page) });
    expect(out.status).toBe(303);
    const replay = await fetch(`${t.url}/dashboard/keys`, { redirect: "manual", headers: { cookie: `gw_session=${stolen}` } });
    expect(replay.status).toBe(303);
    expect(replay.headers.get("location")).toBe("/dashboard/sign-in");
  });

  it("refuses a state change without the CSRF token, with a foreign one, or sent cross-site", async () => {
    const { email } = await accountWithUser();
    const { client } = await signIn(email);
    const page = await (await client.fetch("/dashboard/keys")).text();
    const token = csrfOf(page);
    expect((await client.post("/dashboard/sign-out", {})).status).toBe(403);
    const other = await signIn((await accountWithUser()).email);
    const otherToken = csrfOf(await (await other.client.fetch("/dashboard/keys")).text());
    expect((await client.post("/dashboard/sign-out", { _csrf: otherToken })).status).toBe(403);
    expect((await client.post("/dashboard/sign-out", { _csrf: token }, { "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await client.post("/dashboard/sign-out", { _csrf: token }, { origin: "https://evil.example" })).status).toBe(403);
    // Still signed in after all of them.
    expect((await client.fetch("/dashboard/keys")).status).toBe(200);
  });

  it("rate-limits failed sign-ins per email with 429 and Retry-After, even with the right password afterwards", async () => {
    const { email } = await accountWithUser();
    for (let i = 0; i < 5; i++) expect((await signIn(email, "wrong password " + i)).response.status).toBe(401);
    const limited = await signIn(email);
    expect(limited.response.status).toBe(429);
    expect(Number(limited.response.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.client.cookies.has("gw_session")).toBe(false);
  });

  it("serves pages with a CSP that allows nothing outside the gateway, no caching, no framing", async () => {
    const response = await fetch(`${t.url}/dashboard/sign-in`);
    expect(response.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("x-frame-options")).toBe("DENY");
    const html = await response.text();
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it("redirects / to the dashboard and an anonymous visitor to the sign-in page", async () => {
    const root = await fetch(`${t.url}/`, { redirect: "manual" });
    expect(root.headers.get("location")).toBe("/dashboard");
    for (const path of ["/dashboard/keys", "/dashboard/logs", "/dashboard/usage", "/dashboard/billing", "/dashboard/route-proof"]) {
      const response = await fetch(t.url + path, { redirect: "manual" });
      expect(response.status).toBe(303);
      expect(response.headers.get("location")).toBe("/dashboard/sign-in");
    }
  });

  it("signs up (when switched on) an account with zero balance and its owner, and refuses a taken email", async () => {
    const client = new Client(t.url);
    const form = await (await client.fetch("/dashboard/sign-up")).text();
    const email = `new-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const created = await client.post("/dashboard/sign-up", { name: "Fresh", email, password: PASSWORD, _csrf: csrfOf(form) });
    expect(created.status).toBe(303);
    expect(client.cookies.has("gw_session")).toBe(true);
    const billing = await (await client.fetch("/dashboard/billing")).text();
    expect(billing).toContain("Fresh");
    const again = new Client(t.url);
    const form2 = await (await again.fetch("/dashboard/sign-up")).text();
    const taken = await again.post("/dashboard/sign-up", { name: "Twice", email: email.toUpperCase(), password: PASSWORD, _csrf: csrfOf(form2) });
    expect(taken.status).toBe(409);
  });
});

describe("route proof cap", () => {
  it("runs at most route_proof.per_hour proofs an hour over all accounts; past it nothing is claimed or sent", async () => {
    const before = t.fake.requests.length;
    const first = await signIn((await accountWithUser()).email);
    const page = await (await first.client.fetch("/dashboard/route-proof")).text();
    const ran = await first.client.post("/dashboard/route-proof", { model: "gpt-6-luna", _csrf: csrfOf(page) });
    expect(ran.status).toBe(303);
    expect(t.fake.requests.length).toBe(before + 1);
    const second = await signIn((await accountWithUser()).email);
    const page2 = await (await second.client.fetch("/dashboard/route-proof")).text();
    const capped = await second.client.post("/dashboard/route-proof", { model: "gpt-6-luna", _csrf: csrfOf(page2) });
    expect(capped.status).toBe(429);
    expect(await capped.text()).toContain("limited to 1 an hour");
    expect(t.fake.requests.length).toBe(before + 1);
    // Not claimed: the button is still there for that account.
    expect(await (await second.client.fetch("/dashboard/route-proof")).text()).toContain("Run route proof");
  });
});

describe("dashboard escaping", () => {
  it("shows hostile account names, key names and credit references as text on every page", async () => {
    const { accountId, email } = await accountWithUser(HOSTILE);
    await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 10, kind: "card", reference: HOSTILE });
    const key = await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: HOSTILE });
    await t.client(key.body.data.key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] });
    const { client } = await signIn(email);
    for (const path of ["/dashboard/keys", "/dashboard/logs", "/dashboard/usage", "/dashboard/billing", "/dashboard/route-proof"]) {
      const response = await client.fetch(path);
      expect(response.status).toBe(200);
      const html = await response.text();
      expect(markup(html)).not.toContain("<img");
      if (path !== "/dashboard/usage" && path !== "/dashboard/route-proof") expect(html).toContain("&lt;img src=x");
    }
    const operator = new Client(t.url);
    const form = await (await operator.fetch("/dashboard/admin/sign-in")).text();
    const field = /name="([a-z_]+)" [^>]*type="password"|type="password" [^>]*name="([a-z_]+)"/.exec(form);
    const tokenField = field?.[1] ?? field?.[2] ?? "token";
    const signedIn = await operator.post("/dashboard/admin/sign-in", { [tokenField]: ADMIN_TOKEN, _csrf: csrfOf(form) });
    expect(signedIn.status).toBe(303);
    for (const path of [`/dashboard/admin?q=${encodeURIComponent("img")}`, `/dashboard/admin/accounts/${accountId}`]) {
      const html = await (await operator.fetch(path)).text();
      expect(markup(html)).not.toContain("<img");
      expect(html).toContain("&lt;img src=x");
    }
  });
});
