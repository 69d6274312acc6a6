import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/** Dashboard users through the admin API: a real gateway on SQLite, over HTTP. */

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
}, 30_000);
afterAll(async () => {
  await t.stop();
});

const PASSWORD = "correct-horse-battery-staple";

async function newAccount(name = "users test"): Promise<string> {
  const account = await t.admin("POST", "/admin/v1/accounts", { name });
  expect(account.status).toBe(201);
  return account.body.data.id;
}

/** A fresh address per test, so the tests share one gateway without colliding on the gateway-wide unique email. */
const uniqueEmail = (name: string) => `${name}-${crypto.randomUUID().slice(0, 8)}@example.com`;

/** The users table as the running gateway wrote it (read-only, beside the gateway's own connection). */
function storedUser(id: string): { email: string; role: string; password_hash: string; account_id: string } | null {
  const db = new Database(join(t.dataDir, "gateway.db"), { readonly: true });
  try {
    return db.query("SELECT email, role, password_hash, account_id FROM users WHERE id = ?").get(id) as never;
  } finally {
    db.close();
  }
}

describe("POST /admin/v1/accounts/:id/users", () => {
  it("creates a user: 201, its id, lower-cased email, role owner by default; the store keeps an argon2id hash only", async () => {
    const accountId = await newAccount();
    const email = uniqueEmail("Alice");
    const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email: `  ${email.toUpperCase()} `, password: PASSWORD });
    expect(created.status).toBe(201);
    expect(Object.keys(created.body.data).sort()).toEqual(["account_id", "created_at", "email", "id", "role"]);
    expect(created.body.data).toMatchObject({ email: email.toLowerCase(), role: "owner", account_id: accountId });
    expect(created.body.data.id).toMatch(/^usr_[0-9a-f]{24}$/);
    expect(Date.parse(created.body.data.created_at)).toBeGreaterThan(Date.now() - 60_000);
    const text = JSON.stringify(created.body);
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain("argon2");

    const stored = storedUser(created.body.data.id);
    expect(stored).not.toBeNull();
    expect(stored!.email).toBe(email.toLowerCase());
    expect(stored!.password_hash).toStartWith("$argon2id$");
    expect(stored!.password_hash).not.toContain(PASSWORD);
    expect(await Bun.password.verify(PASSWORD, stored!.password_hash)).toBe(true);

    const member = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email: uniqueEmail("bob"), password: PASSWORD, role: "member" });
    expect(member.status).toBe(201);
    expect(member.body.data.role).toBe("member");
  });

  it("409 conflict when the email is taken, in any case and by any account", async () => {
    const first = await newAccount();
    const second = await newAccount();
    const local = "carol-" + crypto.randomUUID().slice(0, 8);
    expect((await t.admin("POST", `/admin/v1/accounts/${first}/users`, { email: `${local}@example.com`, password: PASSWORD })).status).toBe(201);
    for (const [accountId, email] of [
      [first, `${local}@example.com`],
      [first, `${local.toUpperCase()}@Example.COM`],
      [second, `${local}@EXAMPLE.com`],
    ]) {
      const again = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email, password: PASSWORD });
      expect({ email, status: again.status, code: again.body.error?.code }).toEqual({ email, status: 409, code: "conflict" });
      expect(JSON.stringify(again.body)).not.toContain(PASSWORD);
    }
    // Alice@Example.com and alice@example.com: one person.
    const mixed = uniqueEmail("Dave");
    expect((await t.admin("POST", `/admin/v1/accounts/${first}/users`, { email: mixed, password: PASSWORD })).status).toBe(201);
    expect((await t.admin("POST", `/admin/v1/accounts/${first}/users`, { email: mixed.toLowerCase(), password: PASSWORD })).status).toBe(409);
  });

  it("404 for an unknown account; 400 for a malformed account id", async () => {
    const unknown = await t.admin("POST", "/admin/v1/accounts/acct_does_not_exist/users", { email: uniqueEmail("erin"), password: PASSWORD });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("not_found");
    const malformed = await t.admin("POST", "/admin/v1/accounts/bad%20id/users", { email: uniqueEmail("erin"), password: PASSWORD });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.param).toBe("id");
  });

  it("400 for a short or long password, naming password, with the rule and never the password", async () => {
    const accountId = await newAccount();
    for (const password of ["short-pw1", "x".repeat(257)]) {
      const refused = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email: uniqueEmail("frank"), password });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param: "password" });
      expect(refused.body.error.message).toContain("10 to 256 characters");
      expect(JSON.stringify(refused.body)).not.toContain(password);
    }
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}/users`)).body.data).toEqual([]);
  });

  it("400 for a bad email, a bad role or a missing or non-string field, naming it", async () => {
    const accountId = await newAccount();
    const cases: [Record<string, unknown>, string][] = [
      [{ email: "not-an-email", password: PASSWORD }, "email"],
      [{ email: "a b@example.com", password: PASSWORD }, "email"],
      [{ email: "a@example", password: PASSWORD }, "email"],
      [{ email: uniqueEmail("gina"), password: PASSWORD, role: "admin" }, "role"],
      [{ email: uniqueEmail("gina"), password: PASSWORD, role: "Owner" }, "role"],
      [{ email: uniqueEmail("gina"), password: PASSWORD, role: null }, "role"],
      [{ password: PASSWORD }, "email"],
      [{ email: uniqueEmail("gina") }, "password"],
      [{ email: uniqueEmail("gina"), password: 1234567890123 }, "password"],
    ];
    for (const [body, param] of cases) {
      const refused = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, body);
      expect({ body, status: refused.status, param: refused.body.error?.param }).toEqual({ body, status: 400, param });
      expect(refused.body.error.code).toBe("invalid_request");
      expect(JSON.stringify(refused.body)).not.toContain(PASSWORD);
    }
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}/users`)).body.data).toEqual([]);
  });

  it("401 without the admin token, and nothing is created", async () => {
    const accountId = await newAccount();
    const email = uniqueEmail("hank");
    const refused = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email, password: PASSWORD }, "wrong-token");
    expect(refused.status).toBe(401);
    expect(refused.body.error.type).toBe("authentication_error");
    const bare = await fetch(`${t.url}/admin/v1/accounts/${accountId}/users`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    expect(bare.status).toBe(401);
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}/users`, undefined, "wrong-token")).status).toBe(401);
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}/users`)).body.data).toEqual([]);
  });
});

describe("GET /admin/v1/accounts/:id/users", () => {
  it("lists the account's users, oldest first, never a hash or a password", async () => {
    const accountId = await newAccount();
    const other = await newAccount();
    const emails = [uniqueEmail("ivy"), uniqueEmail("jack")];
    const ids: string[] = [];
    for (const [i, email] of emails.entries()) {
      const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/users`, { email, password: PASSWORD, role: i === 0 ? "owner" : "member" });
      expect(created.status).toBe(201);
      ids.push(created.body.data.id);
    }
    await t.admin("POST", `/admin/v1/accounts/${other}/users`, { email: uniqueEmail("kim"), password: PASSWORD });

    const listed = await t.admin("GET", `/admin/v1/accounts/${accountId}/users`);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([
      { id: ids[0], email: emails[0], role: "owner", account_id: accountId, created_at: expect.any(String) },
      { id: ids[1], email: emails[1], role: "member", account_id: accountId, created_at: expect.any(String) },
    ]);
    const text = JSON.stringify(listed.body);
    expect(text).not.toContain("argon2");
    expect(text).not.toContain("hash");
    expect(text).not.toContain(PASSWORD);
  });

  it("404 for an unknown account; 400 for a query parameter (the list takes none)", async () => {
    const unknown = await t.admin("GET", "/admin/v1/accounts/acct_does_not_exist/users");
    expect(unknown.status).toBe(404);
    const accountId = await newAccount();
    const query = await t.admin("GET", `/admin/v1/accounts/${accountId}/users?limit=5`);
    expect(query.status).toBe(400);
    expect(query.body.error.param).toBe("limit");
  });
});
