import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.ts";

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
async function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  const childEnv: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...process.env, GATEWAY_URL: t.url, GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN, ...env })) {
    if (value !== undefined) childEnv[name] = value;
  }
  const child = Bun.spawn([BUN, "src/cli/admin.ts", ...args], { cwd: ROOT, env: childEnv, stdout: "pipe", stderr: "pipe" });
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

  it("exits 2 with the usage on a bad command line", async () => {
    for (const args of [[], ["frobnicate"], ["account", "create"], ["key", "create", "acct_x"], ["key", "list"], ["account", "list", "extra"], ["--help"]]) {
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
