import { Database } from "bun:sqlite";
import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { ConflictError, NotFoundError, UnavailableError } from "../../../src/core/errors.ts";
import type { Repository } from "../../../src/plugins/storage/repository.ts";
import {
  createSqliteRepository,
  type SqliteRepositoryOptions,
} from "../../../src/plugins/storage/sqlite/repository.ts";
import { captureLog, makeGeneration, rawAll, rawGet, removeTempDirs, tempDbPath } from "./helpers.ts";

const open: Repository[] = [];

function openRepository(path: string, options: SqliteRepositoryOptions = {}): Repository {
  const repository = createSqliteRepository(path, { log: captureLog(), ...options });
  open.push(repository);
  return repository;
}

afterEach(async () => {
  for (const repository of open.splice(0)) await repository.close();
});

async function accountWithKey(repository: Repository, keyHash: string = crypto.randomUUID()) {
  const account = await repository.createAccount("Acme");
  const key = await repository.createKey({
    id: "",
    accountId: account.id,
    name: "default",
    keyHash,
    label: "sk-gw-Ab3d…x9Yz",
    limit: null,
    models: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAt: null,
  });
  return { account, key };
}

/** The account's committed ledger, summed with raw SQL. */
function ledgerSums(path: string, accountId: string) {
  return rawGet<{ credits: number; debits: number; balance: number }>(
    path,
    `select coalesce(sum(case when amount_nano > 0 then amount_nano end), 0) as credits,
            coalesce(-sum(case when amount_nano < 0 then amount_nano end), 0) as debits,
            coalesce(sum(amount_nano), 0) as balance
       from ledger_entries where account_id = ?`,
    accountId,
  );
}

/** Runs the metering child until it confirmed `minFlushed` commits, then SIGKILLs it; returns the confirmed count. */
async function meterThenKill(path: string, ids: string[], minFlushed: number): Promise<number> {
  const child = Bun.spawn([process.execPath, `${import.meta.dir}/fixtures/kill-child.ts`, path, ...ids], {
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

describe("storage/sqlite repository", () => {
  it("creates the database file and its parent directory, in WAL mode", async () => {
    const path = tempDbPath();
    const repository = openRepository(path);
    await repository.ping();
    expect(rawGet<{ journal_mode: string }>(path, "pragma journal_mode").journal_mode).toBe("wal");
  });

  it("credits an account once per reference and refuses a reference reused differently", async () => {
    const path = tempDbPath();
    const repository = openRepository(path);
    const account = await repository.createAccount("Acme");
    const other = await repository.createAccount("Other");
    expect(await repository.getAccount(account.id)).toEqual(account);
    expect(account.id).toStartWith("acct_");

    const first = await repository.addCredit({ accountId: account.id, amount: 5_000_000_000, kind: "card", reference: "pi_1" });
    expect(first).toMatchObject({ balance: 5_000_000_000, duplicate: false });
    expect(first.entryId).toStartWith("le_");
    const again = await repository.addCredit({ accountId: account.id, amount: 5_000_000_000, kind: "card", reference: "pi_1" });
    expect(again).toEqual({ entryId: first.entryId, balance: 5_000_000_000, duplicate: true });

    expect(repository.addCredit({ accountId: account.id, amount: 1, kind: "card", reference: "pi_1" })).rejects.toBeInstanceOf(ConflictError);
    expect(repository.addCredit({ accountId: other.id, amount: 5_000_000_000, kind: "card", reference: "pi_1" })).rejects.toThrow(
      "reference already used for another credit",
    );
    expect(repository.addCredit({ accountId: "acct_missing", amount: 1, kind: "card", reference: "pi_x" })).rejects.toBeInstanceOf(
      NotFoundError,
    );

    await repository.addCredit({ accountId: account.id, amount: 1_000_000_000, kind: "bonus", reference: "welcome" });
    await repository.addCredit({ accountId: account.id, amount: 250_000_000, kind: "usdt", reference: "0xabc" });
    expect(await repository.accountTotals(account.id)).toEqual({
      credits: 6_250_000_000,
      debits: 0,
      balance: 6_250_000_000,
      paidCredits: 5_250_000_000,
    });
    expect(rawGet<{ n: number }>(path, "select count(*) as n from ledger_entries where reference = 'pi_1'").n).toBe(1);
    expect(ledgerSums(path, account.id).balance).toBe(6_250_000_000);
    expect(await repository.accountTotals(other.id)).toEqual({ credits: 0, debits: 0, balance: 0, paidCredits: 0 });
  });

  it("stores keys by hash, restricts models as JSON and deletes once", async () => {
    const repository = openRepository(tempDbPath());
    const account = await repository.createAccount("Acme");
    const key = await repository.createKey({
      id: "key_fixed",
      accountId: account.id,
      name: "ci",
      keyHash: "a".repeat(64),
      label: "sk-gw-Ab3d…x9Yz",
      limit: 10_000_000_000,
      models: ["gpt-test", "claude-test"],
      requestsPerMinute: 60,
      tokensPerMinute: 100_000,
      expiresAt: 1_900_000_000_000,
    });
    expect(key).toMatchObject({ id: "key_fixed", blocked: false, deletedAt: null, models: ["gpt-test", "claude-test"] });
    expect(await repository.findKeyByHash("a".repeat(64))).toEqual(key);
    expect(await repository.getKey("key_fixed")).toEqual(key);
    expect(await repository.findKeyByHash("b".repeat(64))).toBeNull();
    expect(
      repository.createKey({ ...key, id: "key_other" }),
    ).rejects.toBeInstanceOf(ConflictError);

    const deleted = await repository.deleteKey("key_fixed");
    expect(deleted?.deletedAt).toBeNumber();
    expect((await repository.findKeyByHash("a".repeat(64)))?.deletedAt).toBe(deleted!.deletedAt);
    expect(await repository.deleteKey("key_fixed")).toBeNull();
    expect(await repository.deleteKey("key_unknown")).toBeNull();
  });

  it("shows a generation at once after recordGeneration, and once only after the flush", async () => {
    const path = tempDbPath();
    const repository = openRepository(path, { flushIntervalMs: 60_000 });
    const { account, key } = await accountWithKey(repository);
    await repository.addCredit({ accountId: account.id, amount: 1_000_000, kind: "card", reference: "c1" });
    const generation = makeGeneration(account.id, key.id, { inputCost: 1_500, outputCost: 2_500 });

    repository.recordGeneration(generation);
    const expectTotalsIncludingIt = async () => {
      expect(await repository.findGeneration(account.id, generation.id)).toEqual(generation);
      expect(await repository.findGeneration(account.id, generation.responseId!)).toEqual(generation);
      expect(await repository.findGeneration("acct_other", generation.id)).toBeNull();
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 1_000_000, debits: 4_000, balance: 996_000, paidCredits: 1_000_000 });
      expect(await repository.keyUsage(key.id)).toBe(4_000);
      expect(await repository.listGenerations(account.id, { limit: 10 })).toEqual([generation]);
      const day = new Date(generation.createdAt).toISOString().slice(0, 10);
      expect(await repository.usageByDay({ accountId: account.id, startDay: day, endDay: day })).toEqual([
        {
          day,
          model: "gpt-test",
          cost: 4_000,
          requests: 1,
          successfulRequests: 1,
          failedRequests: 0,
          promptTokens: 10,
          completionTokens: 20,
          cachedTokens: 2,
          cacheWriteTokens: 1,
        },
      ]);
    };

    await expectTotalsIncludingIt();
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations").n).toBe(0);

    await repository.flush();
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations").n).toBe(1);
    expect(rawAll(path, "select kind, amount_nano, reference, generation_id from ledger_entries where kind = 'usage'")).toEqual([
      { kind: "usage", amount_nano: -4_000, reference: generation.id, generation_id: generation.id },
    ]);
    await expectTotalsIncludingIt();
    expect(ledgerSums(path, account.id)).toEqual({ credits: 1_000_000, debits: 4_000, balance: 996_000 });
  });

  it("meters a request id once, even when it is recorded twice", async () => {
    const path = tempDbPath();
    const repository = openRepository(path, { flushIntervalMs: 60_000 });
    const { account, key } = await accountWithKey(repository);
    const generation = makeGeneration(account.id, key.id);
    repository.recordGeneration(generation);
    repository.recordGeneration(generation);
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    await repository.flush();
    repository.recordGeneration(generation);
    await repository.flush();
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    expect(rawGet<{ n: number }>(path, "select count(*) as n from ledger_entries where generation_id = ?", generation.id).n).toBe(1);
    expect(ledgerSums(path, account.id).debits).toBe(3_000);
  });

  it("keeps totals exact over 1000 generations with random costs, before and after the group commit", async () => {
    const path = tempDbPath();
    const repository = openRepository(path, { flushIntervalMs: 2, maxBatch: 64 });
    const { account, key } = await accountWithKey(repository);
    const second = await repository.createKey({ ...key, id: "", keyHash: crypto.randomUUID(), name: "second" });
    await repository.addCredit({ accountId: account.id, amount: 123_456_789_012, kind: "card", reference: "big" });
    let expected = 0;
    const perKey = new Map<string, number>();
    for (let i = 0; i < 1000; i++) {
      const cost = Math.floor(Math.random() * 50_000_000);
      const keyId = i % 3 === 0 ? second.id : key.id;
      expected += cost;
      perKey.set(keyId, (perKey.get(keyId) ?? 0) + cost);
      repository.recordGeneration(
        makeGeneration(account.id, keyId, { inputCost: cost - (cost >> 1), outputCost: cost >> 1, status: i % 10 === 0 ? "failed" : "success" }),
      );
      if (i % 100 === 0) await Bun.sleep(1); // let some timer flushes interleave
    }
    const totals = { credits: 123_456_789_012, debits: expected, balance: 123_456_789_012 - expected, paidCredits: 123_456_789_012 };
    expect(await repository.accountTotals(account.id)).toEqual(totals);
    // The timer commits everything without an explicit flush.
    for (let i = 0; i < 200 && rawGet<{ n: number }>(path, "select count(*) as n from generations").n < 1000; i++) await Bun.sleep(5);
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations").n).toBe(1000);
    expect(await repository.accountTotals(account.id)).toEqual(totals);
    expect(await repository.keyUsage(key.id)).toBe(perKey.get(key.id)!);
    expect(await repository.keyUsage(second.id)).toBe(perKey.get(second.id)!);
    expect(ledgerSums(path, account.id)).toEqual({ credits: totals.credits, debits: totals.debits, balance: totals.balance });
    expect(rawGet(path, "select total_credits_nano - total_debits_nano as balance from accounts where id = ?", account.id)).toEqual({
      balance: totals.balance,
    });
    const usage = await repository.usageByDay({ accountId: account.id, startDay: "2000-01-01", endDay: "2999-12-31" });
    expect(usage.reduce((sum, row) => sum + row.cost, 0)).toBe(expected);
    expect(usage.reduce((sum, row) => sum + row.requests, 0)).toBe(1000);
    expect(usage.reduce((sum, row) => sum + row.failedRequests, 0)).toBe(100);
  });

  it("splits usage by UTC day across midnight, per account or per key, flushed or pending", async () => {
    const repository = openRepository(tempDbPath(), { flushIntervalMs: 60_000 });
    const { account, key } = await accountWithKey(repository);
    const other = await repository.createKey({ ...key, id: "", keyHash: crypto.randomUUID(), name: "other" });
    const midnight = Date.UTC(2025, 0, 2);
    const before = midnight - 1;
    repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: before, inputCost: 1, outputCost: 0 }));
    repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: midnight, inputCost: 10, outputCost: 0 }));
    await repository.flush();
    // Pending rows on both sides of midnight join the committed roll-ups.
    repository.recordGeneration(makeGeneration(account.id, other.id, { createdAt: before - 1000, inputCost: 100, outputCost: 0 }));
    repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: midnight + 1000, inputCost: 1000, outputCost: 0, model: "claude-test", status: "failed" }));

    const rows = await repository.usageByDay({ accountId: account.id, startDay: "2025-01-01", endDay: "2025-01-02" });
    expect(rows.map((row) => [row.day, row.model, row.cost, row.requests, row.failedRequests])).toEqual([
      ["2025-01-01", "gpt-test", 101, 2, 0],
      ["2025-01-02", "claude-test", 1000, 1, 1],
      ["2025-01-02", "gpt-test", 10, 1, 0],
    ]);
    const keyRows = await repository.usageByDay({ accountId: account.id, keyId: other.id, startDay: "2025-01-01", endDay: "2025-01-02" });
    expect(keyRows.map((row) => [row.day, row.cost])).toEqual([["2025-01-01", 100]]);
    expect(await repository.usageByDay({ accountId: account.id, startDay: "2025-01-02", endDay: "2025-01-02" })).toHaveLength(2);
    await repository.flush();
    expect(await repository.usageByDay({ accountId: account.id, startDay: "2025-01-01", endDay: "2025-01-02" })).toEqual(rows);
  });

  it("lists generations newest first across committed and pending ones, with a before cursor", async () => {
    const repository = openRepository(tempDbPath(), { flushIntervalMs: 60_000 });
    const { account, key } = await accountWithKey(repository);
    const made = [1, 2, 3, 4, 5].map((n) => makeGeneration(account.id, key.id, { createdAt: 1_700_000_000_000 + n }));
    for (const g of made.slice(0, 3)) repository.recordGeneration(g);
    await repository.flush();
    for (const g of made.slice(3)) repository.recordGeneration(g);
    const ids = (list: { id: string }[]) => list.map((g) => g.id);
    expect(ids(await repository.listGenerations(account.id, { limit: 3 }))).toEqual(ids([made[4], made[3], made[2]]));
    expect(ids(await repository.listGenerations(account.id, { limit: 10, before: made[3].createdAt }))).toEqual(ids([made[2], made[1], made[0]]));
    expect(await repository.listGenerations("acct_other", { limit: 10 })).toEqual([]);
  });

  it("persists everything across close and reopen", async () => {
    const path = tempDbPath();
    const first = createSqliteRepository(path, { flushIntervalMs: 60_000, log: captureLog() });
    const { account, key } = await accountWithKey(first, "hash-reopen");
    await first.addCredit({ accountId: account.id, amount: 9_000_000, kind: "voucher", reference: "v1" });
    await first.setSetting("admin_token_hash", "xyz");
    const generation = makeGeneration(account.id, key.id);
    first.recordGeneration(generation); // not flushed: close() must write it
    await first.close();
    expect(first.ping()).rejects.toBeInstanceOf(UnavailableError);

    const second = openRepository(path);
    expect(await second.getAccount(account.id)).toEqual(account);
    expect(await second.findKeyByHash("hash-reopen")).toEqual(key);
    expect(await second.getSetting("admin_token_hash")).toBe("xyz");
    expect(await second.getSetting("missing")).toBeNull();
    expect(await second.findGeneration(account.id, generation.id)).toEqual(generation);
    expect(await second.accountTotals(account.id)).toEqual({ credits: 9_000_000, debits: 3_000, balance: 8_997_000, paidCredits: 0 });
    expect(await second.keyUsage(key.id)).toBe(3_000);
    await second.setSetting("admin_token_hash", "new");
    expect(await second.getSetting("admin_token_hash")).toBe("new");
  });

  it("keeps a batch the database refuses (locked) and retries it on a later tick", async () => {
    const path = tempDbPath();
    const log = captureLog();
    const repository = openRepository(path, { flushIntervalMs: 2, busyTimeoutMs: 0, log });
    const { account, key } = await accountWithKey(repository);
    const locker = new Database(path);
    locker.exec("begin immediate");
    const generation = makeGeneration(account.id, key.id);
    repository.recordGeneration(generation);
    expect(repository.flush()).rejects.toBeInstanceOf(UnavailableError);
    await Bun.sleep(30);
    expect(log.lines.some((line) => line.level === "error" && line.message.includes("flush failed"))).toBe(true);
    expect(await repository.findGeneration(account.id, generation.id)).toEqual(generation);
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    locker.exec("rollback");
    locker.close();
    for (let i = 0; i < 200 && rawGet<{ n: number }>(path, "select count(*) as n from generations").n === 0; i++) await Bun.sleep(5);
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations").n).toBe(1);
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    expect(ledgerSums(path, account.id).debits).toBe(3_000);
  });

  it("sets aside (and logs whole) a generation the schema refuses, without blocking the others", async () => {
    const path = tempDbPath();
    const log = captureLog();
    const repository = openRepository(path, { flushIntervalMs: 60_000, log });
    const { account, key } = await accountWithKey(repository);
    const good = makeGeneration(account.id, key.id);
    const orphan = makeGeneration(account.id, "key_does_not_exist");
    repository.recordGeneration(orphan);
    repository.recordGeneration(good);
    await repository.flush();
    expect(rawAll<{ id: string }>(path, "select id from generations").map((row) => row.id)).toEqual([good.id]);
    expect(await repository.findGeneration(account.id, orphan.id)).toBeNull();
    expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
    const rejected = log.lines.find((line) => line.message.includes("rejected"));
    expect((rejected?.fields?.generation as { id: string }).id).toBe(orphan.id);
  });

  it("refuses malformed generations at recordGeneration", async () => {
    const repository = openRepository(tempDbPath());
    const { account, key } = await accountWithKey(repository);
    expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { totalCost: 1.5 }))).toThrow(RangeError);
    expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { id: "" }))).toThrow(TypeError);
  });

  it("survives kill -9 mid-metering: every stored request has exactly its debit and totals match the ledger", async () => {
    const path = tempDbPath();
    const setup = createSqliteRepository(path, { log: captureLog() });
    const { account, key } = await accountWithKey(setup);
    const other = await setup.createKey({ ...key, id: "", keyHash: crypto.randomUUID(), name: "other" });
    await setup.addCredit({ accountId: account.id, amount: 1_000_000_000_000, kind: "card", reference: "seed" });
    await setup.close();

    // Three rounds on the same file, each child killed at a random point of its group-commit cycle.
    let storedBefore = 0;
    for (let round = 0; round < 3; round++) {
      const flushed = await meterThenKill(path, [account.id, key.id, other.id], 10_000);
      const storedNow = rawGet<{ n: number }>(path, "select count(*) as n from generations").n;
      expect(storedNow).toBeGreaterThanOrEqual(storedBefore + flushed);
      console.log(`kill -9 round ${round + 1}: ${storedNow - storedBefore} generations stored, ${flushed} confirmed by flush before the kill`);
      storedBefore = storedNow;
    }

    const reopened = openRepository(path);
    // Every generation with a cost has exactly its debit, and no debit lacks its generation.
    expect(
      rawGet<{ n: number }>(
        path,
        `select count(*) as n from generations g
           left join (select generation_id, count(*) as entries, sum(amount_nano) as amount
                        from ledger_entries where kind = 'usage' group by generation_id) l on l.generation_id = g.id
           where (g.total_cost_nano > 0 and (l.entries is null or l.entries <> 1 or l.amount <> -g.total_cost_nano))
              or (g.total_cost_nano = 0 and l.entries is not null)`,
      ).n,
    ).toBe(0);
    expect(
      rawGet<{ n: number }>(
        path,
        `select count(*) as n from ledger_entries l
           where l.kind = 'usage' and not exists (select 1 from generations g where g.id = l.generation_id)`,
      ).n,
    ).toBe(0);
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
