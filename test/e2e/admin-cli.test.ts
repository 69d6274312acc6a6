import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { FAKE_STRIPE_SECRET_KEY, startFakeStripe, type FakeStripe } from "../fake-stripe/server.ts";

const ROOT = join(import.meta.dir, "../..");
const LOCAL_BUN = join(ROOT, "node_modules/.bin/bun");
const BUN = existsSync(LOCAL_BUN) ? LOCAL_BUN : process.execPath;

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.stop();
});

interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON, when it is. */
  json: any;
}

/** Runs `bun src/cli/admin.ts ...args` against the test gateway, as `npm run admin -- ...` does. */
async function cli(args: string[], env: Record<string, string | undefined> = {}, input?: string, gateway: TestGateway = t): Promise<CliResult> {
  const childEnv: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...process.env, GATEWAY_URL: gateway.url, GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, ...env })) {
    if (value !== undefined) childEnv[name] = value;
  }
  const stdin = input === undefined ? "ignore" : new Blob([input]);
  const child = Bun.spawn([BUN, "src/cli/admin.ts", ...args], { cwd: ROOT, env: childEnv, stdin, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  let json: any;
  try {
    json = JSON.parse(stdout);
  } catch {
    json = undefined;
  }
  return { exitCode, stdout, stderr, json };
}

describe("npm run admin", () => {
  it("creates an account, credits it, makes a restricted key that works, then deletes it", async () => {
    const account = await cli(["account", "create", "CLI", "customer"]);
    expect(account.exitCode).toBe(0);
    expect(account.json.data.name).toBe("CLI customer");
    const accountId: string = account.json.data.id;

    const reference = "cli-ref-" + crypto.randomUUID();
    const credited = await cli(["credit", accountId, "12.5", "card", reference]);
    expect(credited.exitCode).toBe(0);
    expect(credited.json.data.balance).toBe(12.5);
    // The same reference again credits once.
    const replay = await cli(["credit", accountId, "12.5", "card", reference]);
    expect(replay.exitCode).toBe(0);
    expect(replay.json.data.entry_id).toBe(credited.json.data.entry_id);

    const created = await cli(["key", "create", accountId, "cli", "key", "--models", "gpt-6-luna,deepseek-flash", "--limit", "2", "--rpm", "100"]);
    expect(created.exitCode).toBe(0);
    const { id: keyId, key } = created.json.data;
    expect(created.json.data).toMatchObject({
      name: "cli key",
      limit: 2,
      models: ["gpt-6-luna", "deepseek-flash"],
      rate_limit: { requests_per_minute: 100, tokens_per_minute: null },
    });
    expect(key).toMatch(/^sk-gw-/);

    const client = t.client(key);
    const completion = await client.chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi from the cli" }] });
    expect(completion.choices[0]!.message.content).toBe("Hello from gpt-6-luna.");
    const notAllowed = await client.chat.completions.create({ model: "gpt-6.2-sol", messages: [{ role: "user", content: "hi" }] }).then(
      () => null,
      (error) => error,
    );
    expect(notAllowed).toBeInstanceOf(OpenAI.PermissionDeniedError);

    const shown = await cli(["account", "show", accountId]);
    expect(shown.exitCode).toBe(0);
    expect(shown.json.data.balance).toBeLessThan(12.5);

    const requests = await cli(["requests", accountId, "--limit", "1"]);
    expect(requests.exitCode).toBe(0);
    expect(requests.json.data).toHaveLength(1);
    expect(requests.json.data[0]).toMatchObject({ key_id: keyId, model: "gpt-6-luna", status: "success" });
    expect(requests.stdout).not.toContain(key);

    const deleted = await cli(["key", "delete", keyId]);
    expect(deleted.exitCode).toBe(0);
    expect(deleted.json.data).toMatchObject({ id: keyId, deleted: true });
    const refused = await client.chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] }).then(
      () => null,
      (error) => error,
    );
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);

    // Deleting it again is a server-side error: exit 1.
    const again = await cli(["key", "delete", keyId]);
    expect(again.exitCode).toBe(1);
    expect(again.json.error.code).toBe("not_found");
  });

  it("exits 2 with a message when GATEWAY_ADMIN_TOKEN is not set", async () => {
    const result = await cli(["account", "create", "nobody"], { GATEWAY_ADMIN_TOKEN: undefined });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain("GATEWAY_ADMIN_TOKEN");
  });

  it("exits 1 and prints the error body when the gateway refuses the call", async () => {
    const unknown = await cli(["account", "show", "acct_does_not_exist"]);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.json.error).toMatchObject({ code: "not_found", type: "not_found_error" });

    const wrongToken = await cli(["account", "create", "x"], { GATEWAY_ADMIN_TOKEN: "wrong-token" });
    expect(wrongToken.exitCode).toBe(1);
    expect(wrongToken.json.error.type).toBe("authentication_error");

    const belowMinimum = await cli(["credit", (await t.admin("POST", "/admin/v1/accounts", { name: "m" })).body.data.id, "4", "card", "inv-4"]);
    expect(belowMinimum.exitCode).toBe(1);
    expect(belowMinimum.json.error.code).toBe("invalid_request");
  });

  it("refuses a credit without a reference (exit 2 naming it) and credits nothing: a retry must not credit twice", async () => {
    const accountId = (await t.admin("POST", "/admin/v1/accounts", { name: "no reference" })).body.data.id;
    const result = await cli(["credit", accountId, "6", "card"]);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain("<reference>");
    expect(result.stderr).toContain("idempotency");
    expect((await t.admin("GET", `/admin/v1/accounts/${accountId}`)).body.data.balance).toBe(0);
  });

  it("lists accounts (newest first, searched, paged) and an account's keys without their secrets", async () => {
    const tag = "cli-list-" + crypto.randomUUID().slice(0, 8);
    const first = (await cli(["account", "create", tag, "one"])).json.data.id;
    const second = (await cli(["account", "create", tag, "two"])).json.data.id;
    const listed = await cli(["account", "list", "--q", tag.toUpperCase(), "--limit", "1"]);
    expect(listed.exitCode).toBe(0);
    expect(listed.json.data).toHaveLength(1);
    expect(listed.json.has_more).toBe(true);
    const rest = await cli(["account", "list", "--q", tag, "--before", listed.json.next_before]);
    expect(new Set([listed.json.data[0].id, ...rest.json.data.map((a: { id: string }) => a.id)])).toEqual(new Set([first, second]));
    expect(rest.json.has_more).toBe(false);

    const created = (await cli(["key", "create", first, "laptop"])).json.data;
    const keys = await cli(["key", "list", first]);
    expect(keys.exitCode).toBe(0);
    expect(keys.json.data).toEqual([expect.objectContaining({ id: created.id, name: "laptop", label: created.label, deleted_at: null })]);
    expect(keys.stdout).not.toContain(created.key);

    const badLimit = await cli(["account", "list", "--limit", "500"]);
    expect(badLimit.exitCode).toBe(1);
    expect(badLimit.json.error.param).toBe("limit");
  });

  it("creates dashboard users with the password from GATEWAY_USER_PASSWORD or stdin, never an argument, and lists them", async () => {
    const accountId = (await cli(["account", "create", "CLI users"])).json.data.id;
    const tag = crypto.randomUUID().slice(0, 8);
    const fromEnvPassword = "env-password-" + tag;
    const fromEnv = await cli(["user", "create", accountId, `Owner-${tag}@Example.com`], { GATEWAY_USER_PASSWORD: fromEnvPassword });
    expect(fromEnv.exitCode).toBe(0);
    expect(fromEnv.json.data).toMatchObject({ email: `owner-${tag}@example.com`, role: "owner", account_id: accountId });
    expect(fromEnv.stdout + fromEnv.stderr).not.toContain(fromEnvPassword);

    // Only the first line of stdin is the password; GATEWAY_USER_PASSWORD unset.
    const fromStdinPassword = "stdin-password-" + tag;
    const fromStdin = await cli(["user", "create", accountId, `member-${tag}@example.com`, "--role", "member"], { GATEWAY_USER_PASSWORD: undefined }, `${fromStdinPassword}\r\nsecond line\n`);
    expect(fromStdin.exitCode).toBe(0);
    expect(fromStdin.json.data).toMatchObject({ email: `member-${tag}@example.com`, role: "member" });
    expect(fromStdin.stdout + fromStdin.stderr).not.toContain(fromStdinPassword);

    // The store kept the hash of exactly those passwords.
    const { Database } = await import("bun:sqlite");
    const db = new Database(join(t.dataDir, "gateway.db"), { readonly: true });
    try {
      const hashOf = (id: string) => (db.query("SELECT password_hash FROM users WHERE id = ?").get(id) as { password_hash: string }).password_hash;
      expect(await Bun.password.verify(fromEnvPassword, hashOf(fromEnv.json.data.id))).toBe(true);
      expect(await Bun.password.verify(fromStdinPassword, hashOf(fromStdin.json.data.id))).toBe(true);
    } finally {
      db.close();
    }

    const listed = await cli(["user", "list", accountId]);
    expect(listed.exitCode).toBe(0);
    expect(listed.json.data.map((user: { email: string; role: string }) => [user.email, user.role])).toEqual([
      [`owner-${tag}@example.com`, "owner"],
      [`member-${tag}@example.com`, "member"],
    ]);
    expect(listed.stdout).not.toContain("argon2");

    // The same email again: the gateway's 409, exit 1.
    const taken = await cli(["user", "create", accountId, `OWNER-${tag}@example.com`], { GATEWAY_USER_PASSWORD: fromEnvPassword });
    expect(taken.exitCode).toBe(1);
    expect(taken.json.error.code).toBe("conflict");
    // A short password: 400 naming it, exit 1, the password not printed.
    const short = await cli(["user", "create", accountId, `short-${tag}@example.com`], { GATEWAY_USER_PASSWORD: "tiny-pw" });
    expect(short.exitCode).toBe(1);
    expect(short.json.error.param).toBe("password");
    expect(short.stdout).not.toContain("tiny-pw");
  });

  it("refuses user create without a password (exit 2, naming GATEWAY_USER_PASSWORD) or with a bad --role", async () => {
    const noPassword = await cli(["user", "create", "acct_x", "a@example.com"], { GATEWAY_USER_PASSWORD: undefined });
    expect(noPassword.exitCode).toBe(2);
    expect(noPassword.stderr).toContain("GATEWAY_USER_PASSWORD");
    const emptyStdin = await cli(["user", "create", "acct_x", "a@example.com"], { GATEWAY_USER_PASSWORD: undefined }, "\n");
    expect(emptyStdin.exitCode).toBe(2);
    const badRole = await cli(["user", "create", "acct_x", "a@example.com", "--role", "admin"], { GATEWAY_USER_PASSWORD: "long enough password" });
    expect(badRole.exitCode).toBe(2);
    expect(badRole.stderr).toContain("--role");
  });

  it("exits 2 with the usage on a bad command line", async () => {
    for (const args of [[], ["frobnicate"], ["account", "create"], ["key", "create", "acct_x"], ["key", "list"], ["account", "list", "extra"], ["user", "create", "acct_x"], ["user", "list"], ["user", "list", "a", "b"], ["--help"]]) {
      const result = await cli(args);
      expect({ args, exitCode: result.exitCode }).toEqual({ args, exitCode: 2 });
      expect(result.stderr).toContain("usage:");
    }
    const badNumber = await cli(["key", "create", "acct_x", "k", "--limit", "lots"]);
    expect(badNumber.exitCode).toBe(2);
    expect(badNumber.stderr).toContain("--limit");
  });

  it("exits 2 when the gateway cannot be reached", async () => {
    const result = await cli(["account", "show", "acct_x"], { GATEWAY_URL: "http://127.0.0.1:1" });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain("cannot reach");
  });
});

describe("npm run admin -- payments", () => {
  it("reconcile needs --since (exit 2); without differences it exits 0", async () => {
    const missing = await cli(["payments", "reconcile"]);
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toContain("--since");
    const clean = await cli(["payments", "reconcile", "--since", "2020-01-01T00:00:00Z"]);
    expect(clean.exitCode).toBe(0);
    expect(clean.json.data).toEqual({ since: "2020-01-01T00:00:00.000Z", processors: [] });
    const bad = await cli(["payments", "reconcile", "--since", "last tuesday"]);
    expect(bad.exitCode).toBe(1);
    expect(bad.json.error.param).toBe("since");
  });

  it("unmatched lists the transfers that matched no top-up; unblock clears an account's block", async () => {
    const unmatched = await cli(["payments", "unmatched", "--limit", "5"]);
    expect(unmatched.exitCode).toBe(0);
    expect(unmatched.json).toEqual({ data: [], has_more: false, next_before: null });
    const account = await cli(["account", "create", "Blocked", "customer"]);
    const unblocked = await cli(["payments", "unblock", account.json.data.id]);
    expect(unblocked.exitCode).toBe(0);
    expect(unblocked.json.data).toEqual({ id: account.json.data.id, blocked: false, was_blocked: false });
    const unknown = await cli(["payments", "unblock", "acct_doesnotexist"]);
    expect(unknown.exitCode).toBe(1);
    for (const args of [["payments"], ["payments", "unblock"], ["payments", "unmatched", "extra"], ["payments", "refund"]]) {
      expect({ args, exitCode: (await cli(args)).exitCode }).toEqual({ args, exitCode: 2 });
    }
  });

  describe("with Stripe on (a fake)", () => {
    let stripe: FakeStripe;
    let paid: TestGateway;
    beforeAll(async () => {
      stripe = await startFakeStripe();
      paid = await startTestGateway({
        env: { STRIPE_SECRET_KEY: FAKE_STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET: "whsec_test_admin_cli", STRIPE_API_BASE: stripe.url, TOPUP_REQUESTS_PER_SECOND: "0" },
      });
    });
    afterAll(async () => {
      await paid?.stop();
      await stripe?.stop();
    });

    it("reconcile prints a Checkout paid at Stripe but not credited here, and exits 1", async () => {
      const since = Date.now() - 60_000;
      const { accountId, key } = await paid.newAccountWithKey();
      const made = await fetch(`${paid.url}/v1/credits/topups`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ method: "card", amount: 9 }),
      });
      expect(made.status).toBe(201);
      const topup = (await paid.admin("GET", `/admin/v1/accounts/${accountId}/topups`)).body.data[0];
      stripe.completeSession(topup.processor_ref);
      const report = await cli(["payments", "reconcile", "--since", String(since)], {}, undefined, paid);
      expect(report.exitCode).toBe(1);
      expect(report.stderr).toContain("1 difference");
      const differences = report.json.data.processors.flatMap((processor: any) => processor.differences);
      expect(differences).toEqual([expect.objectContaining({ topup_id: topup.id, kind: "paid_not_credited", processor_amount: 9, our_amount: 0 })]);
    });
  });
});
