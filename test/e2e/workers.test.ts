import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { catalog, exactCostRequest, worstCase, type Message } from "../helpers/budget.ts";
import { nanoToUsd, nanoToUsdString, usdToNano } from "../../src/core/money.ts";
import { freePort, spawnGatewayChild, waitFor, type GatewayChild } from "../helpers/processes.ts";
import { createScratchDatabase, type ScratchDatabase } from "../e2e-scale/harness.ts";

/**
 * GATEWAY_WORKERS: one port served by several worker processes under a primary (src/core/primary.ts), on the
 * embedded SQLite default. What must hold as with one process: money (no overspend, whichever worker serves),
 * revocation, a graceful stop of all, and a worker that dies replaced.
 */

const ADMIN_TOKEN = "workers-admin-token-5d2a";
const MODEL = "gpt-6.2-astra";
const MAX_TOKENS = 18_000;

let dir: string;
let fake: FakeUpstream;
const started: GatewayChild[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gateway-workers-"));
  fake = await startFakeUpstream();
});

afterAll(async () => {
  for (const { child } of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await Promise.all(started.map(({ child }) => child.exited));
  // Workers whose primary was killed outright stop on their own (tested below); none may outlive the suite.
  for (const pid of workerPids(started)) if (alive(pid)) process.kill(pid, "SIGKILL");
  await fake?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts a primary with `workers` workers on a fresh SQLite file and waits until every worker listens. */
async function startWorkers(workers: number, env: Record<string, string> = {}): Promise<GatewayChild> {
  const gateway = spawnGatewayChild({
    DATABASE_URL: `sqlite:${join(dir, `${crypto.randomUUID()}.db`)}`,
    GATEWAY_WORKERS: String(workers),
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "sk-upstream",
    GATEWAY_SANDBOX: "false",
    ...env,
  });
  started.push(gateway);
  await waitFor(
    () => {
      if (gateway.child.exitCode !== null) throw new Error(`primary exited (${gateway.child.exitCode}):\n${gateway.stdout.text()}${gateway.stderr.text()}`);
      return lines(gateway).some((line) => line.message === "gateway listening" && line.workers === workers) && workerPids([gateway]).length === workers;
    },
    30_000,
    "every worker listening",
  );
  return gateway;
}

/** One row read straight from a stopped gateway's SQLite file. */
function rawRow(path: string, query: string, ...params: string[]): any {
  const db = new Database(path, { readonly: true });
  try {
    return db.query(query).get(...params);
  } finally {
    db.close();
  }
}

function lines(gateway: GatewayChild): any[] {
  return gateway.stdout
    .text()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));
}

function workerPids(gateways: GatewayChild[]): number[] {
  return gateways.flatMap((gateway) => lines(gateway).filter((line) => line.message === "worker listening").map((line) => line.pid as number));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function admin(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, connection: "close", ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await response.json().catch(() => null)) as any;
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json?.data;
}

async function newAccountWithKey(url: string, credit: string) {
  const account = await admin(url, "POST", "/admin/v1/accounts", { name: "workers" });
  await admin(url, "POST", `/admin/v1/accounts/${account.id}/credits`, { amount: credit, kind: "card", reference: crypto.randomUUID() });
  const key = await admin(url, "POST", `/admin/v1/accounts/${account.id}/keys`, { name: "workers key" });
  return { accountId: account.id as string, keyId: key.id as string, key: key.key as string };
}

/** A chat request on a connection of its own (`connection: close`), so the kernel may hand it to any worker. */
async function chatOnNewConnection(url: string, key: string, body: Record<string, unknown> = { model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] }) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", connection: "close" },
    body: JSON.stringify(body),
    keepalive: false, // Bun's fetch would otherwise reuse a pooled connection (to one worker)
  });
  return { status: response.status, body: (await response.json()) as any };
}

/** The workers that wrote an access line for a request id (every line names its worker). */
function servedBy(gateway: GatewayChild, ids: Set<string>): Set<number> {
  return new Set(lines(gateway).filter((line) => line.message === "request" && ids.has(line.request_id)).map((line) => line.worker as number));
}

describe("GATEWAY_WORKERS=2 on the embedded SQLite default", () => {
  let gateway: GatewayChild;
  beforeAll(async () => {
    gateway = await startWorkers(2);
  }, 40_000);

  it("serves one port from two worker processes, each line naming its worker", async () => {
    expect(workerPids([gateway])).toHaveLength(2);
    const { key } = await newAccountWithKey(gateway.url, "20");
    const answers = await Promise.all(Array.from({ length: 40 }, () => chatOnNewConnection(gateway.url, key)));
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    const ids = new Set(answers.map((answer) => answer.body.id as string));
    await waitFor(() => servedBy(gateway, ids).size === 2, 5_000, "access lines of both workers");
    expect([...servedBy(gateway, ids)].sort()).toEqual([0, 1]);
    // Migrations and the admin token were made once, by worker 0, before worker 1 started.
    expect(lines(gateway).filter((line) => line.message === "storage open").map((line) => line.worker).sort()).toEqual([0, 1]);
  }, 30_000);

  it("never spends the same funds twice across workers: 7 of 100 concurrent requests pass, the balance exact and never below zero", () => expectNoOverspend(gateway), 30_000);

  it("keeps the budget holds in the primary (storage.sqlite_holds primary), or as rows of the file with SQLITE_HOLDS=shared, never overspending either way", async () => {
    expect(lines(gateway).filter((line) => line.message === "storage open").map((line) => line.holds)).toEqual(["primary", "primary"]);
    const shared = await startWorkers(2, { SQLITE_HOLDS: "shared" });
    expect(lines(shared).filter((line) => line.message === "storage open").map((line) => line.holds)).toEqual(["shared", "shared"]);
    await expectNoOverspend(shared);
    shared.child.kill("SIGTERM");
    expect(await shared.child.exited).toBe(0);
  }, 40_000);

  it("refuses a key deleted through one worker on every worker at once, not after the auth cache's second", () => expectRevokedEverywhere(gateway), 30_000);

  it("writes each worker's metering on a thread of its own with SQLITE_METERING_THREAD=true, never overspending, all of it written by a SIGTERM stop", async () => {
    const path = join(dir, `${crypto.randomUUID()}.db`);
    const threaded = await startWorkers(2, { SQLITE_METERING_THREAD: "true", DATABASE_URL: `sqlite:${path}` });
    expect(lines(threaded).filter((line) => line.message === "storage open").map((line) => line.metering_thread)).toEqual([true, true]);
    await expectNoOverspend(threaded);
    const { accountId, key } = await newAccountWithKey(threaded.url, "5");
    const answers = await Promise.all(Array.from({ length: 30 }, () => chatOnNewConnection(threaded.url, key)));
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    threaded.child.kill("SIGTERM");
    expect(await threaded.child.exited).toBe(0);
    const stored = rawRow(path, "select count(*) as n, coalesce(sum(total_cost_nano), 0) as cost from generations where account_id = ?", accountId);
    expect(stored.n).toBe(30);
    expect(rawRow(path, "select total_debits_nano as debits from accounts where id = ?", accountId).debits).toBe(stored.cost);
  }, 40_000);

  it("caps the output at what a small balance pays for, the hold fitting the balance exactly, whichever worker decides (holds in the primary)", async () => {
    const messages: Message[] = [{ role: "user", content: "no cap from me" }];
    const { outputPrice } = worstCase(MODEL, messages, 0);
    const caps: number[] = [];
    for (let i = 0; i < 4; i++) {
      const { accountId, key } = await newAccountWithKey(gateway.url, "5");
      fake.reset();
      const answer = await chatOnNewConnection(gateway.url, key, { model: MODEL, messages });
      expect(answer.status).toBe(200);
      caps.push((fake.requests[0]!.body as any).max_completion_tokens);
      // The hold was the largest the 5 USD cover: one output token more would not have fit.
      const accessLine = () => lines(gateway).find((l) => l.message === "request" && l.request_id === answer.body.id);
      await waitFor(() => accessLine() !== undefined, 5_000, "the access line");
      const line = accessLine();
      expect(line.reserved_nano).toBeLessThanOrEqual(usdToNano(5));
      expect(usdToNano(5) - line.reserved_nano).toBeLessThan(outputPrice);
      // Settled and written: nothing stays held.
      await waitFor(async () => (await admin(gateway.url, "GET", `/admin/v1/accounts/${accountId}/funds`)).held === 0, 5_000, "the hold to be released");
    }
    expect(caps[0]).toBeLessThan(catalog.get(MODEL)!.max_output_tokens);
    expect(new Set(caps).size).toBe(1);
  }, 30_000);

  it("replaces a worker killed with -9 and keeps serving meanwhile", async () => {
    const { key } = await newAccountWithKey(gateway.url, "5");
    const [, victim] = workerPids([gateway]);
    process.kill(victim!, "SIGKILL");
    await waitFor(() => lines(gateway).some((line) => line.message === "worker exited; restarting it" && line.worker === 1), 5_000, "the primary to see the worker die");
    const during = await Promise.all(Array.from({ length: 10 }, () => chatOnNewConnection(gateway.url, key)));
    expect(during.map((answer) => answer.status)).toEqual(during.map(() => 200));
    await waitFor(() => workerPids([gateway]).length === 3, 10_000, "worker 1 to listen again");
    const replacement = workerPids([gateway])[2]!;
    expect(replacement).not.toBe(victim);
    expect(alive(replacement)).toBe(true);
    const answers = await Promise.all(Array.from({ length: 30 }, () => chatOnNewConnection(gateway.url, key)));
    await waitFor(() => servedBy(gateway, new Set(answers.map((answer) => answer.body.id))).size === 2, 5_000, "both workers to serve again");
  }, 30_000);

  it("stops every worker on SIGTERM after the streams in flight have finished", async () => {
    const { key } = await newAccountWithKey(gateway.url, "5");
    const directive = `[[fake ${JSON.stringify({ chunk_delay_ms: 150 })}]]`;
    const streams = Array.from({ length: 6 }, () =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", connection: "close" },
        body: JSON.stringify({ model: "gpt-6-luna", stream: true, messages: [{ role: "user", content: `slow ${directive}` }] }),
      }).then((response) => response.text()),
    );
    await Bun.sleep(200); // the streams are under way
    const pids = workerPids([gateway]).filter(alive);
    expect(pids).toHaveLength(2);
    gateway.child.kill("SIGTERM");
    const bodies = await Promise.all(streams);
    for (const text of bodies) expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(await gateway.child.exited).toBe(0);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 30_000);
});

const POSTGRES_URL = process.env.POSTGRES_TEST_URL ?? (/^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "") ? process.env.DATABASE_URL : undefined);

if (POSTGRES_URL) {
  describe("GATEWAY_WORKERS=2 on Postgres", () => {
    let gateway: GatewayChild;
    let scratch: ScratchDatabase;
    beforeAll(async () => {
      scratch = await createScratchDatabase("workers");
      gateway = await startWorkers(2, { DATABASE_URL: scratch.url });
    }, 40_000);
    afterAll(async () => {
      gateway?.child.kill("SIGTERM");
      await gateway?.child.exited;
      await scratch?.drop();
    });

    it("never spends the same funds twice across workers", () => expectNoOverspend(gateway), 30_000);
    it("refuses a key deleted through one worker on every worker at once", () => expectRevokedEverywhere(gateway), 30_000);
  });
} else describe.skip("GATEWAY_WORKERS=2 on Postgres (set POSTGRES_TEST_URL, e.g. postgres://postgres@127.0.0.1:5432/test)", () => it("skipped", () => {}));

describe("GATEWAY_WORKERS logs", () => {
  it("writes every line whole and none lost through a slow log reader, up to the last one of a graceful stop", async () => {
    const port = freePort();
    const child = Bun.spawn([process.execPath, "src/index.ts"], {
      cwd: join(import.meta.dir, "../.."),
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? tmpdir(),
        HOST: "127.0.0.1",
        PORT: String(port),
        EDGE_RATE_LIMIT_RPS: "0",
        GATEWAY_WORKERS: "2",
        GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
        GATEWAY_SANDBOX: "true",
        DATABASE_URL: `sqlite:${join(dir, "slow-log.db")}`,
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    // A log collector slower than the gateway: the pipe fills, and the two workers' writes meet in it.
    const chunks: Uint8Array[] = [];
    const read = (async () => {
      for await (const chunk of child.stdout) {
        chunks.push(chunk);
        await Bun.sleep(100);
      }
    })();
    const url = `http://127.0.0.1:${port}`;
    await waitFor(() => fetch(`${url}/ready`).then((r) => r.status === 200, () => false), 30_000, "the workers to listen");
    await Bun.sleep(500);
    const { key } = await newAccountWithKey(url, "100");
    let answered = 0;
    const until = Date.now() + 2_000;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (Date.now() < until) if ((await chatOnNewConnection(url, key)).status === 200) answered++;
      }),
    );
    child.kill("SIGTERM");
    expect(await child.exited).toBe(0);
    await read;
    const text = Buffer.concat(chunks).toString("utf8");
    const written = text.split("\n").filter((line) => line !== "");
    const unreadable = written.filter((line) => {
      try {
        JSON.parse(line);
        return false;
      } catch {
        return true;
      }
    });
    expect(unreadable).toEqual([]);
    const parsed = written.map((line) => JSON.parse(line));
    expect(parsed.filter((line) => line.message === "request" && line.path === "/v1/chat/completions" && line.status === 200)).toHaveLength(answered);
    expect(answered).toBeGreaterThan(1_000);
    expect(parsed.at(-1)).toMatchObject({ message: "stopped" });
    expect(parsed.filter((line) => line.message === "stopped").map((line) => line.worker ?? "primary").sort()).toEqual([0, 1, "primary"]);
  }, 60_000);
});

describe("GATEWAY_WORKERS faults", () => {
  it("frees the budget holds of workers killed with -9 mid-stream (kept in the primary): the funds are whole again", async () => {
    const gateway = await startWorkers(2);
    const { accountId, key } = await newAccountWithKey(gateway.url, "5");
    const directive = `[[fake ${JSON.stringify({ chunk_delay_ms: 400 })}]]`;
    const streams = Array.from({ length: 4 }, () =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", connection: "close" },
        body: JSON.stringify({ model: "gpt-6-luna", stream: true, max_tokens: 4_000, messages: [{ role: "user", content: `slow ${directive}` }] }),
        keepalive: false,
      }).then((response) => response.text()).catch(() => "cut"),
    );
    const funds = () => admin(gateway.url, "GET", `/admin/v1/accounts/${accountId}/funds`);
    await waitFor(async () => (await funds()).held > 0, 5_000, "the streams to hold funds");
    const victims = workerPids([gateway]);
    for (const pid of victims) process.kill(pid, "SIGKILL");
    await Promise.all(streams);
    await waitFor(() => workerPids([gateway]).filter((pid) => !victims.includes(pid)).length === 2, 15_000, "both workers to listen again");
    const after = await funds();
    expect(after).toMatchObject({ balance: 5, available: 5, held: 0 });
    expect(lines(gateway).some((line) => line.message === "released the holds of a worker that exited")).toBe(true);
  }, 40_000);

  it("workers stop on their own when their primary is killed with -9", async () => {
    const gateway = await startWorkers(2);
    const pids = workerPids([gateway]);
    gateway.child.kill("SIGKILL");
    await waitFor(() => pids.every((pid) => !alive(pid)), 10_000, "the orphaned workers to stop");
  }, 40_000);

  it("refuses to start on a taken port before any worker starts (exit 78, one line)", async () => {
    const port = freePort();
    const taken = Bun.serve({ port, hostname: "127.0.0.1", fetch: () => new Response("someone else") });
    try {
      const gateway = spawnGatewayChild({ PORT: String(port), DATABASE_URL: `sqlite:${join(dir, "taken.db")}`, GATEWAY_WORKERS: "2", GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN });
      started.push(gateway);
      expect(await gateway.child.exited).toBe(78);
      expect(await gateway.stderr.all).toContain("cannot listen on 127.0.0.1:" + port);
      expect(lines(gateway).some((line) => line.message === "worker listening")).toBe(false);
    } finally {
      taken.stop(true);
    }
  }, 20_000);

  it("stops with the worker's reason when a worker cannot start (SQLite holds kept in process memory)", async () => {
    const gateway = spawnGatewayChild({ DATABASE_URL: `sqlite:${join(dir, "process-holds.db")}`, GATEWAY_WORKERS: "2", SQLITE_HOLDS: "process", GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN });
    started.push(gateway);
    expect(await gateway.child.exited).toBe(78);
    const stderr = await gateway.stderr.all;
    expect(stderr).toContain("process-mode gateway");
    expect(stderr).toContain("worker 1 exited with code 78 before it listened");
    expect(workerPids([gateway]).filter(alive)).toEqual([]);
  }, 30_000);
});

async function balanceOf(url: string, key: string) {
  const response = await fetch(`${url}/v1/credits`, { headers: { authorization: `Bearer ${key}`, connection: "close" } });
  const json = (await response.json()) as any;
  if (response.status !== 200) throw new Error(`GET /v1/credits: ${response.status} ${JSON.stringify(json)}`);
  return json.data as { balance: number; total_usage: number; total_credits: number };
}

/** 100 concurrent requests over many connections against funds for exactly 7: 7 pass, the rest are refused, the balance is exact. */
async function expectNoOverspend(gateway: GatewayChild): Promise<void> {
    const { body, reservation } = exactCostRequest(MODEL, MAX_TOKENS, "workers");
    const credit = 7 * reservation + Math.floor(reservation / 2);
    const account = await newAccountWithKey(gateway.url, nanoToUsdString(credit));
    fake.reset();
    // Separate clients, each with its own connections: the kernel spreads them over both workers.
    const clients = Array.from({ length: 10 }, () => new OpenAI({ apiKey: account.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 }));
    const outcomes = await Promise.all(
      Array.from({ length: 100 }, (_, index) =>
        clients[index % clients.length]!.chat.completions.create(body as any).then(
          () => null,
          (error: InstanceType<typeof OpenAI.APIError>) => `${error.status} ${error.code}`,
        ),
      ),
    );
    expect(outcomes.filter((outcome) => outcome === null)).toHaveLength(7);
    expect(new Set(outcomes.filter((outcome) => outcome !== null))).toEqual(new Set(["400 insufficient_balance"]));
    expect(fake.requests).toHaveLength(7);
    // A worker counts its own queued debits and the others' once they are committed (within a group commit): every
    // worker's view, read on connections of their own (so from both), must come to the exact figures. Four reads each
    // 200 ms: the cost API allows a key 30 requests a second.
    const exact = { total_usage: nanoToUsd(7 * reservation), balance: nanoToUsd(credit - 7 * reservation) };
    let views: { total_usage: number; balance: number }[] = [];
    await waitFor(
      async () => {
        views = await Promise.all(Array.from({ length: 4 }, () => balanceOf(gateway.url, account.key)));
        return views.every((view) => view.total_usage === exact.total_usage && view.balance === exact.balance);
      },
      5_000,
      "every worker's view of the debits of the 7",
      200,
    ).catch((error) => {
      throw new Error(`${error}: ${JSON.stringify(views.map(({ total_usage, balance }) => ({ total_usage, balance })))} against ${JSON.stringify(exact)}`);
    });
}

/** A key both workers have cached, deleted through one of them: the next requests on any worker are refused. */
async function expectRevokedEverywhere(gateway: GatewayChild): Promise<void> {
    const account = await newAccountWithKey(gateway.url, "5");
    // Both workers cache the key.
    const warm = await Promise.all(Array.from({ length: 20 }, () => chatOnNewConnection(gateway.url, account.key)));
    expect(warm.map((answer) => answer.status)).toEqual(warm.map(() => 200));
    await waitFor(() => servedBy(gateway, new Set(warm.map((answer) => answer.body.id))).size === 2, 5_000, "both workers to serve the key");
    await admin(gateway.url, "DELETE", `/admin/v1/keys/${account.keyId}`);
    const after = await Promise.all(Array.from({ length: 20 }, () => chatOnNewConnection(gateway.url, account.key)));
    expect(after.map((answer) => answer.status)).toEqual(after.map(() => 401));
}
