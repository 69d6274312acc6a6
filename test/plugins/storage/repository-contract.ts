import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { InsufficientBalanceError, KeyBudgetExceededError, UnavailableError } from "../../../src/core/errors.ts";
import { InsufficientFundsError, RecordConflictError, RecordNotFoundError } from "../../../src/plugins/storage/errors.ts";
import type { Logger } from "../../../src/core/log.ts";
import type { AttemptRecord } from "../../../src/core/deployments.ts";
import type { Funds, Repository, ReservationInput } from "../../../src/plugins/storage/repository.ts";
import { accountWithKey, captureLog, makeGeneration } from "./helpers.ts";
import { listingContract } from "./listing-contract.ts";

/**
 * The storage contract, run against every implementation of `Repository` (SQLite, Postgres). Each
 * implementation's test file passes a harness that makes fresh, empty stores; dialect-specific
 * behaviour (WAL, kill -9, lock retries) stays in that file.
 */

export interface ContractOpenOptions {
  flushIntervalMs?: number;
  maxBatch?: number;
  log?: Logger;
}

export interface ContractStore {
  /** Opens a repository on this store; called twice, two gateway instances on the same data. */
  open(options?: ContractOpenOptions): Promise<Repository>;
  /** Committed rows, read through a separate connection. `?` placeholders; integers come back as numbers. */
  all<T = Record<string, unknown>>(query: string, ...params: (string | number)[]): Promise<T[]>;
}

export interface ContractHarness {
  /** "sqlite", "postgres": shown in the describe name. */
  name: string;
  /** A fresh, empty store (file, database, or a reused database emptied). Earlier stores' repositories are closed by then. */
  fresh(): Promise<ContractStore>;
  /** Removes every store made (after the suite). */
  cleanup(): Promise<void>;
  /** false: one repository at a time on a store (SQLite with process holds locks its file); the tests of several are skipped. */
  concurrentInstances?: boolean;
  /** false: holds live in the process (SQLite process holds), not as rows: the checks of rows are skipped. */
  holdRows?: boolean;
}

type Tracked = ContractStore & { open(options?: ContractOpenOptions): Promise<Repository> };

const USD = 1_000_000_000;

export function repositoryContract(harness: ContractHarness): void {
  const opened: Repository[] = [];

  afterEach(async () => {
    for (const repository of opened.splice(0).reverse()) await repository.close();
  });
  afterAll(() => harness.cleanup(), 60_000);

  /** A fresh store whose repositories are closed after each test. */
  async function fresh(): Promise<Tracked> {
    const store = await harness.fresh();
    return {
      all: store.all.bind(store),
      async open(options = {}) {
        const repository = await store.open({ log: captureLog(), ...options });
        opened.push(repository);
        return repository;
      },
    };
  }

  async function one<T = Record<string, unknown>>(store: ContractStore, query: string, ...params: (string | number)[]): Promise<T> {
    return (await store.all<T>(query, ...params))[0];
  }

  const count = async (store: ContractStore, query: string, ...params: (string | number)[]) =>
    (await one<{ n: number }>(store, `select count(*) as n from ${query}`, ...params)).n;

  /** The account's committed ledger (credits, plans and the generations that are usage debits), summed with raw SQL. */
  const ledgerSums = (store: ContractStore, accountId: string) =>
    one<{ credits: number; debits: number; balance: number }>(
      store,
      `select coalesce(sum(case when amount_nano > 0 then amount_nano end), 0) as credits,
              coalesce(-sum(case when amount_nano < 0 then amount_nano end), 0) as debits,
              coalesce(sum(amount_nano), 0) as balance
         from ledger where account_id = ?`,
      accountId,
    );

  function reservation(accountId: string, keyId: string, overrides: Partial<ReservationInput> = {}): ReservationInput {
    return {
      id: "gen-" + crypto.randomUUID().replaceAll("-", ""),
      accountId,
      keyId,
      keyLimited: false,
      instanceId: "gw_test",
      createdAt: Date.now(),
      ...overrides,
    };
  }

  /** Holds `amount` when the account (and key) can pay it; refuses like the budget plugin otherwise. */
  const hold = (amount: number) => (funds: Funds) => {
    if (funds.account < amount) throw new InsufficientBalanceError("not enough balance");
    if (funds.key !== null && funds.key < amount) throw new KeyBudgetExceededError("not enough key budget");
    return amount;
  };

  listingContract(harness.name, async () => (await fresh()).open());

  describe(`storage repository contract (${harness.name})`, () => {
    it("credits an account once per reference and refuses a reference reused differently", async () => {
      const store = await fresh();
      const repository = await store.open();
      const account = await repository.createAccount("Acme");
      const other = await repository.createAccount("Other");
      expect(await repository.getAccount(account.id)).toEqual(account);
      expect(await repository.getAccount("acct_missing")).toBeNull();
      expect(account.id).toStartWith("acct_");

      const first = await repository.addCredit({ accountId: account.id, amount: 5 * USD, kind: "card", reference: "pi_1" });
      expect(first).toMatchObject({ balance: 5 * USD, duplicate: false });
      expect(first.entryId).toStartWith("le_");
      const again = await repository.addCredit({ accountId: account.id, amount: 5 * USD, kind: "card", reference: "pi_1" });
      expect(again).toEqual({ entryId: first.entryId, balance: 5 * USD, duplicate: true });

      await expect(repository.addCredit({ accountId: account.id, amount: 1, kind: "card", reference: "pi_1" })).rejects.toBeInstanceOf(RecordConflictError);
      await expect(repository.addCredit({ accountId: other.id, amount: 5 * USD, kind: "card", reference: "pi_1" })).rejects.toThrow(
        "reference already used for another credit",
      );
      await expect(repository.addCredit({ accountId: "acct_missing", amount: 1, kind: "card", reference: "pi_x" })).rejects.toBeInstanceOf(
        RecordNotFoundError,
      );

      await repository.addCredit({ accountId: account.id, amount: USD, kind: "bonus", reference: "welcome" });
      await repository.addCredit({ accountId: account.id, amount: 250_000_000, kind: "usdt", reference: "0xabc" });
      expect(await repository.accountTotals(account.id)).toEqual({
        credits: 6_250_000_000,
        debits: 0,
        balance: 6_250_000_000,
        paidCredits: 5_250_000_000,
      });
      expect(await count(store, "ledger_entries where reference = 'pi_1'")).toBe(1);
      expect((await ledgerSums(store, account.id)).balance).toBe(6_250_000_000);
      expect(await repository.accountTotals(other.id)).toEqual({ credits: 0, debits: 0, balance: 0, paidCredits: 0 });
    });

    it.skipIf(harness.concurrentInstances === false)("credits a reference once when gateways race to add it", async () => {
      const store = await fresh();
      const a = await store.open();
      const b = await store.open();
      const account = await a.createAccount("Racy");
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).addCredit({ accountId: account.id, amount: 7 * USD, kind: "card", reference: "race" })),
      );
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
      expect(new Set(results.map((r) => r.entryId)).size).toBe(1);
      expect(await count(store, "ledger_entries where reference = 'race'")).toBe(1);
      expect(await b.accountTotals(account.id)).toEqual({ credits: 7 * USD, debits: 0, balance: 7 * USD, paidCredits: 7 * USD });
      expect(await ledgerSums(store, account.id)).toEqual({ credits: 7 * USD, debits: 0, balance: 7 * USD });
    });

    it("stores keys by hash, restricts models as JSON and deletes once", async () => {
      const repository = await (await fresh()).open();
      const account = await repository.createAccount("Acme");
      const key = await repository.createKey({
        id: "key_fixed",
        accountId: account.id,
        name: "ci",
        keyHash: "a".repeat(64),
        label: "sk-gw-Ab3d…x9Yz",
        limit: 10 * USD,
        models: ["gpt-test", "claude-test"],
        requestsPerMinute: 60,
        tokensPerMinute: 100_000,
        expiresAt: 1_900_000_000_000,
      });
      expect(key).toMatchObject({ id: "key_fixed", blocked: false, deletedAt: null, models: ["gpt-test", "claude-test"] });
      expect(await repository.findKeyByHash("a".repeat(64))).toEqual(key);
      expect(await repository.getKey("key_fixed")).toEqual(key);
      expect(await repository.findKeyByHash("b".repeat(64))).toBeNull();
      expect(await repository.getKey("key_unknown")).toBeNull();
      await expect(repository.createKey({ ...key, id: "key_other" })).rejects.toBeInstanceOf(RecordConflictError);
      await expect(repository.createKey({ ...key, id: "key_orphan", keyHash: "c".repeat(64), accountId: "acct_missing" })).rejects.toBeInstanceOf(
        RecordNotFoundError,
      );

      const deleted = await repository.deleteKey("key_fixed");
      expect(deleted?.deletedAt).toBeNumber();
      expect((await repository.findKeyByHash("a".repeat(64)))?.deletedAt).toBe(deleted!.deletedAt);
      expect(await repository.deleteKey("key_fixed")).toBeNull();
      expect(await repository.deleteKey("key_unknown")).toBeNull();
    });

    it("shows a generation at once after recordGeneration, and once only after the flush", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
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
      expect(await count(store, "generations")).toBe(0);

      await repository.flush();
      expect(await count(store, "generations")).toBe(1);
      // One row per request: the generation is its own usage debit.
      expect(await store.all("select id, kind, amount_nano, reference from ledger where kind = 'usage'")).toEqual([
        { id: generation.id, kind: "usage", amount_nano: -4_000, reference: generation.id },
      ]);
      expect(await count(store, "ledger_entries")).toBe(1); // the card credit
      await expectTotalsIncludingIt();
      expect(await ledgerSums(store, account.id)).toEqual({ credits: 1_000_000, debits: 4_000, balance: 996_000 });
    });

    it("keeps every upstream attempt of a generation, queued, stored, listed and after reopen; null when there was none", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const attempts: AttemptRecord[] = [
        { deployment: "openai#1", status: 503, error_class: "overloaded", latency_ms: 41 },
        { deployment: "openai#2", status: null, error_class: "connection", latency_ms: 3 },
        { deployment: "openai-eu", status: 200, error_class: null, latency_ms: 812 },
      ];
      const retried = makeGeneration(account.id, key.id, { attempts });
      const untried = makeGeneration(account.id, key.id, { status: "failed", errorCode: "no_deployment", inputCost: 0, outputCost: 0 });
      const empty = makeGeneration(account.id, key.id, { attempts: [] });
      for (const g of [retried, untried, empty]) repository.recordGeneration(g);
      const expectAttempts = async (repo: Repository) => {
        expect((await repo.findGeneration(account.id, retried.id))?.attempts).toEqual(attempts);
        expect((await repo.findGeneration(account.id, retried.responseId!))?.attempts).toEqual(attempts);
        expect((await repo.findGeneration(account.id, untried.id))?.attempts).toBeNull();
        expect((await repo.findGeneration(account.id, empty.id))?.attempts).toEqual([]);
        const listed = await repo.listGenerations(account.id, { limit: 10 });
        expect(new Map(listed.map((g) => [g.id, g.attempts]))).toEqual(
          new Map<string, AttemptRecord[] | null | undefined>([[retried.id, attempts], [untried.id, null], [empty.id, []]]),
        );
      };
      await expectAttempts(repository); // queued
      await repository.flush();
      expect(await count(store, "generations")).toBe(3);
      await expectAttempts(repository); // stored
      const [row] = await store.all<{ attempts: string | null }>("select attempts from generations where id = ?", retried.id);
      expect(JSON.parse(row!.attempts!)).toEqual(attempts); // JSON text, the same in both dialects
      expect(await store.all("select attempts from generations where id = ?", untried.id)).toEqual([{ attempts: null }]);
      await repository.close();
      await expectAttempts(await store.open());
    });

    it("meters a request id once, even when it is recorded twice", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const generation = makeGeneration(account.id, key.id);
      repository.recordGeneration(generation);
      repository.recordGeneration(generation);
      expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
      await repository.flush();
      repository.recordGeneration(generation);
      await repository.flush();
      expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
      expect(await count(store, "ledger where reference = ?", generation.id)).toBe(1);
      expect((await ledgerSums(store, account.id)).debits).toBe(3_000);
    });

    it("keeps totals exact over 1000 generations with random costs, before and after the group commit", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 2, maxBatch: 64 });
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
        if (i % 100 === 0) {
          await Bun.sleep(1); // let some timer flushes interleave
          // Reads while commits land: never a generation counted twice or missed.
          expect((await repository.accountTotals(account.id)).debits).toBe(expected);
        }
      }
      const totals = { credits: 123_456_789_012, debits: expected, balance: 123_456_789_012 - expected, paidCredits: 123_456_789_012 };
      expect(await repository.accountTotals(account.id)).toEqual(totals);
      // The timer commits everything without an explicit flush.
      for (let i = 0; i < 400 && (await count(store, "generations")) < 1000; i++) await Bun.sleep(5);
      expect(await count(store, "generations")).toBe(1000);
      expect(await repository.accountTotals(account.id)).toEqual(totals);
      expect(await repository.keyUsage(key.id)).toBe(perKey.get(key.id)!);
      expect(await repository.keyUsage(second.id)).toBe(perKey.get(second.id)!);
      expect(await ledgerSums(store, account.id)).toEqual({ credits: totals.credits, debits: totals.debits, balance: totals.balance });
      expect(await one(store, "select total_credits_nano - total_debits_nano as balance from accounts where id = ?", account.id)).toEqual({
        balance: totals.balance,
      });
      const usage = await repository.usageByDay({ accountId: account.id, startDay: "2000-01-01", endDay: "2999-12-31" });
      expect(usage.reduce((sum, row) => sum + row.cost, 0)).toBe(expected);
      expect(usage.reduce((sum, row) => sum + row.requests, 0)).toBe(1000);
      expect(usage.reduce((sum, row) => sum + row.failedRequests, 0)).toBe(100);
    });

    it("splits usage by UTC day across midnight, per account or per key, flushed or pending", async () => {
      const repository = await (await fresh()).open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const other = await repository.createKey({ ...key, id: "", keyHash: crypto.randomUUID(), name: "other" });
      const midnight = Date.UTC(2025, 0, 2);
      const before = midnight - 1;
      repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: before, inputCost: 1, outputCost: 0 }));
      repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: midnight, inputCost: 10, outputCost: 0 }));
      await repository.flush();
      // Pending rows on both sides of midnight join the committed roll-ups.
      repository.recordGeneration(makeGeneration(account.id, other.id, { createdAt: before - 1000, inputCost: 100, outputCost: 0 }));
      repository.recordGeneration(
        makeGeneration(account.id, key.id, { createdAt: midnight + 1000, inputCost: 1000, outputCost: 0, model: "claude-test", status: "failed" }),
      );

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
      const repository = await (await fresh()).open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const made = [1, 2, 3, 4, 5].map((n) => makeGeneration(account.id, key.id, { createdAt: 1_700_000_000_000 + n }));
      const sameMs = [makeGeneration(account.id, key.id, { createdAt: 1_600_000_000_000 }), makeGeneration(account.id, key.id, { createdAt: 1_600_000_000_000 })];
      for (const g of [...sameMs, ...made.slice(0, 3)]) repository.recordGeneration(g);
      await repository.flush();
      for (const g of made.slice(3)) repository.recordGeneration(g);
      const ids = (list: { id: string }[]) => list.map((g) => g.id);
      expect(ids(await repository.listGenerations(account.id, { limit: 3 }))).toEqual(ids([made[4], made[3], made[2]]));
      expect(ids(await repository.listGenerations(account.id, { limit: 3, before: made[3].createdAt }))).toEqual(ids([made[2], made[1], made[0]]));
      const [high, low] = [...sameMs].sort((a, b) => (a.id < b.id ? 1 : -1));
      expect(ids(await repository.listGenerations(account.id, { limit: 10, before: high.createdAt, beforeId: high.id }))).toEqual([low.id]);
      expect(await repository.listGenerations(account.id, { limit: 0 })).toEqual([]);
      expect(await repository.listGenerations("acct_other", { limit: 10 })).toEqual([]);
    });

    it("persists everything across close and reopen", async () => {
      const store = await fresh();
      const first = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(first, { keyHash: "hash-reopen" });
      await first.addCredit({ accountId: account.id, amount: 9_000_000, kind: "voucher", reference: "v1" });
      await first.setSetting("admin_token_hash", "xyz");
      const generation = makeGeneration(account.id, key.id);
      first.recordGeneration(generation); // not flushed: close() must write it
      await first.close();
      await expect(first.ping()).rejects.toBeInstanceOf(UnavailableError);
      expect(() => first.recordGeneration(makeGeneration(account.id, key.id))).toThrow(UnavailableError);

      const second = await store.open();
      expect(await second.getAccount(account.id)).toEqual(account);
      expect(await second.findKeyByHash("hash-reopen")).toEqual(key);
      expect(await second.getSetting("admin_token_hash")).toBe("xyz");
      expect(await second.getSetting("missing")).toBeNull();
      expect(await second.findGeneration(account.id, generation.id)).toEqual(generation);
      expect(await second.accountTotals(account.id)).toEqual({ credits: 9_000_000, debits: 3_000, balance: 8_997_000, paidCredits: 0 });
      expect(await second.keyUsage(key.id)).toBe(3_000);
      await second.setSetting("admin_token_hash", "new");
      expect(await second.getSetting("admin_token_hash")).toBe("new");
      await second.ping();
    });

    it("sets aside (and logs whole) a generation the schema refuses, without blocking the others", async () => {
      const store = await fresh();
      const log = captureLog();
      const repository = await store.open({ flushIntervalMs: 60_000, log });
      const { account, key } = await accountWithKey(repository);
      await repository.addCredit({ accountId: account.id, amount: USD, kind: "card", reference: "c" });
      const good = makeGeneration(account.id, key.id);
      const orphan = makeGeneration(account.id, "key_does_not_exist");
      await repository.reserve(reservation(account.id, "key_does_not_exist", { id: orphan.id }), () => 50_000);
      repository.recordGeneration(orphan);
      repository.recordGeneration(good);
      await repository.flush();
      expect((await store.all<{ id: string }>("select id from generations")).map((row) => row.id)).toEqual([good.id]);
      expect(await repository.findGeneration(account.id, orphan.id)).toBeNull();
      expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
      const rejected = log.lines.find((line) => line.message.includes("rejected"));
      expect((rejected?.fields?.generation as { id: string }).id).toBe(orphan.id);
      // All or nothing: the refused request's hold was not released by a half-written batch.
      if (harness.holdRows !== false) expect(await count(store, "reservations where id = ?", orphan.id)).toBe(1);
    });

    it("refuses malformed generations at recordGeneration", async () => {
      const repository = await (await fresh()).open();
      const { account, key } = await accountWithKey(repository);
      expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { totalCost: 1.5 }))).toThrow(RangeError);
      expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { totalCost: -1 }))).toThrow(RangeError);
      expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { id: "" }))).toThrow(TypeError);
    });

    it("reserves against the balance and the key budget, refuses in decide, and releases", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository, { limit: 3_000 });
      await repository.addCredit({ accountId: account.id, amount: 10_000, kind: "card", reference: "c" });
      const seen: Funds[] = [];
      const watch = (amount: number) => (funds: Funds) => {
        seen.push(funds);
        return hold(amount)(funds);
      };

      const first = reservation(account.id, key.id, { keyLimited: true });
      expect(await repository.reserve(first, watch(2_000))).toBe(2_000);
      expect(seen.at(-1)).toEqual({ account: 10_000, key: 3_000, windows: {} });
      await expect(repository.reserve(reservation(account.id, key.id, { keyLimited: true }), watch(2_000))).rejects.toBeInstanceOf(
        KeyBudgetExceededError,
      );
      expect(seen.at(-1)).toEqual({ account: 8_000, key: 1_000, windows: {} });
      // Without the key's budget, only the account counts.
      expect(await repository.reserve(reservation(account.id, key.id), watch(7_000))).toBe(7_000);
      expect(seen.at(-1)).toEqual({ account: 8_000, key: null, windows: {} });
      await expect(repository.reserve(reservation(account.id, key.id), watch(1_001))).rejects.toBeInstanceOf(InsufficientBalanceError);
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(2);
      // Nothing to hold: no row.
      expect(await repository.reserve(reservation(account.id, key.id), () => 0)).toBe(0);
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(2);

      await repository.releaseReservation(first.id);
      await repository.releaseReservation("gen-unknown");
      // Every hold on the key counts against its budget, also those taken without checking it.
      await expect(repository.reserve(reservation(account.id, key.id, { keyLimited: true }), watch(1))).rejects.toBeInstanceOf(
        KeyBudgetExceededError,
      );
      expect(seen.at(-1)).toEqual({ account: 3_000, key: -4_000, windows: {} });
      // An unknown account has no funds.
      expect(await repository.reserve(reservation("acct_missing", key.id), (funds) => (seen.push(funds), 0))).toBe(0);
      expect(seen.at(-1)).toEqual({ account: 0, key: null, windows: {} });
    });

    it("a credit is seen by the very next reservation, right after one refused for want of funds (no stale funds kept)", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const seen: Funds[] = [];
      const watch = (amount: number) => (funds: Funds) => {
        seen.push(funds);
        return hold(amount)(funds);
      };
      // The refusal reads (and, in process mode, keeps) the funds: zero.
      await expect(repository.reserve(reservation(account.id, key.id), watch(1_000))).rejects.toBeInstanceOf(InsufficientBalanceError);
      expect(seen.at(-1)!.account).toBe(0);
      await repository.addCredit({ accountId: account.id, amount: 5_000, kind: "card", reference: "top-up-1" });
      expect(await repository.reserve(reservation(account.id, key.id), watch(1_000))).toBe(1_000);
      expect(seen.at(-1)!.account).toBe(5_000);
      // A second credit while a hold is live: seen at once too, less the hold.
      await repository.addCredit({ accountId: account.id, amount: 2_000, kind: "card", reference: "top-up-2" });
      expect(await repository.reserve(reservation(account.id, key.id), watch(5_500))).toBe(5_500);
      expect(seen.at(-1)!.account).toBe(6_000);
    });

    it("writes a request's generation and debit and drops its reservation in one transaction", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository, { limit: 100_000 });
      await repository.addCredit({ accountId: account.id, amount: 100_000, kind: "card", reference: "c" });
      const held = reservation(account.id, key.id, { keyLimited: true });
      await repository.reserve(held, hold(60_000));
      const generation = makeGeneration(account.id, key.id, { id: held.id, inputCost: 1_000, outputCost: 500 });
      repository.recordGeneration(generation);
      if (harness.holdRows !== false) expect(await count(store, "reservations where id = ?", held.id)).toBe(1);

      // The next request of this process already sees the exact cost instead of the hold.
      const funds: Funds[] = [];
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds[0]).toMatchObject({ account: 98_500, key: 98_500 });

      await repository.flush();
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(0);
      expect(await count(store, "generations where id = ?", held.id)).toBe(1);
      expect(await ledgerSums(store, account.id)).toEqual({ credits: 100_000, debits: 1_500, balance: 98_500 });
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds[1]).toMatchObject({ account: 98_500, key: 98_500 });
    });

    it("extends a request's hold by a second reservation of its id, which sees the funds without the hold, and the debit swaps the whole hold", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository, { limit: 50_000 });
      await repository.addCredit({ accountId: account.id, amount: 100_000, kind: "card", reference: "c" });
      const held = reservation(account.id, key.id, { keyLimited: true });
      expect(await repository.reserve(held, hold(30_000))).toBe(30_000);
      const other = reservation(account.id, key.id);
      expect(await repository.reserve(other, hold(10_000))).toBe(10_000);

      // The extension sees every hold, its own request's included, and takes what the key still has.
      const seen: Funds[] = [];
      const granted = await repository.reserve({ ...held, extension: true }, (funds) => {
        seen.push(funds);
        return Math.min(1_000_000, funds.account, funds.key!);
      });
      expect(seen[0]).toMatchObject({ account: 60_000, key: 10_000 });
      expect(granted).toBe(10_000);
      if (harness.holdRows !== false) {
        expect(await count(store, "reservations")).toBe(2);
        expect(Number((await store.all<{ amount_nano: number }>("select amount_nano from reservations where id = ?", held.id))[0]!.amount_nano)).toBe(40_000);
      }
      // The key is fully held now: nothing more for anyone on it.
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (funds) => {
        expect(funds).toMatchObject({ account: 50_000, key: 0 });
        return 0;
      });

      // The request settles at hold + extension: its debit replaces the whole hold, queued and committed.
      repository.recordGeneration(makeGeneration(account.id, key.id, { id: held.id, inputCost: 0, outputCost: 40_000, unbilledCost: 7 }));
      await repository.releaseReservation(other.id);
      const funds: Funds[] = [];
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds[0]).toMatchObject({ account: 60_000, key: 10_000 });
      await repository.flush();
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(0);
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds[1]).toMatchObject({ account: 60_000, key: 10_000 });
      expect(await ledgerSums(store, account.id)).toEqual({ credits: 100_000, debits: 40_000, balance: 60_000 });
      const stored = await repository.findGeneration(account.id, held.id);
      expect(stored).toMatchObject({ totalCost: 40_000, unbilledCost: 7, usageEstimated: false });
    });

    it.skipIf(harness.concurrentInstances === false)("measures plan spend windows from committed spend, queued spend and every hold", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      await repository.addCredit({ accountId: account.id, amount: USD, kind: "card", reference: "c" });
      const now = Date.now();
      const hourAgo = now - 3_600_000;
      const dayAgo = now - 86_400_000;
      repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: now - 2 * 3_600_000, inputCost: 100, outputCost: 0 }));
      repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: now - 60_000, inputCost: 20, outputCost: 0 }));
      await repository.flush();
      repository.recordGeneration(makeGeneration(account.id, key.id, { createdAt: now, inputCost: 3, outputCost: 0 }));
      await repository.reserve(reservation(account.id, key.id), () => 4_000);

      const seen: Funds[] = [];
      await repository.reserve(reservation(account.id, key.id, { windows: { hour: hourAgo, day: dayAgo } }), (f) => (seen.push(f), 0));
      expect(seen[0].windows.hour.spent).toBe(20 + 3 + 4_000);
      expect(seen[0].windows.day.spent).toBe(100 + 20 + 3 + 4_000);
      expect(seen[0].windows.day.oldestAt).toBeLessThanOrEqual(now - 2 * 3_600_000);
      expect(seen[0].windows.day.oldestAt).toBeGreaterThan(now - 2 * 3_600_000 - 300_000);
      expect(seen[0].windows.hour.oldestAt).toBeGreaterThan(hourAgo - 300_000);

      // Another gateway on the same store sees the same after the commit.
      await repository.flush();
      const other = await store.open();
      const otherSeen: Funds[] = [];
      await other.reserve(reservation(account.id, key.id, { windows: { hour: hourAgo, day: dayAgo } }), (f) => (otherSeen.push(f), 0));
      expect(otherSeen[0].windows).toEqual(seen[0].windows);
    });

    it.skipIf(harness.holdRows === false)("releases the reservations of a process that stopped beating, and of one that left cleanly", async () => {
      const store = await fresh();
      const repository = await store.open();
      const { account, key } = await accountWithKey(repository);
      await repository.addCredit({ accountId: account.id, amount: USD, kind: "card", reference: "c" });
      await repository.heartbeat("gw_alive", 10_000);
      await repository.heartbeat("gw_dead", 1_000);
      await repository.heartbeat("gw_leaving", 10_000);
      await repository.heartbeat("gw_alive", 20_000); // a later beat moves the time forward
      for (const instanceId of ["gw_alive", "gw_dead", "gw_dead", "gw_leaving", "gw_never_beat"]) {
        await repository.reserve(reservation(account.id, key.id, { instanceId }), () => 100);
      }
      expect(await repository.releaseStaleReservations(5_000)).toBe(3);
      expect((await store.all<{ instance_id: string }>("select instance_id from reservations order by instance_id")).map((r) => r.instance_id)).toEqual([
        "gw_alive",
        "gw_leaving",
      ]);
      expect((await store.all<{ id: string }>("select id from gateway_instances order by id")).map((r) => r.id)).toEqual(["gw_alive", "gw_leaving"]);
      expect(await repository.releaseStaleReservations(5_000)).toBe(0);
      await repository.removeInstance("gw_leaving");
      expect((await store.all<{ instance_id: string }>("select instance_id from reservations")).map((r) => r.instance_id)).toEqual(["gw_alive"]);
      expect(await count(store, "gateway_instances")).toBe(1);
      // The alive process's reservation still counts.
      await repository.reserve(reservation(account.id, key.id), (funds) => {
        expect(funds.account).toBe(USD - 100);
        return 0;
      });
    });

    it("buys plan cycles: balance funding once per account and within the available balance; bonus credited", async () => {
      const store = await fresh();
      const repository = await store.open();
      const { account, key } = await accountWithKey(repository);
      await repository.addCredit({ accountId: account.id, amount: 30 * USD, kind: "card", reference: "c" });
      const start = 1_800_000_000_000;
      const purchase = (overrides: Partial<Parameters<Repository["purchasePlan"]>[0]> = {}) => ({
        id: "plan_" + crypto.randomUUID().slice(0, 8),
        accountId: account.id,
        plan: "pro",
        funding: "balance" as const,
        price: 20 * USD,
        bonus: 2 * USD,
        startedAt: start,
        endsAt: start + 30 * 86_400_000,
        renewing: false,
        ...overrides,
      });

      const held = reservation(account.id, key.id);
      await repository.reserve(held, () => 11 * USD);
      await expect(repository.purchasePlan(purchase())).rejects.toBeInstanceOf(InsufficientFundsError);
      expect(await repository.activePlan(account.id, start)).toBeNull();
      await repository.releaseReservation(held.id);

      const bought = await repository.purchasePlan(purchase());
      expect(bought.balance).toBe(12 * USD);
      expect(bought.cycle).toMatchObject({ accountId: account.id, plan: "pro", funding: "balance", price: 20 * USD, renewing: false });
      expect(bought.cycle).not.toHaveProperty("bonus");
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 32 * USD, debits: 20 * USD, balance: 12 * USD, paidCredits: 30 * USD });
      expect(await ledgerSums(store, account.id)).toEqual({ credits: 32 * USD, debits: 20 * USD, balance: 12 * USD });
      expect(await repository.activePlan(account.id, start + 1)).toEqual(bought.cycle);
      expect(await repository.activePlan(account.id, start - 1)).toBeNull();
      expect(await repository.activePlan(account.id, start + 31 * 86_400_000)).toBeNull();

      await expect(repository.purchasePlan(purchase({ price: 1 }))).rejects.toBeInstanceOf(RecordConflictError);
      const card = await repository.purchasePlan(purchase({ funding: "card", renewing: true, bonus: 0, startedAt: start + 1000 }));
      expect(card.balance).toBe(12 * USD);
      // A renewing cycle stays in force after its end.
      expect(await repository.activePlan(account.id, start + 400 * 86_400_000)).toEqual(card.cycle);
      await expect(repository.purchasePlan(purchase({ accountId: "acct_missing" }))).rejects.toBeInstanceOf(RecordNotFoundError);
    });

    it.skipIf(harness.concurrentInstances === false)("never overspends: 100 concurrent reservations from two gateways against a balance covering 7", async () => {
      const store = await fresh();
      const a = await store.open();
      const b = await store.open();
      const { account, key } = await accountWithKey(a, { limit: 20 * 1_000 });
      await a.addCredit({ accountId: account.id, amount: 7 * 1_000 + 999, kind: "card", reference: "seven" });
      const outcomes = await Promise.allSettled(
        Array.from({ length: 100 }, (_, i) =>
          (i % 2 === 0 ? a : b).reserve(reservation(account.id, key.id, { keyLimited: i % 3 === 0, instanceId: i % 2 === 0 ? "gw_a" : "gw_b" }), hold(1_000)),
        ),
      );
      const held = outcomes.filter((o) => o.status === "fulfilled");
      expect(held).toHaveLength(7);
      for (const o of outcomes) if (o.status === "rejected") expect(o.reason).toBeInstanceOf(InsufficientBalanceError);
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(7);
      expect((await one<{ s: number }>(store, "select sum(amount_nano) as s from reservations")).s).toBe(7_000);
    });

    it.skipIf(harness.concurrentInstances === false)("never overspends a key budget across gateways, metering while reserving", async () => {
      const store = await fresh();
      const a = await store.open({ flushIntervalMs: 1 });
      const b = await store.open({ flushIntervalMs: 1 });
      const { account, key } = await accountWithKey(a, { limit: 10_000 });
      await a.addCredit({ accountId: account.id, amount: USD, kind: "card", reference: "c" });
      // Each admitted request holds 1000 and then costs 400: 10_000 covers 10 holds, then settled requests free room.
      let admitted = 0;
      await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const repository = i % 2 === 0 ? a : b;
          const input = reservation(account.id, key.id, { keyLimited: true });
          try {
            await repository.reserve(input, hold(1_000));
          } catch (error) {
            expect(error).toBeInstanceOf(KeyBudgetExceededError);
            return;
          }
          admitted += 1;
          await Bun.sleep(Math.floor(Math.random() * 5));
          repository.recordGeneration(makeGeneration(account.id, key.id, { id: input.id, inputCost: 400, outputCost: 0 }));
        }),
      );
      await a.flush();
      await b.flush();
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(0);
      const spent = (await one<{ usage: number }>(store, "select usage_nano as usage from api_keys where id = ?", key.id)).usage;
      expect(spent).toBe(admitted * 400);
      expect(spent).toBeLessThanOrEqual(10_000);
      expect(admitted).toBeGreaterThanOrEqual(10);
    });
  });
}
