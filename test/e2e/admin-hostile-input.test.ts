import { SQL } from "bun";
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { join } from "node:path";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * Hostile admin input through real HTTP, on SQLite and on Postgres (when POSTGRES_TEST_URL, or a
 * postgres:// DATABASE_URL, names a server whose user may create databases): every answer is the
 * same 400 naming the field on both stores, never a 500 from one of them and a silent accept from
 * the other.
 */
const POSTGRES_URL: string | undefined =
  process.env.POSTGRES_TEST_URL ?? (/^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "") ? process.env.DATABASE_URL : undefined);

interface Store {
  t: TestGateway;
  /** `select typeof(rpm)`-style probe of the stored column types, or null where the store cannot say. */
  columnTypes(keyId: string): Promise<{ rpm: string; tpm: string } | null>;
  close(): Promise<void>;
}

async function sqliteStore(): Promise<Store> {
  const t = await startTestGateway();
  return {
    t,
    async columnTypes(keyId) {
      const db = new Database(join(t.dataDir, "gateway.db"), { readonly: true });
      try {
        return db.query("select typeof(rpm) as rpm, typeof(tpm) as tpm from api_keys where id = ?").get(keyId) as { rpm: string; tpm: string };
      } finally {
        db.close();
      }
    },
    close: () => t.stop(),
  };
}

async function postgresStore(serverUrl: string): Promise<Store> {
  const name = `gw_admin_input_${process.pid}_${Date.now().toString(36)}`;
  const admin = new SQL({ url: serverUrl, max: 1 });
  await admin.unsafe(`create database "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = "/" + name;
  const t = await startTestGateway({ env: { DATABASE_URL: url.toString() } });
  return {
    t,
    async columnTypes() {
      return null; // integer columns: a value out of their range is the 500 this suite pins away
    },
    async close() {
      await t.stop();
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.close();
    },
  };
}

type Answer = { status: number; body: any };

/** 400 invalid_request whose message and param name the field. */
function expectInvalid(answer: Answer, field: string, message?: string | RegExp) {
  expect({ status: answer.status, type: answer.body?.error?.type, code: answer.body?.error?.code }).toEqual({
    status: 400,
    type: "invalid_request_error",
    code: "invalid_request",
  });
  expect(answer.body.error.message).toContain(field);
  expect(answer.body.error.param).toBe(field);
  if (message !== undefined) expect(answer.body.error.message).toMatch(message);
}

const stores: [string, () => Promise<Store>][] = [["sqlite", sqliteStore]];
if (POSTGRES_URL) stores.push(["postgres", () => postgresStore(POSTGRES_URL)]);
else describe.skip("admin input on postgres (set POSTGRES_TEST_URL, e.g. postgres://postgres@127.0.0.1:5432/test)", () => it("skipped", () => {}));

for (const [storeName, open] of stores) {
  describe(`admin input on ${storeName}`, () => {
    let store: Store;
    let t: TestGateway;
    let accountId: string;
    beforeAll(async () => {
      store = await open();
      t = store.t;
      const created = await t.admin("POST", "/admin/v1/accounts", { name: "hostile input" });
      expect(created.status).toBe(201);
      accountId = created.body.data.id;
    });
    afterAll(async () => {
      await store.close();
    });

    const credit = (body: Record<string, unknown>, id = accountId) =>
      t.admin("POST", `/admin/v1/accounts/${id}/credits`, { amount: 5, kind: "bonus", reference: crypto.randomUUID(), ...body });
    const createKey = (body: Record<string, unknown>, id = accountId) => t.admin("POST", `/admin/v1/accounts/${id}/keys`, { name: "k", ...body });
    const balance = async (id = accountId) => (await t.admin("GET", `/admin/v1/accounts/${id}`)).body.data.balance;

    it("refuses a NUL byte in an account name, key name or credit reference with 400 naming the field", async () => {
      const before = await balance();
      expectInvalid(await t.admin("POST", "/admin/v1/accounts", { name: "Acme\u0000Ltd" }), "name", /NUL/);
      expectInvalid(await createKey({ name: "ci\u0000bot" }), "name", /NUL/);
      expectInvalid(await credit({ reference: "pi_\u0000" }), "reference", /NUL/);
      expectInvalid(await createKey({ models: ["gpt-6-luna\u0000"] }), "models");
      expect(await balance()).toBe(before);
    });

    it("refuses a NUL byte or any malformed id in a path with 400 naming id, on every :id route", async () => {
      for (const id of ["acct%00x", "a%00", "%00", "acct_%ff", "acct%20x", "x".repeat(201), "%F0%9F%98%80"]) {
        const answers = [
          await t.admin("GET", `/admin/v1/accounts/${id}`),
          await t.admin("GET", `/admin/v1/accounts/${id}/requests`),
          await t.admin("POST", `/admin/v1/accounts/${id}/credits`, { amount: 5, kind: "bonus", reference: crypto.randomUUID() }),
          await t.admin("POST", `/admin/v1/accounts/${id}/keys`, { name: "k" }),
          await t.admin("DELETE", `/admin/v1/keys/${id}`),
          // Another plugin's admin route (budget's plan purchase) is guarded the same way.
          await t.admin("POST", `/admin/v1/accounts/${id}/plan`, { plan: "pro", funding: "balance" }),
        ];
        for (const answer of answers) expectInvalid(answer, "id");
      }
      // A well-formed id that names nothing is still 404.
      expect((await t.admin("GET", "/admin/v1/accounts/acct_nope")).status).toBe(404);
      expect((await t.admin("DELETE", "/admin/v1/keys/key_nope")).status).toBe(404);
    });

    it("refuses control characters and unpaired surrogates in names and references, and keeps a real emoji", async () => {
      for (const name of ["tab\there", "line\nbreak", "del\u007f", "\ud800", "a\udc00b", "\ud83d"]) {
        expectInvalid(await t.admin("POST", "/admin/v1/accounts", JSON.stringify({ name })), "name");
      }
      // Lone surrogates as JSON escapes, the way a hostile client writes them.
      expectInvalid(await t.admin("POST", "/admin/v1/accounts", '{"name":"\\ud800x"}'), "name");
      expectInvalid(await credit({ reference: "ref\udfff" }), "reference");
      const emoji = await t.admin("POST", "/admin/v1/accounts", { name: "Café 😀 Ltd" });
      expect(emoji.status).toBe(201);
      expect((await t.admin("GET", `/admin/v1/accounts/${emoji.body.data.id}`)).body.data.name).toBe("Café 😀 Ltd");
    });

    it("refuses rate limits outside 1..1000000000 with the range, and stores an in-range one as an integer", async () => {
      for (const value of [1e20, 3e9, 2 ** 31, 1_000_000_001, 0, -1, 1.5]) {
        expectInvalid(await createKey({ rate_limit: { requests_per_minute: value } }), "rate_limit.requests_per_minute", /1 to 1000000000/);
        expectInvalid(await createKey({ rate_limit: { tokens_per_minute: value } }), "rate_limit.tokens_per_minute", /1 to 1000000000/);
      }
      const created = await createKey({ rate_limit: { requests_per_minute: 1e9, tokens_per_minute: 1e9 } });
      expect(created.status).toBe(201);
      expect(created.body.data.rate_limit).toEqual({ requests_per_minute: 1e9, tokens_per_minute: 1e9 });
      const types = await store.columnTypes(created.body.data.id);
      if (types) expect(types).toEqual({ rpm: "integer", tpm: "integer" });
    });

    it("refuses a key limit or a credit amount above 1000000 USD with the bound, and accepts the bound", async () => {
      for (const limit of [1e7, 1e20, 1e300, 1_000_000.000000001]) expectInvalid(await createKey({ limit }), "limit", /at most 1000000 USD/);
      for (const amount of [1e7, 1e300, "99999999999999999999999999999", "1000000.000000001"]) {
        expectInvalid(await credit({ amount }), "amount", /at most 1000000 USD/);
      }
      for (const amount of ["NaN", "Infinity", "1e3", "0x10", " 5", "5 ", "٥"]) expectInvalid(await credit({ amount }), "amount");
      expect((await createKey({ limit: 1_000_000 })).status).toBe(201);
      const other = (await t.admin("POST", "/admin/v1/accounts", { name: "bound" })).body.data.id;
      expect((await credit({ amount: "1000000" }, other)).status).toBe(201);
      expect(await balance(other)).toBe(1_000_000);
    });

    it("refuses a credit that would take an account's credits past 2^53 - 1 nano-USD, so every balance stays exact", async () => {
      const id = (await t.admin("POST", "/admin/v1/accounts", { name: "rich" })).body.data.id;
      for (let i = 0; i < 9; i++) expect((await credit({ amount: 1_000_000 }, id)).status).toBe(201);
      expectInvalid(await credit({ amount: 1_000_000 }, id), "amount", /past 9007199\.254740991 USD/);
      expect((await credit({ amount: "7199.254740991" }, id)).status).toBe(201);
      expectInvalid(await credit({ amount: "0.000000001" }, id), "amount");
      expect(await balance(id)).toBe(9_007_199.254740991);
    });

    it("refuses an expires_at that is not a calendar date or time: 2030-02-30 is 400, not March 2", async () => {
      for (const expires_at of [
        "2030-02-30",
        "2030-02-30T00:00:00Z",
        "2029-02-29",
        "2030-04-31T12:00:00Z",
        "2030-13-01",
        "2030-00-10",
        "2030-01-01T24:00:00Z",
        "2030-01-01T23:60:00Z",
        "2030-06-30T23:59:60Z",
        "2030-01-01T00:00:00+24:00",
        "2030-01-01T00:00:00", // no offset: the server's zone would decide
        "+275760-09-13T00:00:00Z",
        "Tue, 01 Jan 2030 00:00:00 GMT",
        "01/02/2030",
        "x 2030-01-01T00:00:00Z y",
        "2030-01-01T00:00:00Z\u0000",
      ]) {
        expectInvalid(await createKey({ expires_at }), "expires_at");
      }
      expectInvalid(await createKey({ expires_at: "2020-01-01T00:00:00Z" }), "expires_at", /in the past/);
      for (const [expires_at, iso] of [
        ["2032-02-29", "2032-02-29T00:00:00.000Z"],
        ["2030-06-30T23:59:59.5Z", "2030-06-30T23:59:59.500Z"],
        ["2030-01-01T02:30+02:30", "2030-01-01T00:00:00.000Z"],
        ["2030-01-01 00:00:00-05:00", "2030-01-01T05:00:00.000Z"],
      ] as const) {
        const created = await createKey({ expires_at });
        expect({ expires_at, status: created.status }).toEqual({ expires_at, status: 201 });
        expect(created.body.data.expires_at).toBe(iso);
      }
    });

    it("refuses a before cursor that is not a calendar time or not a safe epoch", async () => {
      const log = (before: string) => t.admin("GET", `/admin/v1/accounts/${accountId}/requests?before=${encodeURIComponent(before)}`);
      for (const before of ["2030-02-30", "2030-02-30T00:00:00Z", "99999999999999999999999", "1e400", "a\u0000b", "9999999999999999_gen-" + "0".repeat(32)]) {
        expectInvalid(await log(before), "before");
      }
      for (const before of ["2030-02-28", "2030-01-01T00:00:00Z", "1700000000000"]) expect((await log(before)).status).toBe(200);
      // An offset's "+" left unencoded reads as a space in a query string: still that offset.
      expect((await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?before=2030-01-01T00:00:00+02:00`)).status).toBe(200);
    });

    it("refuses list query strings strictly: limit 1..100, a known before, a printable q, no unknown or repeated names", async () => {
      const keyId = (await createKey({})).body.data.id;
      const otherKey = (await t.newAccountWithKey({ credit: 0 })).keyId;
      const accounts = (query: string) => t.admin("GET", `/admin/v1/accounts?${query}`);
      const keys = (query: string) => t.admin("GET", `/admin/v1/accounts/${accountId}/keys?${query}`);
      for (const list of [accounts, keys]) {
        for (const limit of ["0", "101", "-1", "1.5", "1e2", "abc", "", "%00", "99999999999999999999", " 5"]) expectInvalid(await list(`limit=${limit}`), "limit", /1 to 100/);
        expectInvalid(await list("limit=5&limit=6"), "limit", /more than once/);
        expectInvalid(await list("lmit=5"), "lmit", /unknown query parameter/);
        for (const before of ["", "2030-02-30", "99999999999999999999", "a%00b", "acct_nope", "key_nope", "-1"]) expectInvalid(await list(`before=${before}`), "before");
        expect((await list("limit=100&before=2030-01-01T00:00:00Z")).status).toBe(200);
        expect((await list("limit=1&before=1700000000000")).status).toBe(200);
      }
      for (const q of ["", "%00", "a%09b", "a%7Fb", "x".repeat(201)]) expectInvalid(await accounts(`q=${q}`), "q");
      // Bytes that are no UTF-8 (an encoded lone surrogate) decode to U+FFFD, as in every URL: a plain search.
      expect((await accounts("q=%ED%A0%80")).status).toBe(200);
      expectInvalid(await keys("q=acme"), "q", /unknown query parameter/);
      // A cursor must name a row of the list: an account for accounts, a key of this account for its keys.
      expectInvalid(await accounts(`before=${keyId}`), "before");
      expectInvalid(await keys(`before=${otherKey}`), "before");
      expectInvalid(await keys(`before=${accountId}`), "before");
      expect((await keys(`before=${keyId}`)).status).toBe(200);
      expect((await accounts(`before=${accountId}&q=${encodeURIComponent("100% _pure")}`)).body).toEqual({ data: [], has_more: false, next_before: null });
    });

    it("answers 409 when a credit reference is replayed with another kind; the same kind is still a duplicate", async () => {
      const id = (await t.admin("POST", "/admin/v1/accounts", { name: "kinds" })).body.data.id;
      const reference = "pi_" + crypto.randomUUID();
      const first = await credit({ amount: 5, kind: "card", reference }, id);
      expect(first.status).toBe(201);
      const replay = await credit({ amount: 5, kind: "card", reference }, id);
      expect(replay.body.data).toMatchObject({ entry_id: first.body.data.entry_id, duplicate: true });
      for (const kind of ["bonus", "voucher", "promotional"]) {
        const other = await credit({ amount: 5, kind, reference }, id);
        expect({ kind, status: other.status, code: other.body.error?.code, param: other.body.error?.param }).toEqual({
          kind,
          status: 409,
          code: "conflict",
          param: "reference",
        });
      }
      expect(await balance(id)).toBe(5);
    });

    it("refuses a NUL byte in the cost API's generation id with 400 before the store", async () => {
      const { key } = await t.newAccountWithKey();
      for (const id of ["gen-%00", "a%00b", "%00"]) {
        const response = await fetch(`${t.url}/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${key}` } });
        const body = (await response.json()) as any;
        expect({ status: response.status, param: body.error?.param }).toEqual({ status: 400, param: "id" });
      }
    });

    it("never answers 500 to hostile admin input", async () => {
      const cases: [string, string, unknown][] = [
        ["POST", "/admin/v1/accounts", { name: "x".repeat(100_000) }],
        ["POST", "/admin/v1/accounts", { name: ["a"] }],
        ["POST", "/admin/v1/accounts", { name: { $gt: "" } }],
        ["POST", "/admin/v1/accounts", { name: null }],
        ["POST", "/admin/v1/accounts", [{ name: "a" }]],
        ["POST", "/admin/v1/accounts", "null"],
        ["POST", "/admin/v1/accounts", '"a"'],
        ["POST", "/admin/v1/accounts", "1e999"],
        ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 1e999, kind: "bonus", reference: "r" }],
        ["POST", `/admin/v1/accounts/${accountId}/credits`, '{"amount":1e999,"kind":"bonus","reference":"r"}'],
        ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: [5], kind: "bonus", reference: "r" }],
        ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: "5".repeat(10_000), kind: "bonus", reference: "r" }],
        ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 5, kind: ["bonus"], reference: "r" }],
        ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 5, kind: "bonus", reference: "r".repeat(100_000) }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", limit: "NaN" }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, '{"name":"k","limit":1e999}'],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", models: Array(5000).fill("gpt-6-luna") }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", models: ["x".repeat(100_000)] }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", models: [null] }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", rate_limit: { requests_per_minute: "1e20" } }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", rate_limit: { requests_per_minute: [60] } }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", expires_at: ["2030-01-01"] }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", expires_at: 1893456000000 }],
        ["POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k", expires_at: "9".repeat(10_000) }],
        ["GET", `/admin/v1/accounts/${accountId}/requests?limit=99999999999999999999`, undefined],
        ["GET", `/admin/v1/accounts/${accountId}/requests?limit=%00`, undefined],
        ["GET", `/admin/v1/accounts/${accountId}/requests?before=-1`, undefined],
        ["GET", `/admin/v1/accounts?limit=99999999999999999999`, undefined],
        ["GET", `/admin/v1/accounts?q=${"%00".repeat(1000)}`, undefined],
        ["GET", `/admin/v1/accounts?before=${"9".repeat(1000)}`, undefined],
        ["GET", `/admin/v1/accounts/${accountId}/keys?before=%ff`, undefined],
      ];
      for (const [method, path, body] of cases) {
        const answer = await t.admin(method, path, body);
        expect({ path: path.slice(0, 80), body: JSON.stringify(body)?.slice(0, 80), status: answer.status }).toEqual({
          path: path.slice(0, 80),
          body: JSON.stringify(body)?.slice(0, 80),
          status: 400,
        });
        expect(answer.body.error.code).toBe("invalid_request");
      }
      // Nothing above changed the account.
      expect(await balance()).toBe(0);
    });
  });
}
