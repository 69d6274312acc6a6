/**
 * Shared helpers of the agent-CLI end-to-end tests: the official Claude Code and Codex CLIs (devDependencies)
 * run offline against a gateway whose providers all point at the fake upstream: in the test's process, or a process of
 * its own with GATEWAY_WORKERS (`startCliGateway({ workers })`).
 */
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { adminOf, startTestGateway, testGatewayEnv, type TestGateway } from "../helpers/gateway.ts";
import { spawnGatewayChild, untilReady, waitFor } from "../helpers/processes.ts";
import { startFakeUpstream, type FakeUpstream, type RecordedRequest } from "../fake-upstream/server.ts";

export const ROOT = resolve(import.meta.dir, "../..");
/** Each CLI run is bounded: killed (with its whole process group) after this long. */
export const CLI_TIMEOUT_MS = 60_000;

/** The CLI's launcher in node_modules/.bin, or null when the devDependency is not installed. */
export function cliBinary(name: "claude" | "codex"): string | null {
  const path = join(import.meta.dir, "node_modules", ".bin", name);
  return existsSync(path) ? path : null;
}

/** `[[fake {json}]]`: the fake upstream's scenario directive. */
export const directive = (d: unknown) => `[[fake ${JSON.stringify(d)}]]`;

/** What the CLI tests use of a gateway: in this process (startTestGateway) or a process of its own with workers. */
export type CliTarget = Pick<TestGateway, "url" | "admin" | "newAccountWithKey">;

export interface CliGateway {
  t: CliTarget;
  fake: FakeUpstream;
  stop(): Promise<void>;
}

/** Every provider's upstream on the fake: Anthropic and Gemini beside startTestGateway's OpenAI-format ones. */
const upstreamsOn = (fake: FakeUpstream) => ({ ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "sk-ant-upstream", GEMINI_BASE_URL: fake.url, GEMINI_API_KEY: "gm-upstream" });

/**
 * The gateway with every provider (OpenAI, Anthropic, DeepSeek, Gemini...) on one fake upstream: in this process, or,
 * with `workers`, `bun src/index.ts` with GATEWAY_WORKERS (a primary and its workers on the embedded SQLite default).
 */
export async function startCliGateway(options: { workers?: number } = {}): Promise<CliGateway> {
  const fake = await startFakeUpstream();
  if (options.workers) return startWorkersGateway(fake, options.workers);
  const t = await startTestGateway({ fake, env: upstreamsOn(fake) });
  return {
    t,
    fake,
    async stop() {
      await t.stop();
      await fake.stop();
    },
  };
}

async function startWorkersGateway(fake: FakeUpstream, workers: number): Promise<CliGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-cli-workers-"));
  const child = spawnGatewayChild({
    GATEWAY_WORKERS: String(workers),
    DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
    ...testGatewayEnv(fake),
    ...upstreamsOn(fake),
  });
  await untilReady(child, 30_000, "the gateway's primary");
  const listening = () => child.stdout.text().split("\n").filter((line) => line.includes('"worker listening"')).length;
  await waitFor(() => listening() >= workers, 30_000, `${workers} workers listening`);
  return {
    t: { url: child.url, ...adminOf(child.url) },
    fake,
    async stop() {
      child.child.kill("SIGTERM");
      await child.child.exited;
      await fake.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A minimal environment: nothing of the test process (no stray ANTHROPIC_* / OPENAI_* keys, no user config). */
export function cliEnv(home: string, extra: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    USER: process.env.USER ?? "tester",
    LANG: "C.UTF-8",
    TERM: "dumb",
    NO_COLOR: "1",
    TMPDIR: process.env.TMPDIR ?? tmpdir(),
    ...extra,
  };
}

export interface CliRun {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Runs a CLI to completion with stdin closed, in its own process group, killed (group included) after
 * `timeoutMs`. Children it leaves behind are ended with the group too.
 */
export function runCli(file: string, args: string[], options: { cwd: string; env: Record<string, string>; timeoutMs?: number }): Promise<CliRun> {
  const started = performance.now();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(file, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // The group is already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, options.timeoutMs ?? CLI_TIMEOUT_MS);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      killGroup(); // stragglers (a tool's shell, a helper) of this run's group only
      resolvePromise({ code, signal, timedOut, stdout, stderr, ms: Math.round(performance.now() - started) });
    });
  });
}

/** What to print when a run did not go as expected. */
export function describeRun(run: CliRun): string {
  const tail = (text: string) => (text.length > 6000 ? "…" + text.slice(-6000) : text);
  return `exit ${run.code} signal ${run.signal}${run.timedOut ? " (timed out)" : ""} after ${run.ms} ms\n--- stdout\n${tail(run.stdout)}\n--- stderr\n${tail(run.stderr)}`;
}

/** The upstream requests (fake.requests) that asked for a completion: Messages, Chat, Responses, Gemini. */
export function completionRequests(fake: FakeUpstream): RecordedRequest[] {
  return fake.requests.filter((request) => request.method === "POST" && /\/(messages|chat\/completions|responses)$|:(stream)?[gG]enerateContent/.test(request.path.split("?")[0]!));
}

export interface Billing {
  credits: { total_credits: number; total_usage: number; balance: number };
  /** The account's generation records (admin requests log), newest first. */
  rows: { id: string; model: string; status: string; cost: number; prompt_tokens: number; completion_tokens: number }[];
}

/**
 * The key's /v1/credits and the account's request log, once `expectedRows` records are written and the two agree
 * (metering commits in small batches, a few ms after the answer; with workers, the two reads may be answered by
 * different workers, each of which sees the other's requests once committed). Past 5 s, what was last read.
 */
export async function billing(t: CliTarget, key: string, accountId: string, expectedRows: number): Promise<Billing> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const log = await t.admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=200`);
    const credits = await fetch(`${t.url}/v1/credits`, { headers: { authorization: `Bearer ${key}` } }).then((response) => response.json() as any);
    const rows: Billing["rows"] = log.body.data;
    const logged = rows.reduce((sum, row) => sum + row.cost, 0);
    const agree = rows.length >= expectedRows && Math.abs((credits.data?.total_usage ?? Number.NaN) - logged) < 5e-7; // the tolerance of the checks below (toBeCloseTo, 6 digits)
    if (agree || Date.now() > deadline) return { credits: credits.data, rows };
    await Bun.sleep(50);
  }
}

/**
 * `codex exec` with `config` as its config.toml, in fresh CODEX_HOME / HOME / working directories (removed
 * afterwards), the gateway key in GATEWAY_KEY; `lastMessage` is its --output-last-message file, null if none.
 */
export async function runCodexExec(codex: string, config: string, prompt: string, key: string, extra: string[] = []): Promise<CliRun & { lastMessage: string | null }> {
  const codexHome = tempDir("codex-home-");
  const home = tempDir("codex-user-");
  const work = tempDir("codex-work-");
  try {
    writeFileSync(join(codexHome.path, "config.toml"), config);
    const last = join(codexHome.path, "last-message.txt");
    const args = ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--ephemeral", "--color", "never", "--output-last-message", last, ...extra, prompt];
    const run = await runCli(codex, args, { cwd: work.path, env: cliEnv(home.path, { CODEX_HOME: codexHome.path, GATEWAY_KEY: key }) });
    let lastMessage: string | null = null;
    try {
      lastMessage = readFileSync(last, "utf8").trim();
    } catch {
      // No final message written.
    }
    return { ...run, lastMessage };
  } finally {
    codexHome.remove();
    home.remove();
    work.remove();
  }
}

/**
 * Every upstream call of the run billed: one generation record each, a success with a cost and prompt tokens, on one
 * of `models`; the key's usage is their sum and the balance what is left of `credit`.
 */
export async function expectBilledExactly(gateway: CliGateway, key: string, accountId: string, credit: number, models: string[]): Promise<Billing> {
  const all = completionRequests(gateway.fake);
  const billed = await billing(gateway.t, key, accountId, all.length);
  const { credits, rows } = billed;
  expect(rows.length).toBe(all.length);
  for (const row of rows) {
    expect(models).toContain(row.model);
    expect(row.status).toBe("success");
    expect(row.cost).toBeGreaterThan(0);
    expect(row.prompt_tokens).toBeGreaterThan(0);
  }
  expect(credits.total_usage).toBeGreaterThan(0);
  expect(credits.total_usage).toBeCloseTo(rows.reduce((sum, row) => sum + row.cost, 0), 6);
  expect(credits.balance).toBeCloseTo(credit - credits.total_usage, 6);
  return billed;
}

/**
 * A describe block with a gateway of `workers` worker processes (GATEWAY_WORKERS) for its cases: `run` makes an account,
 * drives the CLI through the gateway and returns the account, which must hold nothing afterwards (the holds live in
 * the primary and are all released).
 */
export function describeThroughWorkers(skip: boolean, name: string, run: (gateway: CliGateway) => Promise<{ accountId: string }>, workers = 2): void {
  describe.skipIf(skip)(`${name} through GATEWAY_WORKERS=${workers} (a primary and its worker processes, SQLite)`, () => {
    let gateway: CliGateway;
    beforeAll(async () => {
      gateway = await startCliGateway({ workers });
    }, 60_000);
    afterAll(async () => {
      await gateway?.stop();
    });
    it("answers and bills exactly as one process does; no hold is left in the primary", async () => {
      const { accountId } = await run(gateway);
      const funds = await gateway.t.admin("GET", `/admin/v1/accounts/${accountId}/funds`);
      expect(funds.body.data.held).toBe(0);
    });
  });
}
