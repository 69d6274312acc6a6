import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { hashApiKey } from "../../src/plugins/auth/keys.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/** GET /admin/v1/accounts and GET /admin/v1/accounts/:id/keys through real HTTP (SQLite; input rules on both stores: admin-hostile-input). */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.stop();
});

/** A prefix no other test's account name has, so a search isolates this test's accounts. */
const runTag = () => "list" + crypto.randomUUID().replaceAll("-", "").slice(0, 10);

/** The lists' order: created_at, then id, both descending (rows of one millisecond go by id). */
function newestFirst<Row extends { id: string; created_at: string }>(rows: Row[]): Row[] {
  return [...rows].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1));
}

/** `count` accounts named "<prefix> <i>"; their ids newest first. */
async function newAccounts(prefix: string, count: number): Promise<string[]> {
  const rows: { id: string; created_at: string }[] = [];
  for (let i = 0; i < count; i++) {
    const created = await t.admin("POST", "/admin/v1/accounts", { name: `${prefix} ${i}` });
    expect(created.status).toBe(201);
    rows.push(created.body.data);
  }
  return newestFirst(rows).map((row) => row.id);
}

/** Every page of a list, following next_before while has_more. */
async function walk(path: string, limit: number): Promise<{ ids: string[]; pages: any[] }> {
  const pages: any[] = [];
  let before: string | null = null;
  do {
    const separator = path.includes("?") ? "&" : "?";
    const answer = await t.admin("GET", `${path}${separator}limit=${limit}${before ? `&before=${before}` : ""}`);
    expect(answer.status).toBe(200);
    pages.push(answer.body);
    before = answer.body.has_more ? answer.body.next_before : null;
  } while (before);
  return { ids: pages.flatMap((page) => page.data.map((row: { id: string }) => row.id)), pages };
}

describe("GET /admin/v1/accounts", () => {
  it("lists accounts newest first in pages: has_more and next_before walk every account once", async () => {
    const tag = runTag();
    const ids = await newAccounts(tag, 5);
    const { ids: walked, pages } = await walk(`/admin/v1/accounts?q=${tag}`, 2);
    expect(walked).toEqual(ids);
    expect(pages.map((page) => [page.data.length, page.has_more])).toEqual([
      [2, true],
      [2, true],
      [1, false],
    ]);
    expect(pages[0].next_before).toBe(ids[1]);
    expect(pages[2].next_before).toBeNull();
    expect(pages[0].data[0]).toEqual({ id: ids[0], name: expect.stringMatching(new RegExp(`^${tag} \\d$`)), created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) });
  });

  it("answers 20 accounts when no limit is given, and up to 100 when asked", async () => {
    const tag = runTag();
    const ids = await newAccounts(tag, 21);
    const first = await t.admin("GET", `/admin/v1/accounts?q=${tag}`);
    expect(first.body.data.map((a: { id: string }) => a.id)).toEqual(ids.slice(0, 20));
    expect(first.body.has_more).toBe(true);
    const all = await t.admin("GET", `/admin/v1/accounts?q=${tag}&limit=100`);
    expect(all.body).toMatchObject({ has_more: false, next_before: null });
    expect(all.body.data).toHaveLength(21);
  });

  it("searches names and ids, A-Z in any case", async () => {
    const tag = runTag();
    const [second, first] = await newAccounts(tag, 2);
    const upper = await t.admin("GET", `/admin/v1/accounts?q=${tag.toUpperCase()}`);
    expect(upper.body.data.map((a: { id: string }) => a.id)).toEqual([second, first]);
    const byId = await t.admin("GET", `/admin/v1/accounts?q=${first!.slice(-10)}`);
    expect(byId.body.data.map((a: { id: string }) => a.id)).toEqual([first]);
    const none = await t.admin("GET", `/admin/v1/accounts?q=${encodeURIComponent(tag + " nobody")}`);
    expect(none.body).toEqual({ data: [], has_more: false, next_before: null });
  });

  it("starts before a time as well as after an account id", async () => {
    const tag = runTag();
    const ids = await newAccounts(tag, 2);
    const future = await t.admin("GET", `/admin/v1/accounts?q=${tag}&before=2999-01-01T00:00:00Z`);
    expect(future.body.data.map((a: { id: string }) => a.id)).toEqual(ids);
    expect((await t.admin("GET", `/admin/v1/accounts?q=${tag}&before=1000000000000`)).body.data).toEqual([]);
  });

  it("answers 400 naming before when before is not an account's id", async () => {
    const { keyId } = await t.newAccountWithKey({ credit: 0 });
    for (const before of ["acct_nope", keyId]) {
      const answer = await t.admin("GET", `/admin/v1/accounts?before=${before}`);
      expect({ status: answer.status, param: answer.body.error?.param }).toEqual({ status: 400, param: "before" });
    }
  });
});

describe("GET /admin/v1/accounts/:id/keys", () => {
  it("lists the keys newest first by their masked labels, revoked ones with deleted_at, never a key or its hash", async () => {
    const account = (await t.admin("POST", "/admin/v1/accounts", { name: "keys" })).body.data.id;
    const created: any[] = [];
    for (const name of ["ci", "laptop", "old"]) {
      const answer = await t.admin("POST", `/admin/v1/accounts/${account}/keys`, { name, limit: 3, models: ["gpt-6-luna"] });
      expect(answer.status).toBe(201);
      created.push(answer.body.data);
    }
    expect((await t.admin("DELETE", `/admin/v1/keys/${created[2].id}`)).status).toBe(200);

    const answer = await t.admin("GET", `/admin/v1/accounts/${account}/keys`);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ has_more: false, next_before: null });
    const listed = answer.body.data;
    expect(listed.map((k: { id: string }) => k.id)).toEqual(newestFirst(created).map((k) => k.id));
    for (const key of created) {
      const { key: secret, ...view } = key;
      const row = listed.find((k: { id: string }) => k.id === key.id);
      // The creation answer's view, less the key; plus whether and when it was revoked.
      expect(row).toEqual({ ...view, deleted_at: key.name === "old" ? expect.any(String) : null, blocked: false });
      expect(row.label).toMatch(/^sk-gw-\w{4}…\w{4}$/);
      expect(JSON.stringify(answer.body)).not.toContain(secret);
      expect(JSON.stringify(answer.body)).not.toContain(hashApiKey(secret));
    }
  });

  it("walks the keys a page at a time, and refuses another account's key as the cursor", async () => {
    const { accountId, keyId } = await t.newAccountWithKey({ credit: 0 });
    for (let i = 0; i < 4; i++) expect((await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: `k${i}` })).status).toBe(201);
    const { ids } = await walk(`/admin/v1/accounts/${accountId}/keys`, 2);
    expect(ids).toHaveLength(5);
    expect(new Set(ids).size).toBe(5);
    expect(ids).toContain(keyId);

    const other = await t.newAccountWithKey({ credit: 0 });
    const foreign = await t.admin("GET", `/admin/v1/accounts/${accountId}/keys?before=${other.keyId}`);
    expect({ status: foreign.status, param: foreign.body.error?.param }).toEqual({ status: 400, param: "before" });
  });

  it("answers 404 not_found for an unknown account, and an empty list for an account without keys", async () => {
    const unknown = await t.admin("GET", "/admin/v1/accounts/acct_nope/keys");
    expect({ status: unknown.status, code: unknown.body.error?.code }).toEqual({ status: 404, code: "not_found" });
    const account = (await t.admin("POST", "/admin/v1/accounts", { name: "no keys" })).body.data.id;
    expect((await t.admin("GET", `/admin/v1/accounts/${account}/keys`)).body).toEqual({ data: [], has_more: false, next_before: null });
  });
});
