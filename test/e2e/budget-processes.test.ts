import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { countPromptTokens } from "../../src/plugins/token-count/count.ts";
import { nanoToUsd, nanoToUsdString, usdToNano } from "../../src/core/money.ts";
import { openSqlite } from "../../src/plugins/storage/sqlite/open.ts";
import { spawnGatewayChild, untilReady, waitFor, type GatewayChild } from "../helpers/processes.ts";

/**
 * Budget reservations across real gateway processes sharing one SQLite file: two processes never
 * spend the same funds, and the holds of a process killed with -9 are released by the survivors.
 */

const ADMIN_TOKEN = "budget-processes-admin-token";
const catalog = loadCatalog("catalog.yaml");
// $40 per million output tokens: 18,000 output tokens ≈ $0.72, so 7 requests pass the $5 card minimum.
const MODEL = "gpt-6.2-astra";
const MAX_TOKENS = 18_000;

type Message = { role: "user"; content: string };

/** A request whose real cost equals the reservation the gateway holds for it (see budget.test.ts). */
function exactCostRequest(label: string) {
  const entry = catalog.get(MODEL)!;
  let bound = 0;
  for (let attempt = 0; attempt < 20; attempt++) {
    const directive = { usage: { prompt_tokens: bound, completion_tokens: MAX_TOKENS, cache_write_tokens: bound } };
    const messages: Message[] = [{ role: "user", content: `${label} [[fake ${JSON.stringify(directive)}]]` }];
    const next = countPromptTokens({ messages }, true);
    if (next === bound) {
      const prices = catalog.pricesFor(entry, bound, new Date());
      expect(prices.cacheWrite).toBe(Math.max(prices.input, prices.cacheRead, prices.cacheWrite));
      return { body: { model: MODEL, messages, max_tokens: MAX_TOKENS }, reservation: bound * prices.cacheWrite + MAX_TOKENS * prices.output };
    }
    bound = next;
  }
  throw new Error("prompt bound did not converge");
}



let dir: string;
let fake: FakeUpstream;
const children: GatewayChild[] = [];
let sharedDb: string;
let crashDb: string;
let first: GatewayChild;
let second: GatewayChild;
let victim: GatewayChild;
const CRASH_ENV = { BUDGET_HEARTBEAT_MS: "200", BUDGET_STALE_AFTER_MS: "1000" };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gateway-budget-processes-"));
  fake = await startFakeUpstream();
  sharedDb = join(dir, "shared.db");
  crashDb = join(dir, "crash.db");
  // Create and migrate the files first: processes opening a brand-new file at the same instant can
  // fail ("database is locked" while switching it to WAL). Then the three start in parallel (the
  // tokenizer import makes each start take about a second).
  for (const file of [sharedDb, crashDb]) openSqlite(file).client.close();
  [first, second, victim] = await Promise.all([spawnGateway(sharedDb), spawnGateway(sharedDb), spawnGateway(crashDb, CRASH_ENV)]);
}, 20_000);

afterAll(async () => {
  for (const { child } of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await Promise.all(children.map(({ child }) => child.exited));
  await fake?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function spawnGateway(dbFile: string, env: Record<string, string> = {}): Promise<GatewayChild> {
  const gateway = spawnGatewayChild({
    DATABASE_URL: `sqlite:${dbFile}`,
    SQLITE_HOLDS: "shared", // several processes on one file
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "sk-upstream",
    GATEWAY_LOG: "silent",
    ...env,
  });
  children.push(gateway);
  await untilReady(gateway, 10_000);
  return gateway;
}

async function admin(url: string, path: string, body: unknown): Promise<any> {
  const response = await fetch(url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as any;
  if (response.status !== 201) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  return json.data;
}

async function newAccountWithKey(url: string, credit: string, key: Record<string, unknown> = {}) {
  const account = await admin(url, "/admin/v1/accounts", { name: "budget processes" });
  await admin(url, `/admin/v1/accounts/${account.id}/credits`, { amount: credit, kind: "card", reference: crypto.randomUUID() });
  const created = await admin(url, `/admin/v1/accounts/${account.id}/keys`, { name: "budget key", ...key });
  return { accountId: account.id as string, keyId: created.id as string, key: created.key as string };
}

const client = (url: string, key: string) => new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 });

async function credits(url: string, key: string) {
  const response = await fetch(`${url}/v1/credits`, { headers: { authorization: `Bearer ${key}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as any).data;
}

/** `count` requests at once, alternating between the gateways. */
async function burstAcross(gateways: GatewayChild[], key: string, body: Record<string, unknown>, count: number) {
  const clients = gateways.map((gateway) => client(gateway.url, key));
  return Promise.all(
    Array.from({ length: count }, (_, index) =>
      clients[index % clients.length]!.chat.completions.create(body as any).then(
        () => ({ gateway: index % clients.length, ok: true as const, error: null }),
        (error: unknown) => ({ gateway: index % clients.length, ok: false as const, error: error as InstanceType<typeof OpenAI.APIError> }),
      ),
    ),
  );
}

/** Samples credits − committed debits − holds from the shared file while `work` runs. */
async function watchFunds<T>(db: Database, sql: string, id: string, work: Promise<T>): Promise<{ result: T; lowest: number }> {
  const query = db.query<{ available: number }, [string]>(sql);
  let lowest = Number.POSITIVE_INFINITY;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      lowest = Math.min(lowest, query.get(id)!.available);
      await Bun.sleep(1);
    }
  })();
  const result = await work.finally(() => (done = true));
  await sampler;
  return { result, lowest };
}

function count(db: Database, table: "reservations" | "generations"): number {
  return db.query<{ n: number }, []>(`select count(*) as n from ${table}`).get()!.n;
}

describe("two gateway processes on one SQLite file", () => {
  it("serve at most 7 of 100 requests in total from a balance, and at most 7 from a key budget", async () => {
    const gateways = [first, second];
    const db = new Database(sharedDb, { readonly: true });
    try {
      // Account balance.
      const { body, reservation } = exactCostRequest("two processes");
      const credit = 7 * reservation + Math.floor(reservation / 2);
      const account = await newAccountWithKey(first.url, nanoToUsdString(credit));
      fake.reset();
      const { result: outcomes, lowest } = await watchFunds(
        db,
        `select a.total_credits_nano - a.total_debits_nano
           - coalesce((select sum(r.amount_nano) from reservations r where r.account_id = a.id), 0) as available
         from accounts a where a.id = ?`,
        account.accountId,
        burstAcross(gateways, account.key, body, 100),
      );
      expect(outcomes.filter((outcome) => outcome.gateway === 0)).toHaveLength(50);
      expect(outcomes.filter((outcome) => outcome.gateway === 1)).toHaveLength(50);
      const refused = outcomes.flatMap((outcome) => (outcome.ok ? [] : [outcome.error]));
      const unexpected = refused.filter((error) => error.status !== 400 || error.code !== "insufficient_balance");
      expect(unexpected.map((error) => `${error.status} ${error.message}`)).toEqual([]);
      expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(7);
      expect(fake.requests).toHaveLength(7);
      expect(lowest).toBeGreaterThanOrEqual(0);

      await waitFor(() => count(db, "reservations") === 0, 2_000, "the reservations table to empty");
      for (const gateway of gateways) {
        const balance = await credits(gateway.url, account.key);
        expect(balance.total_usage).toBeLessThanOrEqual(balance.total_credits);
        expect(balance.total_usage).toBe(nanoToUsd(7 * reservation));
        expect(balance.balance).toBe(nanoToUsd(credit - 7 * reservation));
      }

      // Key budget.
      const keyed = exactCostRequest("two processes, key budget");
      const limit = 7 * keyed.reservation + Math.floor(keyed.reservation / 2);
      const owner = await newAccountWithKey(second.url, "100", { limit: nanoToUsd(limit) });
      fake.reset();
      const watched = await watchFunds(
        db,
        `select k.limit_nano - k.usage_nano
           - coalesce((select sum(r.amount_nano) from reservations r where r.key_id = k.id), 0) as available
         from api_keys k where k.id = ?`,
        owner.keyId,
        burstAcross(gateways, owner.key, keyed.body, 100),
      );
      const keyOutcomes = watched.result;
      const wrong = keyOutcomes
        .flatMap((outcome) => (outcome.ok ? [] : [outcome.error]))
        .filter((error) => error.status !== 429 || error.code !== "key_budget_exceeded");
      expect(wrong.map((error) => `${error.status} ${error.message}`)).toEqual([]);
      expect(keyOutcomes.filter((outcome) => outcome.ok)).toHaveLength(7);
      expect(fake.requests).toHaveLength(7);
      expect(watched.lowest).toBeGreaterThanOrEqual(0);
      await waitFor(() => count(db, "reservations") === 0, 2_000, "the reservations table to empty");
      const balance = await credits(first.url, owner.key);
      expect(balance.total_usage).toBe(nanoToUsd(7 * keyed.reservation));
      expect(balance.balance).toBe(nanoToUsd(usdToNano(100) - 7 * keyed.reservation));
    } finally {
      db.close();
      for (const gateway of gateways) gateway.child.kill("SIGTERM");
      const codes = await Promise.all(gateways.map((gateway) => gateway.child.exited));
      expect(codes).toEqual([0, 0]);
      for (const gateway of gateways) expect(await gateway.stderr.all).toBe("");
    }
  });
});

describe("kill -9 with reservations in flight", () => {
  it("a new process releases the dead process's holds within ~2 s and the ledger stays consistent", async () => {
    const { accountId, key } = await newAccountWithKey(victim.url, "5");
    const sdk = client(victim.url, key);

    // A few finished requests first, so the ledger has debits to check.
    for (let index = 0; index < 3; index++) {
      await sdk.chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: `finished ${index}` }], max_tokens: 100 });
    }
    // Finished requests reach the file with the next group commit (every 5 ms): wait for it, so what
    // the kill leaves behind is exactly the holds of the requests in flight.
    const written = new Database(crashDb, { readonly: true });
    try {
      await waitFor(() => count(written, "generations") === 3 && count(written, "reservations") === 0, 2_000, "the finished requests' group commit");
    } finally {
      written.close();
    }

    // Slow streams: 1 s between events, so they are all in flight when the process dies.
    const SLOW = 4;
    const streams = await Promise.all(
      Array.from({ length: SLOW }, async (_, index) => {
        const response = await fetch(`${victim.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({
            model: MODEL,
            stream: true,
            max_tokens: 1000,
            messages: [{ role: "user", content: `slow ${index} [[fake {"chunk_delay_ms":1000}]]` }],
          }),
        });
        expect(response.status).toBe(200);
        const reader = response.body!.getReader();
        await reader.read(); // the first event: the request is upstream and its hold is taken
        return reader;
      }),
    );

    const db = new Database(crashDb, { readonly: true });
    try {
      expect(count(db, "reservations")).toBe(SLOW);
      const generationsBefore = count(db, "generations");
      expect(generationsBefore).toBe(3);

      victim.child.kill("SIGKILL");
      expect(await victim.child.exited).not.toBe(0);
      expect(victim.child.signalCode).toBe("SIGKILL");
      for (const reader of streams) await reader.cancel().catch(() => {});
      // Nothing releases them while no process runs.
      await Bun.sleep(50);
      expect(count(db, "reservations")).toBe(SLOW);

      const survivor = await spawnGateway(crashDb, CRASH_ENV);
      const ready = performance.now();
      // The dead process's last heartbeat goes stale 1 s after the kill; the survivor checks every 200 ms
      // (and once at start-up, which alone suffices when the start took over a second).
      await waitFor(() => count(db, "reservations") === 0, 3_000, "the stale reservations to be released");
      expect(performance.now() - ready).toBeLessThan(2_000);

      // The released funds are spendable again, and the ledger adds up.
      await client(survivor.url, key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "after the crash" }], max_tokens: 1000 });
      await waitFor(() => count(db, "generations") === generationsBefore + 1 && count(db, "reservations") === 0, 2_000, "the new generation");

      const account = db
        .query<{ total_credits_nano: number; total_debits_nano: number }, [string]>("select total_credits_nano, total_debits_nano from accounts where id = ?")
        .get(accountId)!;
      const ledger = db.query<{ sum: number }, [string]>("select coalesce(sum(amount_nano), 0) as sum from ledger where account_id = ?").get(accountId)!;
      expect(account.total_credits_nano).toBe(usdToNano(5));
      expect(account.total_credits_nano - account.total_debits_nano).toBe(ledger.sum);
      // Four requests were served, each its own usage debit in the ledger.
      const costs = db.query<{ total_cost_nano: number }, []>("select total_cost_nano from generations").all();
      expect(costs).toHaveLength(4);
      for (const row of costs) expect(row.total_cost_nano).toBeGreaterThan(0);
      expect(db.query<{ n: number }, []>("select count(*) as n from ledger where kind = 'usage'").get()!.n).toBe(4);
      const balance = await credits(survivor.url, key);
      expect(balance.balance).toBe(nanoToUsd(ledger.sum));
      expect(balance.total_usage).toBe(nanoToUsd(account.total_debits_nano));

      survivor.child.kill("SIGTERM");
      expect(await survivor.child.exited).toBe(0);
      expect(await survivor.stderr.all).toBe("");
      // A clean stop leaves no instance row and no hold behind.
      expect(db.query<{ n: number }, []>("select count(*) as n from gateway_instances").get()!.n).toBe(0);
    } finally {
      db.close();
    }
  });
});
