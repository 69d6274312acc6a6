import { afterAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { freePort } from "../helpers/processes.ts";

// Normally a few seconds; the margin is for a loaded machine (bun's default per-test limit is 5 s).
setDefaultTimeout(20_000);

const ROOT = resolve(import.meta.dir, "../..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const dir = mkdtempSync(join(tmpdir(), "gateway-quick-start-"));
const dbFile = join(dir, "gw.db");
const children: Subprocess[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await child.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});


interface Started {
  child: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  /** Every stdout line so far (JSON log lines). */
  lines: string[];
  stderr: Promise<string>;
  stop(): Promise<number>;
}

/** Starts `bun src/index.ts` with a bare environment (no GATEWAY_ADMIN_TOKEN, no GATEWAY_LOG) and waits for "gateway listening". */
async function start(): Promise<Started> {
  const port = freePort();
  const child = Bun.spawn([BUN, "src/index.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? dir, PORT: String(port), HOST: "127.0.0.1", DATABASE_URL: `sqlite:${dbFile}` },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  children.push(child);
  const lines: string[] = [];
  const stderr = new Response(child.stderr).text();
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const bytes of child.stdout) {
      buffered += decoder.decode(bytes, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        lines.push(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
      }
    }
    if (buffered) lines.push(buffered);
  })();
  const deadline = Date.now() + 15_000;
  while (!lines.some((line) => line.includes('"gateway listening"'))) {
    if (child.exitCode !== null) throw new Error(`gateway exited (${child.exitCode}): ${await stderr}`);
    if (Date.now() > deadline) throw new Error(`gateway did not start: ${lines.join("\n")}`);
    await Bun.sleep(10);
  }
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    lines,
    stderr,
    async stop() {
      child.kill("SIGTERM");
      const code = await child.exited;
      await reading;
      return code;
    },
  };
}

async function call(url: string, method: string, path: string, token: string, body?: unknown) {
  const response = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe("quick start: no admin token configured", () => {
  it("prints a generated admin token once, which works, and is not printed again on the next start", async () => {
    const first = await start();
    const logged = first.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const withToken = logged.filter((entry) => "admin_token" in entry);
    expect(withToken).toHaveLength(1);
    const token = String(withToken[0]!.admin_token);
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect(first.lines.filter((line) => line.includes(token))).toHaveLength(1);

    // The token works on the admin API; anything else is refused.
    expect((await call(first.url, "POST", "/admin/v1/accounts", "not-the-token", { name: "x" })).status).toBe(401);
    const account = await call(first.url, "POST", "/admin/v1/accounts", token, { name: "quick start" });
    expect(account.status).toBe(201);
    const accountId = account.body.data.id;
    expect((await call(first.url, "POST", `/admin/v1/accounts/${accountId}/credits`, token, { amount: 5, kind: "card", reference: "qs-1" })).status).toBe(201);
    const created = await call(first.url, "POST", `/admin/v1/accounts/${accountId}/keys`, token, { name: "first key" });
    expect(created.status).toBe(201);
    const key = created.body.data.key as string;

    // The created key works on GET /v1/models.
    const models = await call(first.url, "GET", "/v1/models", key);
    expect(models.status).toBe(200);
    expect(models.body.object).toBe("list");
    expect(models.body.data.length).toBeGreaterThan(0);
    expect(models.body.data.map((model: { id: string }) => model.id)).toContain("gpt-6-luna");
    // The admin token is not an API key.
    expect((await call(first.url, "GET", "/v1/models", token)).status).toBe(401);

    expect(await first.stop()).toBe(0);
    expect(await first.stderr).toBe("");

    // Only a hash of the token is stored.
    const db = new Database(dbFile, { readonly: true });
    try {
      const settings = db.query<{ name: string; value: string }, []>("SELECT name, value FROM settings").all();
      expect(settings.length).toBeGreaterThan(0);
      for (const setting of settings) expect(setting.value).not.toContain(token);
    } finally {
      db.close();
    }

    // Second start on the same database: no new token, the first one (and the key) still work.
    const second = await start();
    try {
      expect(second.lines.some((line) => line.includes("admin_token"))).toBe(false);
      expect(second.lines.some((line) => line.includes(token))).toBe(false);
      const again = await call(second.url, "GET", `/admin/v1/accounts/${accountId}`, token);
      expect(again.status).toBe(200);
      expect(again.body.data).toMatchObject({ id: accountId, balance: 5 });
      expect((await call(second.url, "GET", "/v1/models", key)).status).toBe(200);
    } finally {
      expect(await second.stop()).toBe(0);
    }
  });
});
