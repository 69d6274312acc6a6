import { afterAll, beforeAll, describe, expect, it, setSystemTime } from "bun:test";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { computeUsage } from "../fake-upstream/openai.ts";
import { usdToNano } from "../../src/core/money.ts";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.stop();
});

async function newAccount(name = "admin test"): Promise<string> {
  const created = await t.admin("POST", "/admin/v1/accounts", { name });
  expect(created.status).toBe(201);
  return created.body.data.id;
}

function credit(accountId: string, amount: unknown, kind: string, reference: string = crypto.randomUUID()) {
  return t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount, kind, reference });
}

async function balanceOf(accountId: string): Promise<number> {
  const { status, body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
  expect(status).toBe(200);
  return body.data.balance;
}

/** A 400 invalid_request whose message names the field at fault (never Elysia's 422). */
function expectInvalid(response: { status: number; body: any }, field: string) {
  expect({ status: response.status, error: response.body?.error }).toMatchObject({
    status: 400,
    error: { type: "invalid_request_error", code: "invalid_request" },
  });
  expect(response.body.error.message).toContain(field);
}

/** A top-up under the minimum of its kind: 400 on param amount. */
function expectBelowMinimum(response: { status: number; body: any }, kind: string) {
  expect(response.status).toBe(400);
  expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", param: "amount" });
  expect(response.body.error.message).toContain(`minimum ${kind}`);
}

function expectNotFound(response: { status: number; body: any }) {
  expect(response.status).toBe(404);
  expect(response.body.error).toMatchObject({ code: "not_found" });
}

describe("admin authentication", () => {
  let accountId: string;
  let keyId: string;
  beforeAll(async () => {
    ({ accountId, keyId } = await t.newAccountWithKey());
  });

  const endpoints = () =>
    [
      ["POST", "/admin/v1/accounts", { name: "x" }],
      ["GET", `/admin/v1/accounts/${accountId}`, undefined],
      ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 5, kind: "card", reference: crypto.randomUUID() }],
      ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k" }],
      ["DELETE", `/admin/v1/keys/${keyId}`, undefined],
      ["GET", `/admin/v1/accounts/${accountId}/requests`, undefined],
      ["GET", "/admin/v1/accounts?limit=5", undefined],
      ["GET", `/admin/v1/accounts/${accountId}/keys`, undefined],
    ] as const;

  it("refuses every endpoint without a token", async () => {
    for (const [method, path, body] of endpoints()) {
      const response = await fetch(t.url + path, {
        method,
        headers: body ? { "content-type": "application/json" } : {},
        body: body ? JSON.stringify(body) : undefined,
      });
      expect({ path, method, status: response.status }).toEqual({ path, method, status: 401 });
      expect(((await response.json()) as any).error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
    }
  });

  it("refuses every endpoint with a wrong token", async () => {
    for (const [method, path, body] of endpoints()) {
      const response = await t.admin(method, path, body, "wrong-token");
      expect({ path, method, status: response.status }).toEqual({ path, method, status: 401 });
      expect(response.body.error.type).toBe("authentication_error");
    }
    // Nothing was changed by the refused calls.
    expect(await balanceOf(accountId)).toBe(10);
    expect((await t.admin("DELETE", `/admin/v1/keys/${keyId}`)).status).toBe(200);
  });

  it("refuses an API key used as the admin token", async () => {
    const { key } = await t.newAccountWithKey();
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}`, undefined, key)).status).toBe(401);
  });

  it("authenticates before validating: a bad body without a token is 401, not 400", async () => {
    expect((await t.admin("POST", "/admin/v1/accounts", {}, "wrong-token")).status).toBe(401);
    expect((await t.admin("POST", "/admin/v1/accounts", "{not json", "wrong-token")).status).toBe(401);
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=0`, undefined, "wrong-token")).status).toBe(401);
  });
});

describe("POST /admin/v1/accounts", () => {
  it("creates an account with 201 {data:{id, name, created_at}} and a zero balance", async () => {
    const before = Date.now();
    const created = await t.admin("POST", "/admin/v1/accounts", { name: "Acme Ltd" });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ name: "Acme Ltd" });
    expect(typeof created.body.data.id).toBe("string");
    expect(Date.parse(created.body.data.created_at)).toBeGreaterThanOrEqual(before - 1000);
    const shown = await t.admin("GET", `/admin/v1/accounts/${created.body.data.id}`);
    expect(shown.status).toBe(200);
    expect(shown.body.data).toMatchObject({ id: created.body.data.id, name: "Acme Ltd", balance: 0 });
  });

  it("rejects a missing, empty or non-string name with 400", async () => {
    expectInvalid(await t.admin("POST", "/admin/v1/accounts", {}), "name");
    expectInvalid(await t.admin("POST", "/admin/v1/accounts", { name: "" }), "name");
    expectInvalid(await t.admin("POST", "/admin/v1/accounts", { name: 42 }), "name");
  });

  it("rejects a body that is not JSON with 400", async () => {
    const response = await t.admin("POST", "/admin/v1/accounts", "{not json");
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request" });
    expect(response.body.error.message).toMatch(/JSON/);
  });
});

describe("GET /admin/v1/accounts/:id", () => {
  it("answers 404 not_found for an unknown account", async () => {
    expectNotFound(await t.admin("GET", "/admin/v1/accounts/acct_nope"));
  });

  it("shows an exact balance after several credits", async () => {
    const accountId = await newAccount();
    expect((await credit(accountId, 5, "card")).status).toBe(201);
    expect((await credit(accountId, "12.5", "usdt")).status).toBe(201);
    const last = await credit(accountId, 0.000000001, "bonus");
    expect(last.status).toBe(201);
    expect(last.body.data.balance).toBe(17.500000001);
    const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
    expect(body.data.balance).toBe(17.500000001);
    expect(body.data.total_credits).toBe(17.500000001);
    expect(usdToNano(body.data.balance)).toBe(17_500_000_001);
  });
});

describe("POST /admin/v1/accounts/:id/credits", () => {
  let accountId: string;
  beforeAll(async () => {
    accountId = await newAccount();
  });

  it("answers 201 {data:{entry_id, balance}}", async () => {
    const id = await newAccount();
    const response = await credit(id, 7.25, "card");
    expect(response.status).toBe(201);
    expect(typeof response.body.data.entry_id).toBe("string");
    expect(response.body.data.balance).toBe(7.25);
  });

  it("enforces the 5 USD card minimum", async () => {
    const id = await newAccount();
    expectBelowMinimum(await credit(id, 4.99, "card"), "card");
    expectBelowMinimum(await credit(id, "4.999999999", "card"), "card");
    expect((await credit(id, 5, "card")).status).toBe(201);
    expect(await balanceOf(id)).toBe(5);
  });

  it("enforces the 12 USD usdt minimum", async () => {
    const id = await newAccount();
    expectBelowMinimum(await credit(id, 11.99, "usdt"), "usdt");
    expect((await credit(id, 12, "usdt")).status).toBe(201);
    expect(await balanceOf(id)).toBe(12);
  });

  it("has no minimum for bonus, voucher and promotional credits", async () => {
    const id = await newAccount();
    for (const kind of ["bonus", "voucher", "promotional"]) expect((await credit(id, 1, kind)).status).toBe(201);
    expect(await balanceOf(id)).toBe(3);
  });

  it("rejects invalid amounts with 400 naming amount", async () => {
    for (const amount of [-1, 0, "0", "-5", "abc", "", true, null, 1.0000000001, "1.0000000001", "1e3"]) {
      expectInvalid(await credit(accountId, amount, "bonus"), "amount");
    }
    const missing = await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { kind: "bonus", reference: "r-missing" });
    expectInvalid(missing, "amount");
    expect(await balanceOf(accountId)).toBe(0);
  });

  it("rejects an unknown kind with 400 naming kind", async () => {
    expectInvalid(await credit(accountId, 10, "paypal"), "kind");
    expectInvalid(await credit(accountId, 10, "usage"), "kind");
    const missing = await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 10, reference: "r-kind" });
    expectInvalid(missing, "kind");
  });

  it("rejects a missing or empty reference with 400 naming reference", async () => {
    expectInvalid(await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 10, kind: "bonus" }), "reference");
    expectInvalid(await credit(accountId, 10, "bonus", ""), "reference");
    expect(await balanceOf(accountId)).toBe(0);
  });

  it("answers 404 not_found for an unknown account", async () => {
    expectNotFound(await credit("acct_nope", 10, "card"));
  });

  it("credits a reference once: the replay returns the same entry and balance", async () => {
    const id = await newAccount();
    const reference = "stripe_pi_" + crypto.randomUUID();
    const first = await credit(id, 20, "card", reference);
    const second = await credit(id, 20, "card", reference);
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body.data.entry_id).toBe(first.body.data.entry_id);
    expect(second.body.data.balance).toBe(20);
    // A number and its decimal string are the same amount.
    expect((await credit(id, "20.000", "card", reference)).body.data.entry_id).toBe(first.body.data.entry_id);
    expect(await balanceOf(id)).toBe(20);
  });

  it("answers 409 conflict when a reference is reused with another amount or account", async () => {
    const id = await newAccount();
    const other = await newAccount();
    const reference = "ref_" + crypto.randomUUID();
    expect((await credit(id, 10, "card", reference)).status).toBe(201);
    const otherAmount = await credit(id, 11, "card", reference);
    expect(otherAmount.status).toBe(409);
    expect(otherAmount.body.error.code).toBe("conflict");
    const otherAccount = await credit(other, 10, "card", reference);
    expect(otherAccount.status).toBe(409);
    expect(await balanceOf(id)).toBe(10);
    expect(await balanceOf(other)).toBe(0);
  });

  it("credits each of several concurrent replays of one reference once", async () => {
    const id = await newAccount();
    const reference = "ref_" + crypto.randomUUID();
    const answers = await Promise.all(Array.from({ length: 8 }, () => credit(id, 6, "card", reference)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(8).fill(201));
    expect(new Set(answers.map((answer) => answer.body.data.entry_id)).size).toBe(1);
    expect(await balanceOf(id)).toBe(6);
  });
});

describe("POST /admin/v1/accounts/:id/keys", () => {
  let accountId: string;
  beforeAll(async () => {
    accountId = await newAccount();
    await credit(accountId, 10, "card");
  });
  const createKey = (body: unknown, id = accountId) => t.admin("POST", `/admin/v1/accounts/${id}/keys`, body);

  it("answers 201 with the full key, a masked label and the key's settings", async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const created = await createKey({
      name: "prod",
      limit: 2.5,
      models: ["gpt-6-luna", "deepseek-flash"],
      rate_limit: { requests_per_minute: 30, tokens_per_minute: 10_000 },
      expires_at: expiresAt,
    });
    expect(created.status).toBe(201);
    const data = created.body.data;
    expect(data).toMatchObject({
      account_id: accountId,
      name: "prod",
      limit: 2.5,
      models: ["gpt-6-luna", "deepseek-flash"],
      rate_limit: { requests_per_minute: 30, tokens_per_minute: 10_000 },
      expires_at: expiresAt,
    });
    expect(data.id).toMatch(/^key_/);
    expect(data.key).toMatch(/^sk-gw-[A-Za-z0-9]{40}$/);
    expect(data.label.startsWith("sk-gw-")).toBe(true);
    expect(data.label).not.toContain(data.key);
  });

  it("creates an unrestricted key from a name alone", async () => {
    const created = await createKey({ name: "plain" });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ limit: null, models: null, expires_at: null });
    expect(created.body.data.rate_limit).toEqual({ requests_per_minute: null, tokens_per_minute: null });
  });

  it("rejects a missing or empty name with 400", async () => {
    expectInvalid(await createKey({}), "name");
    expectInvalid(await createKey({ name: "" }), "name");
  });

  it("rejects models that are not an array of catalog ids with 400", async () => {
    expectInvalid(await createKey({ name: "k", models: "gpt-6-luna" }), "models");
    expectInvalid(await createKey({ name: "k", models: [1, 2] }), "models");
    expectInvalid(await createKey({ name: "k", models: [] }), "models");
    const unknown = await createKey({ name: "k", models: ["gpt-6-luna", "not-a-model"] });
    expectInvalid(unknown, "models");
    expect(unknown.body.error.message).toContain("not-a-model");
  });

  it("rejects a rate_limit of the wrong types with 400", async () => {
    expectInvalid(await createKey({ name: "k", rate_limit: { requests_per_minute: "ten" } }), "rate_limit");
    expectInvalid(await createKey({ name: "k", rate_limit: { tokens_per_minute: 1.5 } }), "rate_limit");
    expectInvalid(await createKey({ name: "k", rate_limit: { requests_per_minute: 0 } }), "rate_limit");
    expectInvalid(await createKey({ name: "k", rate_limit: 60 }), "rate_limit");
    expectInvalid(await createKey({ name: "k", rate_limit: "60/min" }), "rate_limit");
  });

  it("rejects an invalid limit or expires_at with 400", async () => {
    expectInvalid(await createKey({ name: "k", limit: -1 }), "limit");
    expectInvalid(await createKey({ name: "k", limit: 0 }), "limit");
    expectInvalid(await createKey({ name: "k", limit: 0.0000000001 }), "limit");
    expectInvalid(await createKey({ name: "k", expires_at: "tomorrow" }), "expires_at");
    expectInvalid(await createKey({ name: "k", expires_at: new Date(Date.now() - 1000).toISOString() }), "expires_at");
  });

  it("answers 404 not_found for an unknown account", async () => {
    expectNotFound(await createKey({ name: "k" }, "acct_nope"));
  });

  it("shows the full key only in the creation answer", async () => {
    const created = await createKey({ name: "secret" });
    const { key, id } = created.body.data;
    await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] });
    for (const path of [`/admin/v1/accounts/${accountId}`, `/admin/v1/accounts/${accountId}/requests`]) {
      const shown = await t.admin("GET", path);
      expect(shown.status).toBe(200);
      expect(JSON.stringify(shown.body)).not.toContain(key);
    }
    const log = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests`);
    expect(log.body.data.some((row: any) => row.key_id === id)).toBe(true);
    const deleted = await t.admin("DELETE", `/admin/v1/keys/${id}`);
    expect(JSON.stringify(deleted.body)).not.toContain(key);
  });
});

describe("DELETE /admin/v1/keys/:id", () => {
  it("revokes the key at once and answers 404 the second time", async () => {
    const { key, keyId } = await t.newAccountWithKey();
    const client = t.client(key);
    await client.models.list();
    const deleted = await t.admin("DELETE", `/admin/v1/keys/${keyId}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toMatchObject({ id: keyId, deleted: true });
    const refused = await client.models.list().then(
      () => null,
      (error) => error,
    );
    expect(refused).toMatchObject({ status: 401, code: "invalid_api_key" });
    expectNotFound(await t.admin("DELETE", `/admin/v1/keys/${keyId}`));
  });

  it("answers 404 not_found for an unknown key", async () => {
    expectNotFound(await t.admin("DELETE", "/admin/v1/keys/key_nope"));
  });
});

describe("GET /admin/v1/accounts/:id/requests", () => {
  const MODEL = "gpt-6-luna";
  let accountId: string;
  let keyId: string;
  const prompts = ["one", "two two", "three three three", "four four four four", "five five five five five"];
  const ids: string[] = [];

  beforeAll(async () => {
    let key: string;
    ({ accountId, keyId, key } = await t.newAccountWithKey({ credit: 10 }));
    for (const content of prompts) {
      const { response } = await t
        .client(key)
        .chat.completions.create({ model: MODEL, messages: [{ role: "user", content }] })
        .withResponse();
      ids.push(response.headers.get("x-gateway-request-id")!);
      // Distinct milliseconds: the cursor is the creation time (see the same-millisecond test below).
      await Bun.sleep(3);
    }
  });

  it("lists every request newest first with its key, model, tokens, cost and status", async () => {
    const log = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests`);
    expect(log.status).toBe(200);
    const rows = log.body.data;
    expect(rows.map((row: any) => row.id)).toEqual([...ids].reverse());
    expect(log.body.next_before).toBeNull();
    const times = rows.map((row: any) => Date.parse(row.created_at));
    expect(times.every((time: number) => Number.isFinite(time))).toBe(true);
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    for (const [index, row] of rows.entries()) {
      const usage = computeUsage({ model: MODEL, messages: [{ role: "user", content: prompts[prompts.length - 1 - index]! }] });
      expect(row).toMatchObject({
        key_id: keyId,
        model: MODEL,
        status: "success",
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
      });
      expect(row.cost).toBeGreaterThan(0);
    }
    const spent = rows.reduce((sum: number, row: any) => sum + usdToNano(row.cost), 0);
    expect(usdToNano(await balanceOf(accountId))).toBe(usdToNano(10) - spent);
  });

  it("walks all requests with limit=2 and before=next_before, without duplicates", async () => {
    const seen: string[] = [];
    let before: string | null = null;
    for (let page = 0; page < 10; page++) {
      const query: string = `limit=2${before ? `&before=${encodeURIComponent(before)}` : ""}`;
      const log = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?${query}`);
      expect(log.status).toBe(200);
      expect(log.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...log.body.data.map((row: any) => row.id));
      before = log.body.next_before;
      if (before === null) break;
    }
    expect(seen).toEqual([...ids].reverse());
    expect(new Set(seen).size).toBe(5);
  });

  it("walks requests created in the same millisecond without losing any", async () => {
    const { accountId: id, key } = await t.newAccountWithKey({ credit: 10 });
    const client = t.client(key);
    setSystemTime(new Date(Date.now() + 1000));
    try {
      for (let index = 0; index < 5; index++) {
        await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `burst ${index}` }] });
      }
    } finally {
      setSystemTime();
    }
    const all = (await t.admin("GET", `/admin/v1/accounts/${id}/requests`)).body.data.map((row: any) => row.id);
    expect(all.length).toBe(5);
    const seen: string[] = [];
    let before: string | null = null;
    for (let page = 0; page < 10; page++) {
      const query: string = `limit=2${before ? `&before=${encodeURIComponent(before)}` : ""}`;
      const log = await t.admin("GET", `/admin/v1/accounts/${id}/requests?${query}`);
      seen.push(...log.body.data.map((row: any) => row.id));
      before = log.body.next_before;
      if (before === null) break;
    }
    expect(seen).toEqual(all);
  });

  it("accepts an ISO time as the before cursor", async () => {
    const log = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?before=${new Date(Date.now() + 60_000).toISOString()}`);
    expect(log.status).toBe(200);
    expect(log.body.data.length).toBe(5);
    const old = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?before=2000-01-01T00:00:00Z`);
    expect(old.body.data).toEqual([]);
    expect(old.body.next_before).toBeNull();
  });

  it("rejects a bad before or limit with 400", async () => {
    expectInvalid(await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?before=yesterday-ish`), "before");
    for (const limit of ["0", "501", "abc", "1.5", "-1"]) {
      expectInvalid(await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=${limit}`), "limit");
    }
  });

  it("answers 404 not_found for an unknown account", async () => {
    expectNotFound(await t.admin("GET", "/admin/v1/accounts/acct_nope/requests"));
  });

  it("lists nothing for an account without requests", async () => {
    const id = await newAccount();
    const log = await t.admin("GET", `/admin/v1/accounts/${id}/requests`);
    expect(log.body).toEqual({ data: [], next_before: null });
  });
});
