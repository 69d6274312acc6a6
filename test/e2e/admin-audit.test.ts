import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";
import { hashApiKey } from "../../src/plugins/auth/keys.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";

/**
 * Issue 25, item 6: every admin call is one audit line in the gateway's log (who, what, on what, the
 * status), and no audit line carries a secret. The gateway runs with a logger whose lines this test reads.
 */
const ADMIN_TOKEN = "audit-test-admin-token-5d1f";
const FINGERPRINT = "sha256:" + new Bun.CryptoHasher("sha256").update(ADMIN_TOKEN).digest("hex").slice(0, 8);

let fake: FakeUpstream;
let gateway: RunningGateway;
let dataDir: string;
const lines: string[] = [];

beforeAll(async () => {
  fake = await startFakeUpstream();
  dataDir = mkdtempSync(join(tmpdir(), "gateway-audit-"));
  const env = {
    ...process.env,
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
    EDGE_RATE_LIMIT_RPS: "0",
    GATEWAY_SANDBOX: "false",
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "sk-upstream-openai-audit",
  };
  const log = createLogger("test", { silent: false, sink: (line) => void lines.push(line) });
  gateway = await startGateway({ env, port: 0, log });
});

afterAll(async () => {
  await gateway.stop();
  await fake.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function call(method: string, path: string, body?: unknown, token: string | null = ADMIN_TOKEN) {
  const response = await fetch(gateway.url + path, {
    method,
    headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

const auditLines = () => lines.map((line) => JSON.parse(line)).filter((line) => line.message === "audit");

/** The call's answer and the audit lines it wrote (the sink is synchronous and the line is written before the answer). */
async function audited(method: string, path: string, body?: unknown, token: string | null = ADMIN_TOKEN) {
  const before = auditLines().length;
  const answer = await call(method, path, body, token);
  return { answer, written: auditLines().slice(before) };
}

/** The fields of an audit line this suite pins; absent targets compare as undefined. */
function fieldsOf(line: Record<string, unknown>) {
  const { tag, level, actor, actor_fingerprint, method, route, action, account_id, key_id, reference, entry_id, status } = line;
  return { tag, level, actor, actor_fingerprint, method, route, action, account_id, key_id, reference, entry_id, status };
}

/** Who an authenticated call's line names. */
const admin = { actor: "admin", actor_fingerprint: FINGERPRINT };

describe("admin audit lines", () => {
  const secrets: string[] = [];

  it("writes one line per call to every admin route: actor, method, route, action, target ids and status", async () => {
    const reference = "inv-" + crypto.randomUUID();
    /** One call, in order (ids flow from earlier answers): exactly one line, whose fields `expected` derives from the answer. */
    const run = async (method: string, path: string, body: unknown, expected: (answer: any) => Record<string, unknown>) => {
      const { answer, written } = await audited(method, path, body);
      expect({ path, lines: written.length }).toEqual({ path, lines: 1 });
      expect(fieldsOf(written[0])).toEqual({ tag: "admin", level: "info", ...admin, method, ...expected(answer) } as any);
      return answer;
    };

    const created = await run("POST", "/admin/v1/accounts", { name: "audited" }, (a) => ({
      route: "/admin/v1/accounts",
      action: "account.create",
      account_id: a.body.data.id,
      status: 201,
    }));
    const accountId: string = created.body.data.id;
    await run("GET", "/admin/v1/accounts?limit=5", undefined, () => ({ route: "/admin/v1/accounts", action: "account.list", status: 200 }));
    await run("GET", `/admin/v1/accounts/${accountId}`, undefined, () => ({
      route: "/admin/v1/accounts/:id",
      action: "account.show",
      account_id: accountId,
      status: 200,
    }));
    await run("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 30, kind: "card", reference }, (a) => ({
      route: "/admin/v1/accounts/:id/credits",
      action: "credit.create",
      account_id: accountId,
      reference,
      entry_id: a.body.data.entry_id,
      status: 201,
    }));
    const key = await run("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "audited key" }, (a) => ({
      route: "/admin/v1/accounts/:id/keys",
      action: "key.create",
      account_id: accountId,
      key_id: a.body.data.id,
      status: 201,
    }));
    const keyId: string = key.body.data.id;
    secrets.push(key.body.data.key);
    await run("GET", `/admin/v1/accounts/${accountId}/keys`, undefined, () => ({
      route: "/admin/v1/accounts/:id/keys",
      action: "key.list",
      account_id: accountId,
      status: 200,
    }));
    await run("GET", `/admin/v1/accounts/${accountId}/requests`, undefined, () => ({
      route: "/admin/v1/accounts/:id/requests",
      action: "request.list",
      account_id: accountId,
      status: 200,
    }));
    // The budget plugin's admin routes get theirs too.
    await run("GET", "/admin/v1/plans", undefined, () => ({ route: "/admin/v1/plans", action: "plan.list", status: 200 }));
    await run("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "pro", funding: "balance" }, () => ({
      route: "/admin/v1/accounts/:id/plan",
      action: "plan.purchase",
      account_id: accountId,
      status: 201,
    }));
    await run("GET", `/admin/v1/accounts/${accountId}/funds`, undefined, () => ({
      route: "/admin/v1/accounts/:id/funds",
      action: "funds.show",
      account_id: accountId,
      status: 200,
    }));
    await run("DELETE", `/admin/v1/keys/${keyId}`, undefined, () => ({
      route: "/admin/v1/keys/:id",
      action: "key.delete",
      key_id: keyId,
      account_id: accountId,
      status: 200,
    }));
  });

  it("writes the line of a refused or failed call with its status, and no target it did not validate", async () => {
    const accountId = (await call("POST", "/admin/v1/accounts", { name: "failures" })).body.data.id;
    const cases: [string, string, unknown, string | null, Record<string, unknown>][] = [
      // No token, or a wrong one: 401 before any route, from an anonymous caller.
      ["GET", "/admin/v1/accounts", undefined, null, { actor: "anonymous", actor_fingerprint: undefined, route: null, action: null, status: 401 }],
      ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 5, kind: "card", reference: "r-1" }, "wrong-token", {
        actor: "anonymous",
        actor_fingerprint: undefined,
        route: null,
        action: null,
        status: 401,
      }],
      // A malformed path id: 400 in the guard, before any route.
      ["GET", "/admin/v1/accounts/a%00b", undefined, ADMIN_TOKEN, { ...admin, route: null, action: null, status: 400 }],
      // A body the schema refuses: the route is known, the reference in it is not taken.
      ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 5, kind: "gift", reference: "r-2" }, ADMIN_TOKEN, {
        ...admin,
        route: "/admin/v1/accounts/:id/credits",
        action: "credit.create",
        account_id: accountId,
        status: 400,
      }],
      // A valid body refused by a rule: the reference is named, no entry was made.
      ["POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 4, kind: "card", reference: "r-3" }, ADMIN_TOKEN, {
        ...admin,
        route: "/admin/v1/accounts/:id/credits",
        action: "credit.create",
        account_id: accountId,
        reference: "r-3",
        status: 400,
      }],
      ["GET", "/admin/v1/accounts/acct_nope", undefined, ADMIN_TOKEN, { ...admin, route: "/admin/v1/accounts/:id", action: "account.show", account_id: "acct_nope", status: 404 }],
      ["DELETE", "/admin/v1/keys/key_nope", undefined, ADMIN_TOKEN, { ...admin, route: "/admin/v1/keys/:id", action: "key.delete", key_id: "key_nope", status: 404 }],
      ["GET", "/admin/v1/accounts?limit=500", undefined, ADMIN_TOKEN, { ...admin, route: "/admin/v1/accounts", action: "account.list", status: 400 }],
      // No such admin endpoint.
      ["GET", "/admin/v1/nothing-here", undefined, ADMIN_TOKEN, { ...admin, route: "/admin/*", action: null, status: 404 }],
    ];
    for (const [method, path, body, token, expected] of cases) {
      const { answer, written } = await audited(method, path, body, token);
      expect({ path, status: answer.status, lines: written.length }).toEqual({ path, status: expected.status as number, lines: 1 });
      const { tag, level, ...rest } = fieldsOf(written[0]);
      expect({ tag, level }).toEqual({ tag: "admin", level: "info" });
      expect({ path, ...rest }).toEqual({ path, method, account_id: undefined, key_id: undefined, reference: undefined, entry_id: undefined, ...expected } as any);
    }
  });

  it("writes no audit line for calls outside /admin/", async () => {
    const before = auditLines().length;
    expect((await call("GET", "/health", undefined, null)).status).toBe(200);
    expect((await call("GET", "/v1/models", undefined, null)).status).toBe(401);
    expect(auditLines().length).toBe(before);
  });

  it("never logs a secret: not the admin token, not a new key or its hash, not a key pasted as a path id", async () => {
    const accountId = (await call("POST", "/admin/v1/accounts", { name: "secrets" })).body.data.id;
    const created = await call("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "k" });
    const secret: string = created.body.data.key;
    secrets.push(secret);
    // An operator pastes the key where its id belongs: the id has an id's shape, so it reaches the route and its line.
    const { answer, written } = await audited("DELETE", `/admin/v1/keys/${secret}`);
    expect(answer.status).toBe(404);
    expect(written).toHaveLength(1);
    expect(written[0].key_id).not.toContain(secret.slice(6));

    const log = lines.join("");
    expect(auditLines().length).toBeGreaterThan(10);
    expect(log).not.toContain(ADMIN_TOKEN);
    expect(log).not.toContain(new Bun.CryptoHasher("sha256").update(ADMIN_TOKEN).digest("hex"));
    for (const key of secrets) {
      expect(log).not.toContain(key);
      expect(log).not.toContain(key.slice(6)); // the random part alone
      expect(log).not.toContain(hashApiKey(key));
    }
  });
});
