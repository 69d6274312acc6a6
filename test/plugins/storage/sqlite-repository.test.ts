import { Database } from "bun:sqlite";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { UnavailableError } from "../../../src/core/errors.ts";
import { InsufficientFundsError } from "../../../src/plugins/storage/errors.ts";
import type { Funds, Repository } from "../../../src/plugins/storage/repository.ts";
import {
  createSqliteRepository,
  type SqliteRepositoryOptions,
} from "../../../src/plugins/storage/sqlite/repository.ts";
import { DEFAULT_MIGRATIONS_FOLDER, openSqlite } from "../../../src/plugins/storage/sqlite/open.ts";
import { startMeteringThread } from "../../../src/plugins/storage/sqlite/metering-thread.ts";
import { spendBucketStart } from "../../../src/plugins/storage/shared/spend-buckets.ts";
import { accountWithKey, captureLog, inProcessPrimary, makeGeneration, rawAll, rawGet, removeTempDirs, tempDbPath } from "./helpers.ts";
import { repositoryContract } from "./repository-contract.ts";

// The behaviour every store shares (test/plugins/storage/repository-contract.ts), on SQLite files.
repositoryContract({
  name: "sqlite",
  async fresh() {
    const path = tempDbPath();
    return {
      open: async (options) => createSqliteRepository(path, options),
      all: async (query, ...params) => rawAll(path, query, ...params),
    };
  },
  cleanup: async () => removeTempDirs(),
});

/** The contract on a file with holds in this process's memory (the gateway's default; the file is locked to one process). */
function processHoldsContract(name: string, options: SqliteRepositoryOptions): void {
  repositoryContract({
    name,
    async fresh() {
      const path = tempDbPath();
      return {
        open: async (open) => createSqliteRepository(path, { ...open, holds: "process", ...options }),
        all: async (query, ...params) => rawAll(path, query, ...params),
      };
    },
    cleanup: async () => removeTempDirs(),
    concurrentInstances: false,
    holdRows: false,
  });
}

/** The contract with the holds of several workers in their primary's memory (GATEWAY_WORKERS on SQLite): each repository opened is another worker of one primary. */
const primaries: ReturnType<typeof inProcessPrimary>[] = [];
function workersContract(name: string, options: SqliteRepositoryOptions): void {
  repositoryContract({
    name,
    async fresh() {
      const path = tempDbPath();
      const primary = inProcessPrimary(path);
      primaries.push(primary);
      let workers = 0;
      return {
        open: async (open) => createSqliteRepository(path, { ...open, holds: "primary", primary: primary.link(workers++), ...options }),
        all: async (query, ...params) => rawAll(path, query, ...params),
      };
    },
    cleanup: async () => {
      for (const primary of primaries.splice(0)) await primary.close();
      removeTempDirs();
    },
    holdRows: false,
    queuedDebitsSeen: false,
  });
}

processHoldsContract("sqlite, process holds", {});
// The group commit's transactions on the metering thread (storage `sqlite_metering_thread`), in one process and in workers.
processHoldsContract("sqlite, process holds, metering thread", { meteringThread: true });
workersContract("sqlite, holds in the workers' primary", {});
workersContract("sqlite, holds in the workers' primary, metering thread", { meteringThread: true });

const open: Repository[] = [];

function openRepository(path: string, options: SqliteRepositoryOptions = {}): Repository {
  const repository = createSqliteRepository(path, { log: captureLog(), ...options });
  open.push(repository);
  return repository;
}

afterEach(async () => {
  for (const repository of open.splice(0)) await repository.close();
});

/** The account's committed ledger (credits, plans, and generations as usage debits), summed with raw SQL. */
function ledgerSums(path: string, accountId: string) {
  return rawGet<{ credits: number; debits: number; balance: number }>(
    path,
    `select coalesce(sum(case when amount_nano > 0 then amount_nano end), 0) as credits,
            coalesce(-sum(case when amount_nano < 0 then amount_nano end), 0) as debits,
            coalesce(sum(amount_nano), 0) as balance
       from ledger where account_id = ?`,
    accountId,
  );
}

/** Runs the metering child until it confirmed `minFlushed` commits, then SIGKILLs it; returns the confirmed count. */
async function meterThenKill(path: string, ids: string[], minFlushed: number, holds: "shared" | "process" | "process+thread"): Promise<number> {
  const child = Bun.spawn([process.execPath, `${import.meta.dir}/fixtures/kill-child.ts`, path, ...ids], {
    env: { ...process.env, KILL_CHILD_HOLDS: holds === "shared" ? "shared" : "process", KILL_CHILD_THREAD: holds === "process+thread" ? "1" : "0" },
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = child.stdout.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let flushed = 0;
  while (flushed < minFlushed) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value);
    flushed = Math.max(0, ...[...text.matchAll(/flushed (\d+)/g)].map((match) => Number(match[1])));
  }
  await Bun.sleep(5 + Math.floor(Math.random() * 300)); // land anywhere in the commit cycle
  child.kill("SIGKILL");
  await child.exited;
  expect(child.signalCode).toBe("SIGKILL");
  expect(flushed).toBeGreaterThanOrEqual(minFlushed);
  return flushed;
}

afterAll(removeTempDirs);

const USD = 1_000_000_000;

describe("storage/sqlite repository", () => {
  it("creates the database file and its parent directory, in WAL mode", async () => {
    const path = tempDbPath();
    const repository = openRepository(path);
    await repository.ping();
    expect(rawGet<{ journal_mode: string }>(path, "pragma journal_mode").journal_mode).toBe("wal");
  });

  it("keeps a batch the database refuses (locked) and retries it on a later tick, logging a failure only after a second of it", async () => {
    const path = tempDbPath();
    const log = captureLog();
    const repository = openRepository(path, { flushIntervalMs: 2, busyTimeoutMs: 0, log });
    const { account, key } = await accountWithKey(repository);
    const locker = new Database(path);
    locker.exec("begin immediate");
    const generation = makeGeneration(account.id, key.id);
    repository.recordGeneration(generation);
    expect(repository.flush()).rejects.toBeInstanceOf(UnavailableError);
    const flushFailed = () => log.lines.some((line) => line.level === "error" && line.message.includes("flush failed"));
    // Another process's commit holding the lock is retried every millisecond, quietly, for a second.
    await Bun.sleep(300);
    expect(flushFailed()).toBe(false);
    await Bun.sleep(900);
    expect(flushFailed()).toBe(true);
    expect(await repository.findGeneration(account.id, generation.id)).toEqual(generation);
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    locker.exec("rollback");
    locker.close();
    for (let i = 0; i < 200 && rawGet<{ n: number }>(path, "select count(*) as n from generations").n === 0; i++) await Bun.sleep(5);
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations").n).toBe(1);
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    expect(ledgerSums(path, account.id).debits).toBe(3_000);
  });

  it("survives kill -9 mid-metering, with shared or process holds or the metering thread: totals match the ledger, whose debits are exactly the stored requests", async () => {
    const path = tempDbPath();
    const setup = createSqliteRepository(path, { log: captureLog() });
    const { account, key } = await accountWithKey(setup);
    const other = await setup.createKey({ ...key, id: "", keyHash: crypto.randomUUID(), name: "other" });
    await setup.addCredit({ accountId: account.id, amount: 1_000_000_000_000, kind: "card", reference: "seed" });
    await setup.close();

    // Four rounds on the same file, each child killed at a random point of its group-commit cycle: shared holds
    // (rows, deleted with their debits), process holds (the default) twice, then the transactions on the metering thread.
    let storedBefore = 0;
    const modes = ["shared", "process", "process", "process+thread"] as const;
    for (let round = 0; round < modes.length; round++) {
      const flushed = await meterThenKill(path, [account.id, key.id, other.id], 10_000, modes[round]!);
      const storedNow = rawGet<{ n: number }>(path, "select count(*) as n from generations").n;
      expect(storedNow).toBeGreaterThanOrEqual(storedBefore + flushed);
      console.log(`kill -9 round ${round + 1}: ${storedNow - storedBefore} generations stored, ${flushed} confirmed by flush before the kill`);
      storedBefore = storedNow;
    }

    const reopened = openRepository(path);
    // Usage debits are the generations themselves: nothing else was written for them.
    expect(rawGet<{ n: number }>(path, "select count(*) as n from ledger_entries where kind = 'usage'").n).toBe(0);
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations where total_cost_nano = 0").n).toBeGreaterThan(0);
    const generationSum = rawGet<{ s: number }>(path, "select sum(total_cost_nano) as s from generations").s;
    const sums = ledgerSums(path, account.id);
    const totals = await reopened.accountTotals(account.id);
    expect(totals).toEqual({ credits: sums.credits, debits: sums.debits, balance: sums.balance, paidCredits: 1_000_000_000_000 });
    expect(totals.debits).toBe(generationSum);
    expect((await reopened.keyUsage(key.id)) + (await reopened.keyUsage(other.id))).toBe(generationSum);
    for (const keyId of [key.id, other.id]) {
      const byKey = rawGet<{ s: number }>(path, "select coalesce(sum(total_cost_nano), 0) as s from generations where key_id = ?", keyId).s;
      expect(await reopened.keyUsage(keyId)).toBe(byKey);
    }
    const rollup = rawGet<{ cost: number; requests: number; failed: number }>(
      path,
      "select sum(cost_nano) as cost, sum(requests) as requests, sum(failed_requests) as failed from usage_daily",
    );
    const fromGenerations = rawGet<{ cost: number; requests: number; failed: number }>(
      path,
      "select sum(total_cost_nano) as cost, count(*) as requests, sum(status <> 'success') as failed from generations",
    );
    expect(rollup).toEqual(fromGenerations);
  }, 60_000);

  it("a plan bought from the balance counts the holds in this process's memory and the debits still queued", async () => {
    const repository = openRepository(tempDbPath(), { holds: "process", flushIntervalMs: 60_000 });
    const { account, key } = await accountWithKey(repository);
    await repository.addCredit({ accountId: account.id, amount: 30 * USD, kind: "card", reference: "c" });
    const start = 1_800_000_000_000;
    const purchase = (id: string) => ({
      id,
      accountId: account.id,
      plan: "pro",
      funding: "balance" as const,
      price: 20 * USD,
      bonus: 0,
      startedAt: start,
      endsAt: start + 30 * 86_400_000,
      renewing: false,
    });
    const input = { id: "gen-held", accountId: account.id, keyId: key.id, keyLimited: false, instanceId: "gw_test", createdAt: start };
    await repository.reserve(input, () => 11 * USD);
    await expect(repository.purchasePlan(purchase("plan_a"))).rejects.toBeInstanceOf(InsufficientFundsError);

    // The request settles at its exact cost: its queued debit (not yet written) counts instead of the hold.
    repository.recordGeneration(makeGeneration(account.id, key.id, { id: "gen-held", totalCost: 11 * USD, outputCost: 11 * USD, inputCost: 0 }));
    await expect(repository.purchasePlan(purchase("plan_b"))).rejects.toBeInstanceOf(InsufficientFundsError);
    expect(await repository.activePlan(account.id, start)).toBeNull();

    await repository.addCredit({ accountId: account.id, amount: 1 * USD, kind: "card", reference: "d" });
    const bought = await repository.purchasePlan(purchase("plan_c"));
    expect(bought.balance).toBe(0);
    expect(await repository.accountTotals(account.id)).toMatchObject({ credits: 31 * USD, debits: 31 * USD, balance: 0 });
  });

  it("keeps the event loop turning while another process holds the write lock, then reserves (shared holds)", async () => {
    const USD = 1_000_000_000;
    const path = tempDbPath();
    const repository = openRepository(path, { holds: "shared" });
    const { account, key } = await accountWithKey(repository);
    await repository.addCredit({ accountId: account.id, amount: 5 * USD, kind: "card", reference: "lock" });
    // Another gateway process (a worker of the same port) in a write transaction for 300 ms.
    const holder = Bun.spawn([process.execPath, "-e", `
      const { Database } = require("bun:sqlite");
      const db = new Database(${JSON.stringify(path)});
      db.exec("BEGIN IMMEDIATE");
      console.log("locked");
      Bun.sleepSync(300);
      db.exec("COMMIT");
    `], { stdout: "pipe" });
    const reader = holder.stdout.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain("locked");
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const started = performance.now();
    const input = { id: "gen-locked", accountId: account.id, keyId: key.id, keyLimited: false, instanceId: "gw_test", createdAt: Date.now() };
    const reserved = repository.reserve(input, () => 1 * USD);
    // SQLite's busy handler would sleep the whole event loop until the lock is free; the reservation is retried instead.
    await Bun.sleep(100);
    expect(ticks).toBeGreaterThanOrEqual(10);
    expect(await reserved).toBe(1 * USD);
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
    clearInterval(ticker);
    await holder.exited;
  });

  it("measures group-commit throughput (printed, not asserted)", async () => {
    const repository = openRepository(tempDbPath(), { flushIntervalMs: 60_000 });
    const { account, key } = await accountWithKey(repository);
    const total = 20_000;
    const batch = 512;
    let elapsed = 0;
    for (let done = 0; done < total; done += batch) {
      for (let i = 0; i < batch; i++) repository.recordGeneration(makeGeneration(account.id, key.id, { model: `m${i % 4}` }));
      const started = performance.now();
      await repository.flush();
      elapsed += performance.now() - started;
    }
    console.log(`group commit: ${Math.round(total / (elapsed / 1000))} generations/s (${total} in batches of ${batch}, random request ids)`);
    expect((await repository.accountTotals(account.id)).debits).toBe(Math.ceil(total / batch) * batch * 3_000);
  }, 60_000);
});

describe("storage/sqlite metering thread", () => {
  const WEEK_START = Date.now() - 7 * 86_400_000;
  const HOUR_START = Date.now() - 3_600_000;
  /** A repository whose thread answers each batch 400 ms after its COMMIT, a batch committed, and its answer still to come. */
  async function batchCommittedNotAnswered() {
    const path = tempDbPath();
    const repository = openRepository(path, { holds: "process", meteringThread: true, meteringThreadFaults: { replyDelayMs: 400 }, flushIntervalMs: 5 });
    const { account, key } = await accountWithKey(repository, { limit: 10 * USD });
    await repository.addCredit({ accountId: account.id, amount: 10 * USD, kind: "card", reference: "seed" });
    const generation = makeGeneration(account.id, key.id, { inputCost: USD / 2, outputCost: USD / 2 });
    repository.recordGeneration(generation);
    // The account's funds and its weekly window read (and kept) while the batch is queued: a later read that finds it
    // stored outdates them, and the decision reads them again.
    const warm = {
      id: "gen-" + crypto.randomUUID().replaceAll("-", ""),
      accountId: account.id,
      keyId: key.id,
      keyLimited: false,
      instanceId: "gw_test",
      createdAt: Date.now(),
      windows: { week: WEEK_START },
    };
    expect(await repository.reserve(warm, () => 0)).toBe(0);
    const deadline = performance.now() + 5_000;
    while (rawAll(path, "select id from generations where id = ?", generation.id).length === 0) {
      if (performance.now() > deadline) throw new Error("the thread did not commit the batch");
      await Bun.sleep(2);
    }
    return { repository, account, key, generation };
  }

  it("counts a batch once while it is committed but the thread has not answered yet: balance, key usage, usage, log, funds", async () => {
    const { repository, account, key, generation } = await batchCommittedNotAnswered();
    const today = new Date().toISOString().slice(0, 10);
    const figures = async () => {
      let seenFunds = null as Funds | null;
      const held = await repository.reserve(
        {
          id: "gen-" + crypto.randomUUID().replaceAll("-", ""),
          accountId: account.id,
          keyId: key.id,
          keyLimited: true,
          instanceId: "gw_test",
          createdAt: Date.now(),
          // The hour's window first: its read (not kept yet) finds the batch stored, after the week's was kept.
          windows: { hour: HOUR_START, week: WEEK_START },
        },
        (funds) => {
          seenFunds = funds;
          return 0;
        },
      );
      expect(held).toBe(0);
      return {
        totals: await repository.accountTotals(account.id),
        keyUsage: await repository.keyUsage(key.id),
        usage: (await repository.usageByDay({ accountId: account.id, startDay: today, endDay: today })).map((row) => [row.requests, row.cost]),
        log: (await repository.listGenerations(account.id, { limit: 10 })).map((g) => g.id),
        funds: seenFunds,
      };
    };
    const spent = { spent: USD, oldestAt: spendBucketStart(generation.createdAt) };
    const expected = {
      totals: { credits: 10 * USD, debits: USD, balance: 9 * USD, paidCredits: 10 * USD },
      keyUsage: USD,
      usage: [[1, USD]],
      log: [generation.id],
      funds: { account: 9 * USD, key: 9 * USD, windows: { hour: spent, week: spent } },
    };
    expect(await figures()).toEqual(expected); // the batch stored, its answer not yet in
    await repository.flush();
    expect(await figures()).toEqual(expected); // answered
  });

  it("keeps every read exact while metering runs on the thread: totals, key usage, usage, funds and the log after each generation, for 1.5 s", async () => {
    const path = tempDbPath();
    const repository = openRepository(path, { holds: "process", meteringThread: true, flushIntervalMs: 1 });
    const { account, key } = await accountWithKey(repository);
    await repository.addCredit({ accountId: account.id, amount: 1_000 * USD, kind: "card", reference: "seed" });
    const today = new Date().toISOString().slice(0, 10);
    let spent = 0;
    let count = 0;
    const wrong: string[] = [];
    for (const until = performance.now() + 1_500; performance.now() < until && wrong.length === 0; ) {
      const cost = 1 + Math.floor(Math.random() * 1_000_000);
      repository.recordGeneration(makeGeneration(account.id, key.id, { inputCost: cost, outputCost: 0 }));
      spent += cost;
      count += 1;
      const totals = await repository.accountTotals(account.id);
      const usage = await repository.usageByDay({ accountId: account.id, startDay: today, endDay: today });
      let funds = Number.NaN;
      const reservation = { id: "gen-" + crypto.randomUUID().replaceAll("-", ""), accountId: account.id, keyId: key.id, keyLimited: false, instanceId: "gw_test", createdAt: Date.now() };
      await repository.reserve(reservation, (seenFunds) => ((funds = seenFunds.account), 0));
      const page = await repository.listGenerations(account.id, { limit: 20 });
      const seen = {
        debits: totals.debits,
        key: await repository.keyUsage(key.id),
        usage: usage[0]?.cost,
        requests: usage[0]?.requests,
        funds,
        pageUnique: new Set(page.map((g) => g.id)).size === page.length,
      };
      const expected = { debits: spent, key: spent, usage: spent, requests: count, funds: 1_000 * USD - spent, pageUnique: true };
      if (JSON.stringify(seen) !== JSON.stringify(expected)) wrong.push(`after ${count}: ${JSON.stringify(seen)} != ${JSON.stringify(expected)}`);
      if (count % 8 === 0) await Bun.sleep(1); // let the timer send batches and the thread's replies in
    }
    expect(wrong).toEqual([]);
    expect(count).toBeGreaterThan(200);
    await repository.flush();
    expect(rawGet<{ n: number; cost: number }>(path, "select count(*) as n, sum(total_cost_nano) as cost from generations")).toEqual({ n: count, cost: spent });
  });

  it("counts the batch once in a plan bought from the balance while the thread has not answered yet", async () => {
    const { repository, account } = await batchCommittedNotAnswered();
    const bought = await repository.purchasePlan({
      id: "pl_1", accountId: account.id, plan: "pro", funding: "balance", price: 8 * USD, bonus: 0,
      startedAt: Date.now(), endsAt: Date.now() + 30 * 86_400_000, renewing: false,
    });
    expect(bought.balance).toBe(USD);
    await repository.flush();
    expect((await repository.accountTotals(account.id)).balance).toBe(USD);
  });

  it("debits a batch once when the thread dies between its COMMIT and its reply: the event loop writes what is left, skipping stored rows", async () => {
    const path = tempDbPath();
    const log = captureLog();
    const repository = openRepository(path, { holds: "process", meteringThread: true, meteringThreadFaults: { dieAfterCommit: true }, flushIntervalMs: 5, log });
    const { account, key } = await accountWithKey(repository, { limit: 100 * USD });
    await repository.addCredit({ accountId: account.id, amount: 100 * USD, kind: "card", reference: "seed" });
    const first = Array.from({ length: 20 }, () => makeGeneration(account.id, key.id, { inputCost: USD / 4, outputCost: USD / 4 }));
    for (const g of first) repository.recordGeneration(g);
    await repository.flush(); // committed by the thread, which died; written again on the event loop, stored rows skipped
    const second = Array.from({ length: 10 }, () => makeGeneration(account.id, key.id, { inputCost: USD / 4, outputCost: USD / 4 }));
    for (const g of second) repository.recordGeneration(g);
    await repository.flush();
    expect(log.lines.some((line) => line.level === "warn" && line.message.startsWith("metering thread failed"))).toBe(true);
    expect(rawGet<{ n: number; cost: number }>(path, "select count(*) as n, sum(total_cost_nano) as cost from generations")).toEqual({ n: 30, cost: 15 * USD });
    expect(await repository.accountTotals(account.id)).toEqual({ credits: 100 * USD, debits: 15 * USD, balance: 85 * USD, paidCredits: 100 * USD });
    expect(await repository.keyUsage(key.id)).toBe(15 * USD);
    expect(rawGet(path, "select total_debits_nano as debits from accounts where id = ?", account.id)).toEqual({ debits: 15 * USD });
    expect(rawGet(path, "select usage_nano as usage from api_keys where id = ?", key.id)).toEqual({ usage: 15 * USD });
    expect(rawGet(path, "select sum(requests) as requests, sum(cost_nano) as cost from usage_daily")).toEqual({ requests: 30, cost: 15 * USD });
  });

  it("is given up when it cannot open the file: a write is refused as lost and the repository writes on the event loop", async () => {
    const log = captureLog();
    const thread = startMeteringThread("/dev/null/no-such-dir/gateway.db", { busyTimeoutMs: 0, log });
    await expect(thread.write([makeGeneration("acct_1", "key_1")])).rejects.toThrow("metering thread");
    expect(thread.alive).toBe(false);
    expect(log.lines.some((line) => line.level === "warn" && line.message.startsWith("metering thread"))).toBe(true);
    await thread.stop();
  });
});

describe("storage/sqlite migration 0005 (usage debits are the generations)", () => {
  it("keeps a pre-0005 database's balance: only the usage rows that repeat their generation go", async () => {
    const path = tempDbPath();
    // The migrations up to 0004, as a database written before this change has them.
    const before = mkdtempSync(join(tmpdir(), "migrations-"));
    cpSync(DEFAULT_MIGRATIONS_FOLDER, before, { recursive: true });
    const journal = JSON.parse(readFileSync(join(before, "meta/_journal.json"), "utf8"));
    const at = journal.entries.findIndex((entry: { tag: string }) => entry.tag.startsWith("0005_"));
    expect(at).toBeGreaterThan(0);
    journal.entries = journal.entries.slice(0, at);
    writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(journal));
    const old = openSqlite(path, { migrationsFolder: before }).client;
    old.exec(`insert into accounts (id, name, created_at, total_credits_nano, total_debits_nano) values ('acct_1', 'a', 0, 1000000, 3500)`);
    old.exec(`insert into api_keys (id, account_id, name, key_hash, label, created_at) values ('key_1', 'acct_1', 'k', 'h', 'l', 0)`);
    old.exec(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at) values ('le_c', 'acct_1', 'card', 1000000, 'pi_1', null, 1)`);
    for (const [id, cost] of [["gen-a", 1500], ["gen-b", 2000], ["gen-c", 0]] as const) {
      const g = makeGeneration("acct_1", "key_1", { id, inputCost: cost, outputCost: 0, totalCost: cost });
      old.query(
        `insert into generations (id, response_id, account_id, key_id, model, provider, ingress, stream, status, error_code, created_at, latency_ms,
           time_to_first_token_ms, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, input_cost_nano,
           cache_read_cost_nano, cache_write_cost_nano, output_cost_nano, total_cost_nano)
         values (?, null, ?, ?, ?, ?, ?, 0, 'success', null, 2, 1, null, 1, 1, 0, 0, 0, ?, 0, 0, 0, ?)`,
      ).run(g.id, g.accountId, g.keyId, g.model, g.provider, g.ingress, cost, cost);
      if (cost > 0) {
        old.query(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at) values (?, 'acct_1', 'usage', ?, ?, ?, 2)`).run(`le_${id}`, -cost, id, id);
      }
    }
    old.close();
    rmSync(before, { recursive: true, force: true });

    const repository = openRepository(path);
    expect(rawAll(path, "select id, kind from ledger_entries order by id")).toEqual([{ id: "le_c", kind: "card" }]);
    expect(ledgerSums(path, "acct_1")).toEqual({ credits: 1_000_000, debits: 3_500, balance: 996_500 });
    expect(await repository.accountTotals("acct_1")).toEqual({ credits: 1_000_000, debits: 3_500, balance: 996_500, paidCredits: 0 });
  });
});

describe("storage/sqlite migration 0008 (generation attempts)", () => {
  it("opens a pre-0008 file: the column is added at start, old rows read with no attempts, new ones keep theirs", async () => {
    const path = tempDbPath();
    // The migrations up to 0007, as a database written before this change has them.
    const before = mkdtempSync(join(tmpdir(), "migrations-"));
    cpSync(DEFAULT_MIGRATIONS_FOLDER, before, { recursive: true });
    const journal = JSON.parse(readFileSync(join(before, "meta/_journal.json"), "utf8"));
    const at = journal.entries.findIndex((entry: { tag: string }) => entry.tag.startsWith("0008_"));
    expect(at).toBeGreaterThan(0);
    journal.entries = journal.entries.slice(0, at);
    writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(journal));
    const old = openSqlite(path, { migrationsFolder: before }).client;
    expect(old.query("select name from pragma_table_info('generations') where name = 'attempts'").all()).toEqual([]);
    old.exec(`insert into accounts (id, name, created_at) values ('acct_1', 'a', 0)`);
    old.exec(`insert into api_keys (id, account_id, name, key_hash, label, created_at) values ('key_1', 'acct_1', 'k', 'h', 'l', 0)`);
    old.exec(
      `insert into generations (id, response_id, account_id, key_id, model, provider, ingress, stream, status, error_code, created_at, latency_ms,
         time_to_first_token_ms, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, input_cost_nano,
         cache_read_cost_nano, cache_write_cost_nano, output_cost_nano, total_cost_nano, unbilled_cost_nano, usage_estimated)
       values ('gen-old', null, 'acct_1', 'key_1', 'm', 'p', 'openai-chat', 0, 'success', null, 2, 1, null, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)`,
    );
    old.close();
    rmSync(before, { recursive: true, force: true });

    const repository = openRepository(path);
    expect((await repository.findGeneration("acct_1", "gen-old"))?.attempts).toBeNull();
    const attempts = [{ deployment: "p#1", status: 200, error_class: null, latency_ms: 9 }];
    const fresh = makeGeneration("acct_1", "key_1", { attempts });
    repository.recordGeneration(fresh);
    await repository.flush();
    expect((await repository.findGeneration("acct_1", fresh.id))?.attempts).toEqual(attempts);
    expect(rawAll(path, "select id, attempts from generations order by id")).toEqual([
      { id: fresh.id, attempts: JSON.stringify(attempts) },
      { id: "gen-old", attempts: null },
    ]);
  });
});

describe("storage/sqlite migrations 0009 and 0010 (log filter indexes, dashboard users and sessions)", () => {
  it("opens a pre-0009 file: the indexes and tables are added at start, and its old rows are filtered and listed", async () => {
    const path = tempDbPath();
    // The migrations up to 0008, as a database written before this change has them.
    const before = mkdtempSync(join(tmpdir(), "migrations-"));
    cpSync(DEFAULT_MIGRATIONS_FOLDER, before, { recursive: true });
    const journal = JSON.parse(readFileSync(join(before, "meta/_journal.json"), "utf8"));
    const at = journal.entries.findIndex((entry: { tag: string }) => entry.tag.startsWith("0009_"));
    expect(at).toBeGreaterThan(0);
    journal.entries = journal.entries.slice(0, at);
    writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(journal));
    const old = openSqlite(path, { migrationsFolder: before }).client;
    expect(old.query("select name from sqlite_master where name in ('users', 'dashboard_sessions')").all()).toEqual([]);
    old.exec(`insert into accounts (id, name, created_at) values ('acct_1', 'a', 0)`);
    old.exec(`insert into api_keys (id, account_id, name, key_hash, label, created_at) values ('key_1', 'acct_1', 'k', 'h', 'l', 0)`);
    for (const [id, status, createdAt] of [["gen-a", "success", 2], ["gen-b", "failed", 3], ["gen-c", "cancelled", 4]] as const) {
      old.exec(
        `insert into generations (id, response_id, account_id, key_id, model, provider, ingress, stream, status, error_code, created_at, latency_ms,
           time_to_first_token_ms, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, input_cost_nano,
           cache_read_cost_nano, cache_write_cost_nano, output_cost_nano, total_cost_nano, unbilled_cost_nano, usage_estimated)
         values ('${id}', null, 'acct_1', 'key_1', 'm', 'p', 'openai-chat', 0, '${status}', null, ${createdAt}, 1, null, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)`,
      );
    }
    old.close();
    rmSync(before, { recursive: true, force: true });

    const repository = openRepository(path);
    const indexes = rawAll<{ name: string }>(path, "select name from sqlite_master where type = 'index' and tbl_name = 'generations' order by name").map((r) => r.name);
    expect(indexes).toEqual(
      expect.arrayContaining(["generations_account_key_created_idx", "generations_account_model_created_idx", "generations_account_status_created_idx"]),
    );
    const ids = async (query: Parameters<Repository["listGenerations"]>[1]) => (await repository.listGenerations("acct_1", query)).map((g) => g.id);
    expect(await ids({ limit: 10 })).toEqual(["gen-c", "gen-b", "gen-a"]);
    expect(await ids({ limit: 10, status: "failed" })).toEqual(["gen-b"]);
    expect(await ids({ limit: 10, status: "success", keyId: "key_1", model: "m" })).toEqual(["gen-a"]);
    const user = await repository.createUser({ id: "", accountId: "acct_1", email: "a@b.test", role: "owner", passwordHash: "x" });
    expect(await repository.findUserByEmail("a@b.test")).toEqual(user);
    await repository.createSession({ idHash: "h", userId: user.id, createdAt: 1, expiresAt: 10 });
    expect(await repository.findSession("h", 5)).toMatchObject({ userId: user.id });
  });

  it("uses the partial status index for a status other than success, the key and model indexes for theirs", async () => {
    const path = tempDbPath();
    openRepository(path);
    const plan = (where: string) =>
      rawAll<{ detail: string }>(
        path,
        `explain query plan select id from generations where account_id = 'a' and ${where} order by created_at desc, id desc limit 50`,
      )
        .map((r) => r.detail)
        .join(" | ");
    // The query states the partial index's condition (shared/page.ts), as SQLite needs to use it.
    expect(plan(`status = 'failed' and "generations"."status" <> 'success'`)).toContain("generations_account_status_created_idx");
    expect(plan(`key_id = 'k'`)).toContain("generations_account_key_created_idx");
    expect(plan(`model = 'm'`)).toContain("generations_account_model_created_idx");
    expect(plan(`status = 'success'`)).toContain("generations_account_created_idx");
  });
});

describe("storage/sqlite migration 0011 (payments: top-ups, events, refund and dispute kinds)", () => {
  it("rebuilds ledger_entries for its new CHECKs keeping every row, both indexes and the ledger view", async () => {
    const path = tempDbPath();
    // The migrations up to 0010, as a database written before payments has them.
    const before = mkdtempSync(join(tmpdir(), "migrations-"));
    cpSync(DEFAULT_MIGRATIONS_FOLDER, before, { recursive: true });
    const journal = JSON.parse(readFileSync(join(before, "meta/_journal.json"), "utf8"));
    const at = journal.entries.findIndex((entry: { tag: string }) => entry.tag.startsWith("0011_"));
    expect(at).toBeGreaterThan(0);
    journal.entries = journal.entries.slice(0, at);
    writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(journal));
    const old = openSqlite(path, { migrationsFolder: before }).client;
    old.exec(`insert into accounts (id, name, created_at, total_credits_nano) values ('acct_1', 'a', 0, 7)`);
    old.exec(`insert into api_keys (id, account_id, name, key_hash, label, created_at) values ('key_1', 'acct_1', 'k', 'h', 'l', 0)`);
    old.exec(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, created_at) values ('le_1', 'acct_1', 'card', 9, 'pi_1', 1), ('le_2', 'acct_1', 'plan', -2, 'plan:p', 2)`);
    old.close();
    rmSync(before, { recursive: true, force: true });

    const repository = openRepository(path);
    expect(rawAll(path, "select id, kind, amount_nano, reference from ledger_entries order by id")).toEqual([
      { id: "le_1", kind: "card", amount_nano: 9, reference: "pi_1" },
      { id: "le_2", kind: "plan", amount_nano: -2, reference: "plan:p" },
    ]);
    expect(rawAll(path, "select name from sqlite_master where tbl_name = 'ledger_entries' and type = 'index' and sql is not null order by name")).toEqual([
      { name: "ledger_account_created_idx" },
      { name: "ledger_entries_reference_unique" },
    ]);
    expect(rawGet<{ n: number }>(path, "select count(*) as n from ledger where account_id = 'acct_1'").n).toBe(2);
    expect(rawAll(path, "pragma integrity_check")).toEqual([{ integrity_check: "ok" }]);
    expect(await repository.findKeyByHash("h")).toMatchObject({ id: "key_1", accountBlockedReason: null });
    const writer = new Database(path);
    try {
      writer.exec(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, created_at) values ('le_3', 'acct_1', 'refund', -1, 're_1', 3)`);
      expect(() => writer.exec(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, created_at) values ('le_4', 'acct_1', 'dispute', 1, 'dp_1', 3)`)).toThrow(
        "ledger_sign_check",
      );
    } finally {
      writer.close();
    }
  });

  it("reads a key with its account's block in one indexed query, and top-ups by their indexes", async () => {
    const path = tempDbPath();
    openRepository(path);
    const plan = (query: string) =>
      rawAll<{ detail: string }>(path, `explain query plan ${query}`)
        .map((r) => r.detail)
        .join(" | ");
    const byHash = plan(
      `select * from api_keys inner join accounts on accounts.id = api_keys.account_id where api_keys.key_hash = 'h'`,
    );
    expect(byHash).toContain("api_keys_key_hash_unique");
    expect(byHash).not.toContain("SCAN");
    expect(plan(`select * from topups where payment_ref = 'pi'`)).toContain("topups_payment_ref_idx");
    expect(plan(`select * from topups where network = 'tron' and pay_to = 'T' and status = 'pending' and (expires_at is null or expires_at > 5)`)).toContain(
      "topups_network_pay_to_status_idx",
    );
    expect(plan(`select * from topups where status = 'pending' and expires_at <= 5 order by expires_at, id limit 10`)).toContain("topups_pending_expires_idx");
    expect(plan(`select * from topups where account_id = 'a' order by created_at desc, id desc limit 10`)).toContain("topups_account_created_idx");
  });
});
