import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { InsufficientBalanceError, KeyBudgetExceededError, UnavailableError } from "../../../src/core/errors.ts";
import { InsufficientFundsError, RecordConflictError, RecordNotFoundError } from "../../../src/plugins/storage/errors.ts";
import type { Logger } from "../../../src/core/log.ts";
import type { AttemptRecord } from "../../../src/core/deployments.ts";
import type { DashboardSession, Funds, Generation, GenerationQuery, Repository, ReservationInput } from "../../../src/plugins/storage/repository.ts";
import { accountWithKey, captureLog, makeGeneration } from "./helpers.ts";
import { listingContract } from "./listing-contract.ts";
import { observabilityContract } from "./observability-contract.ts";
import { paymentsContract } from "./payments-contract.ts";

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
  /**
   * false: a queued debit whose request holds nothing is seen by reservations only once written (holds in the
   * workers' primary, which learns of queued debits through the holds they replace). Everywhere, `decide` may run
   * more than once (the last run is the decision), so the tests read the funds of its last run.
   */
  queuedDebitsSeen?: boolean;
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
  paymentsContract(harness.name, { fresh, concurrentInstances: harness.concurrentInstances !== false });
  observabilityContract(harness.name, async (options) => (await fresh()).open(options));

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
      // A taken id (the primary key, not the hash's unique index) is a conflict too, not a driver error.
      await expect(repository.createKey({ ...key, keyHash: "d".repeat(64) })).rejects.toBeInstanceOf(RecordConflictError);
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

    it("keeps the 1-hour cache writes and the signed cache discount, queued, stored, listed and after reopen", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const saved = makeGeneration(account.id, key.id, { promptTokens: 9_000, cachedTokens: 5_000, cacheWriteTokens: 1_000, cacheWrite1hTokens: 600, cacheDiscount: 8_150_000 });
      const lost = makeGeneration(account.id, key.id, { promptTokens: 2_000, cachedTokens: 0, cacheWriteTokens: 2_000, cacheWrite1hTokens: 2_000, cacheDiscount: -4_000_000 });
      const before = { ...makeGeneration(account.id, key.id) } as Partial<typeof saved>;
      delete before.cacheWrite1hTokens; // a writer that predates the columns: stored as 0
      delete before.cacheDiscount;
      for (const g of [saved, lost, before as typeof saved]) repository.recordGeneration(g);
      const expectKept = async (repo: Repository, flushed: boolean) => {
        expect(await repo.findGeneration(account.id, saved.id)).toEqual(saved);
        expect(await repo.findGeneration(account.id, lost.id)).toEqual(lost);
        const listed = new Map((await repo.listGenerations(account.id, { limit: 10 })).map((g) => [g.id, [g.cacheWrite1hTokens ?? 0, g.cacheDiscount ?? 0]]));
        expect(listed.get(saved.id)).toEqual([600, 8_150_000]);
        expect(listed.get(lost.id)).toEqual([2_000, -4_000_000]);
        expect(listed.get(before.id!)).toEqual([0, 0]);
        if (flushed) expect(await repo.findGeneration(account.id, before.id!)).toMatchObject({ cacheWrite1hTokens: 0, cacheDiscount: 0 });
      };
      await expectKept(repository, false); // queued
      await repository.flush();
      await expectKept(repository, true); // stored
      expect(await store.all("select cache_write_1h_tokens, cache_discount_nano from generations where id = ?", lost.id)).toEqual([
        { cache_write_1h_tokens: 2_000, cache_discount_nano: -4_000_000 },
      ]);
      // The daily roll-up keeps the writes' total (both lifetimes), so /v1/usage sums stay exact.
      const day = new Date(saved.createdAt).toISOString().slice(0, 10);
      const [row] = await repository.usageByDay({ accountId: account.id, startDay: day, endDay: day });
      expect(row!.cacheWriteTokens).toBe(1_000 + 2_000 + 1);
      await repository.close();
      await expectKept(await store.open(), true);
    });

    it("keeps the requested model of a fallback, queued, stored, listed and after reopen; NULL when it is the model", async () => {
      const store = await fresh();
      const repository = await store.open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const fellBack = makeGeneration(account.id, key.id, { model: "gpt-fallback", requestedModel: "gpt-asked" });
      const same = makeGeneration(account.id, key.id, { requestedModel: "gpt-test" }); // the model itself: stored as NULL
      const before = { ...makeGeneration(account.id, key.id) } as Partial<typeof fellBack>;
      delete before.requestedModel; // a writer that predates the column
      for (const g of [fellBack, same, before as typeof fellBack]) repository.recordGeneration(g);
      const expectKept = async (repo: Repository, flushed: boolean) => {
        expect(await repo.findGeneration(account.id, fellBack.id)).toEqual(fellBack);
        expect(await repo.findGeneration(account.id, same.id)).toEqual({ ...same, requestedModel: null });
        const listed = new Map((await repo.listGenerations(account.id, { limit: 10 })).map((g) => [g.id, [g.model, g.requestedModel ?? null]]));
        expect(listed.get(fellBack.id)).toEqual(["gpt-fallback", "gpt-asked"]);
        expect(listed.get(same.id)).toEqual(["gpt-test", null]);
        expect(listed.get(before.id!)).toEqual(["gpt-test", null]);
        // The model filter is the model that answered.
        expect((await repo.listGenerations(account.id, { limit: 10, model: "gpt-fallback" })).map((g) => g.id)).toEqual([fellBack.id]);
        if (flushed) expect(await repo.findGeneration(account.id, before.id!)).toMatchObject({ requestedModel: null });
      };
      await expectKept(repository, false); // queued
      await repository.flush();
      await expectKept(repository, true); // stored
      const rows = await store.all<{ id: string; requested_model: string | null }>("select id, requested_model from generations where account_id = ? order by id", account.id);
      expect(new Map(rows.map((r) => [r.id, r.requested_model]))).toEqual(new Map([[fellBack.id, "gpt-asked"], [same.id, null], [before.id!, null]]));
      await repository.close();
      await expectKept(await store.open(), true);
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
      expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { cacheDiscount: 0.5 }))).toThrow(RangeError);
      expect(() => repository.recordGeneration(makeGeneration(account.id, key.id, { cacheWrite1hTokens: 2 }))).toThrow(RangeError); // above cacheWriteTokens (1)
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
      expect(funds.at(-1)).toMatchObject({ account: 98_500, key: 98_500 });

      await repository.flush();
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(0);
      expect(await count(store, "generations where id = ?", held.id)).toBe(1);
      expect(await ledgerSums(store, account.id)).toEqual({ credits: 100_000, debits: 1_500, balance: 98_500 });
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds.at(-1)).toMatchObject({ account: 98_500, key: 98_500 });
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
      expect(seen.at(-1)).toMatchObject({ account: 60_000, key: 10_000 });
      expect(granted).toBe(10_000);
      if (harness.holdRows !== false) {
        expect(await count(store, "reservations")).toBe(2);
        expect(Number((await store.all<{ amount_nano: number }>("select amount_nano from reservations where id = ?", held.id))[0]!.amount_nano)).toBe(40_000);
      }
      // The key is fully held now: nothing more for anyone on it.
      const after: Funds[] = [];
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (funds) => (after.push(funds), 0));
      expect(after.at(-1)).toMatchObject({ account: 50_000, key: 0 });

      // The request settles at hold + extension: its debit replaces the whole hold, queued and committed.
      repository.recordGeneration(makeGeneration(account.id, key.id, { id: held.id, inputCost: 0, outputCost: 40_000, unbilledCost: 7 }));
      await repository.releaseReservation(other.id);
      const funds: Funds[] = [];
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds.at(-1)).toMatchObject({ account: 60_000, key: 10_000 });
      await repository.flush();
      if (harness.holdRows !== false) expect(await count(store, "reservations")).toBe(0);
      await repository.reserve(reservation(account.id, key.id, { keyLimited: true }), (f) => (funds.push(f), 0));
      expect(funds.at(-1)).toMatchObject({ account: 60_000, key: 10_000 });
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
      const windows = seen.at(-1)!.windows;
      // The queued 3 has no hold here: in the workers' primary it counts once written.
      const queued = harness.queuedDebitsSeen === false ? 0 : 3;
      expect(windows.hour.spent).toBe(20 + queued + 4_000);
      expect(windows.day.spent).toBe(100 + 20 + queued + 4_000);
      expect(windows.day.oldestAt).toBeLessThanOrEqual(now - 2 * 3_600_000);
      expect(windows.day.oldestAt).toBeGreaterThan(now - 2 * 3_600_000 - 300_000);
      expect(windows.hour.oldestAt).toBeGreaterThan(hourAgo - 300_000);

      // Another gateway on the same store sees the same after the commit.
      await repository.flush();
      const other = await store.open();
      const otherSeen: Funds[] = [];
      await other.reserve(reservation(account.id, key.id, { windows: { hour: hourAgo, day: dayAgo } }), (f) => (otherSeen.push(f), 0));
      expect(otherSeen.at(-1)!.windows).toEqual({
        hour: { spent: 20 + 3 + 4_000, oldestAt: windows.hour.oldestAt },
        day: { spent: 100 + 20 + 3 + 4_000, oldestAt: windows.day.oldestAt },
      });
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
      if (harness.holdRows !== false) {
        expect(await count(store, "reservations")).toBe(7);
        expect((await one<{ s: number }>(store, "select sum(amount_nano) as s from reservations")).s).toBe(7_000);
      }
      expect(await a.holdsOutstanding()).toEqual({ count: 7, amount: 7_000 });
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
  describe(`storage dashboard contract (${harness.name})`, () => {
    /** Newest first in (created_at, id) order, as both stores must sort. */
    const newestFirst = <T extends { createdAt: number; id: string }>(rows: T[]) =>
      [...rows].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    const ids = (rows: { id: string }[]) => rows.map((row) => row.id);
    const newUser = (accountId: string, email: string, role: "owner" | "member" = "member") => ({
      id: "",
      accountId,
      email,
      role,
      passwordHash: "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA",
    });

    it("creates users of an account, finds them by email and id, lists them oldest first", async () => {
      const repository = await (await fresh()).open();
      const account = await repository.createAccount("Acme");
      const other = await repository.createAccount("Other");
      const owner = await repository.createUser(newUser(account.id, "owner@acme.test", "owner"));
      expect(owner.id).toStartWith("usr_");
      expect(owner).toMatchObject({ accountId: account.id, email: "owner@acme.test", role: "owner" });
      expect(owner.createdAt).toBeNumber();
      await Bun.sleep(2);
      const member = await repository.createUser(newUser(account.id, "member@acme.test"));
      const foreign = await repository.createUser(newUser(other.id, "someone@other.test", "owner"));

      expect(await repository.findUserByEmail("owner@acme.test")).toEqual(owner);
      expect(await repository.findUserByEmail("nobody@acme.test")).toBeNull();
      expect(await repository.getUser(member.id)).toEqual(member);
      expect(await repository.getUser("usr_missing")).toBeNull();
      expect(await repository.listUsers(account.id)).toEqual([owner, member]);
      expect(await repository.listUsers(other.id)).toEqual([foreign]);
      expect(await repository.listUsers("acct_missing")).toEqual([]);
    });

    it("refuses a user whose email or id is taken (conflict), and one of an unknown account (not found)", async () => {
      const repository = await (await fresh()).open();
      const account = await repository.createAccount("Acme");
      const other = await repository.createAccount("Other");
      const first = await repository.createUser(newUser(account.id, "a@acme.test"));
      // The email is unique over the whole gateway, not per account.
      await expect(repository.createUser(newUser(other.id, "a@acme.test"))).rejects.toBeInstanceOf(RecordConflictError);
      await expect(repository.createUser({ ...newUser(account.id, "b@acme.test"), id: first.id })).rejects.toBeInstanceOf(RecordConflictError);
      await expect(repository.createUser(newUser("acct_missing", "c@acme.test"))).rejects.toBeInstanceOf(RecordNotFoundError);
      expect(ids(await repository.listUsers(account.id))).toEqual([first.id]);
      expect(await repository.listUsers(other.id)).toEqual([]);
      expect(await repository.findUserByEmail("c@acme.test")).toBeNull();
    });

    it("keeps dashboard sessions by id hash: found until they expire, deleted one by one or all expired at once", async () => {
      const repository = await (await fresh()).open();
      const account = await repository.createAccount("Acme");
      const user = await repository.createUser(newUser(account.id, "a@acme.test", "owner"));
      const now = 1_800_000_000_000;
      const session = (idHash: string, expiresAt: number, userId: string | null = user.id): DashboardSession => ({ idHash, userId, createdAt: now - 1000, expiresAt });
      const live = session("hash-live", now + 60_000);
      const operator = session("hash-operator", now + 60_000, null);
      const expired = session("hash-expired", now - 1);
      const endsNow = session("hash-ends-now", now);
      for (const s of [live, operator, expired, endsNow]) await repository.createSession(s);

      expect(await repository.findSession("hash-live", now)).toEqual(live);
      expect(await repository.findSession("hash-operator", now)).toEqual(operator);
      expect(await repository.findSession("hash-missing", now)).toBeNull();
      // Expired by now (at or before it): absent, though still stored until swept.
      expect(await repository.findSession("hash-expired", now)).toBeNull();
      expect(await repository.findSession("hash-ends-now", now)).toBeNull();
      expect(await repository.findSession("hash-ends-now", now - 1)).toEqual(endsNow);

      await repository.deleteSession("hash-operator");
      await repository.deleteSession("hash-missing"); // a no-op
      expect(await repository.findSession("hash-operator", now)).toBeNull();

      expect(await repository.deleteExpiredSessions(now)).toBe(2);
      expect(await repository.deleteExpiredSessions(now)).toBe(0);
      expect(await repository.findSession("hash-ends-now", now - 1)).toBeNull();
      expect(await repository.findSession("hash-live", now)).toEqual(live);
      expect(await repository.deleteExpiredSessions(now + 60_000)).toBe(1);
      expect(await repository.findSession("hash-live", now)).toBeNull();
    });

    it("claims a setting once: the second claim is false and keeps the first value; after a delete it can be claimed again", async () => {
      const store = await fresh();
      const repository = await store.open();
      expect(await repository.claimSetting("admin_token_hash", "first")).toBe(true);
      expect(await repository.claimSetting("admin_token_hash", "second")).toBe(false);
      expect(await repository.getSetting("admin_token_hash")).toBe("first");
      await repository.deleteSetting("admin_token_hash");
      await repository.deleteSetting("admin_token_hash"); // a no-op
      expect(await repository.getSetting("admin_token_hash")).toBeNull();
      expect(await repository.claimSetting("admin_token_hash", "third")).toBe(true);
      expect(await repository.getSetting("admin_token_hash")).toBe("third");
      // A value set the ordinary way counts as taken.
      await repository.setSetting("other", "set");
      expect(await repository.claimSetting("other", "claimed")).toBe(false);
      expect(await repository.getSetting("other")).toBe("set");
    });

    it.skipIf(harness.concurrentInstances === false)("gives a setting to exactly one of gateways claiming it together", async () => {
      const store = await fresh();
      const a = await store.open();
      const b = await store.open();
      const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).claimSetting("race", `value-${i}`)));
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(await a.getSetting("race")).toBe(`value-${claims.indexOf(true)}`);
    });

    it("lists an account's credits and plan purchases newest first by a cursor, never usage, never another account's", async () => {
      const store = await fresh();
      const repository = await store.open();
      const { account, key } = await accountWithKey(repository);
      const other = await repository.createAccount("Other");
      await repository.addCredit({ accountId: account.id, amount: 30 * USD, kind: "card", reference: "c1" });
      await Bun.sleep(2);
      await repository.addCredit({ accountId: account.id, amount: USD, kind: "bonus", reference: "welcome" });
      await repository.addCredit({ accountId: other.id, amount: 7 * USD, kind: "card", reference: "other" });
      await Bun.sleep(2);
      const start = Date.now();
      await repository.purchasePlan({
        id: "plan_1",
        accountId: account.id,
        plan: "pro",
        funding: "balance",
        price: 20 * USD,
        bonus: 0,
        startedAt: start,
        endsAt: start + 30 * 86_400_000,
        renewing: false,
      });
      await Bun.sleep(2);
      await repository.addCredit({ accountId: account.id, amount: 2 * USD, kind: "usdt", reference: "0xabc" });
      // Usage: a generation with a cost, queued and committed; it is a ledger debit, not a listed entry.
      repository.recordGeneration(makeGeneration(account.id, key.id, { inputCost: 5_000, outputCost: 0 }));
      await repository.flush();
      repository.recordGeneration(makeGeneration(account.id, key.id, { inputCost: 5_000, outputCost: 0 }));

      const all = await repository.listLedgerEntries(account.id, { limit: 100 });
      expect(all.map((e) => [e.kind, e.amount])).toEqual([
        ["usdt", 2 * USD],
        ["plan", -20 * USD],
        ["bonus", USD],
        ["card", 30 * USD],
      ]);
      expect(all.map((e) => e.reference)).toContain("0xabc");
      expect(all).toEqual(newestFirst(all));
      for (const entry of all) {
        expect(entry.id).toStartWith("le_");
        expect(entry.createdAt).toBeNumber();
      }
      expect((await ledgerSums(store, account.id)).debits).toBe(20 * USD + 5_000);

      const first = await repository.listLedgerEntries(account.id, { limit: 3 });
      const last = first[first.length - 1]!;
      const rest = await repository.listLedgerEntries(account.id, { limit: 3, before: last.createdAt, beforeId: last.id });
      expect(ids([...first, ...rest])).toEqual(ids(all));
      expect(ids(await repository.listLedgerEntries(account.id, { limit: 10, before: all[1]!.createdAt }))).toEqual(
        ids(all.filter((e) => e.createdAt < all[1]!.createdAt)),
      );

      expect((await repository.listLedgerEntries(other.id, { limit: 100 })).map((e) => e.reference)).toEqual(["other"]);
      expect(await repository.listLedgerEntries("acct_missing", { limit: 100 })).toEqual([]);
      expect(await repository.listLedgerEntries(account.id, { limit: 0 })).toEqual([]);
    });

    describe("listGenerations filters", () => {
      const DAY = 86_400_000;
      const day0 = Date.UTC(2026, 0, 10);

      /**
       * An account with two keys, three models, every status, over three days, half committed and half
       * queued (not flushed), and another account with rows that match every filter.
       */
      async function logFixture() {
        const repository = await (await fresh()).open({ flushIntervalMs: 60_000 });
        const { account, key } = await accountWithKey(repository);
        const key2 = await repository.createKey({ ...key, id: "", keyHash: crypto.randomUUID(), name: "second" });
        const { account: other, key: otherKey } = await accountWithKey(repository);
        const models = ["gpt-a", "gpt-b", "claude-c"];
        const statuses = ["success", "success", "failed", "success", "cancelled"] as const;
        const made: Generation[] = [];
        for (let i = 0; i < 60; i++) {
          made.push(
            makeGeneration(account.id, i % 2 === 0 ? key.id : key2.id, {
              model: models[i % 3],
              status: statuses[i % 5],
              errorCode: statuses[i % 5] === "success" ? null : "upstream_error",
              // Three days, and pairs sharing a millisecond (split by id on the cursor).
              createdAt: day0 + Math.floor(i / 20) * DAY + Math.floor((i % 20) / 2) * 1000,
            }),
          );
        }
        const foreign = statuses.map((status, i) => makeGeneration(other.id, otherKey.id, { model: models[i % 3], status, createdAt: day0 + i * 1000 }));
        // Committed first, then queued: a filter must apply to both.
        const shuffled = [...made].sort(() => Math.random() - 0.5);
        for (const g of [...shuffled.slice(0, 30), ...foreign]) repository.recordGeneration(g);
        await repository.flush();
        for (const g of shuffled.slice(30)) repository.recordGeneration(g);
        return { repository, account, key, key2, made };
      }

      /** Every page of the query, by the cursor, `size` at a time. */
      async function allPages(repository: Repository, accountId: string, query: Omit<GenerationQuery, "limit">, size: number): Promise<Generation[]> {
        const out: Generation[] = [];
        let page = await repository.listGenerations(accountId, { ...query, limit: size });
        while (page.length > 0) {
          out.push(...page);
          const last = page[page.length - 1]!;
          page = await repository.listGenerations(accountId, { ...query, limit: size, before: last.createdAt, beforeId: last.id });
        }
        return out;
      }

      it("narrows the log by each filter alone (key, model, status, day), committed and queued alike, newest first", async () => {
        const { repository, account, key, key2, made } = await logFixture();
        const expect_ = async (query: Omit<GenerationQuery, "limit">, keep: (g: Generation) => boolean) => {
          const expected = ids(newestFirst(made.filter(keep)));
          expect(expected.length).toBeGreaterThan(0);
          expect(ids(await repository.listGenerations(account.id, { ...query, limit: 1000 }))).toEqual(expected);
        };
        await expect_({}, () => true);
        await expect_({ keyId: key.id }, (g) => g.keyId === key.id);
        await expect_({ keyId: key2.id }, (g) => g.keyId === key2.id);
        await expect_({ model: "gpt-b" }, (g) => g.model === "gpt-b");
        await expect_({ status: "success" }, (g) => g.status === "success");
        await expect_({ status: "failed" }, (g) => g.status === "failed");
        await expect_({ status: "cancelled" }, (g) => g.status === "cancelled");
        // A day: since its start (inclusive), until the next day's start (exclusive).
        await expect_({ since: day0 + DAY, until: day0 + 2 * DAY }, (g) => g.createdAt >= day0 + DAY && g.createdAt < day0 + 2 * DAY);
        await expect_({ since: day0 + 2 * DAY }, (g) => g.createdAt >= day0 + 2 * DAY);
        await expect_({ until: day0 + DAY }, (g) => g.createdAt < day0 + DAY);
        expect(await repository.listGenerations(account.id, { model: "no-such-model", limit: 100 })).toEqual([]);
        expect(await repository.listGenerations(account.id, { keyId: "key_missing", limit: 100 })).toEqual([]);
      });

      it("combines the filters (all must hold) and pages them by the cursor, none lost or repeated", async () => {
        const { repository, account, key, made } = await logFixture();
        const query = { keyId: key.id, model: "gpt-a", since: day0 + DAY, until: day0 + 3 * DAY };
        const keep = (g: Generation) => g.keyId === key.id && g.model === "gpt-a" && g.createdAt >= day0 + DAY && g.createdAt < day0 + 3 * DAY;
        const expected = ids(newestFirst(made.filter(keep)));
        expect(expected.length).toBeGreaterThan(2);
        expect(ids(await repository.listGenerations(account.id, { ...query, limit: 100 }))).toEqual(expected);
        expect(ids(await allPages(repository, account.id, query, 2))).toEqual(expected);

        const failedOfKey = ids(newestFirst(made.filter((g) => g.status === "failed" && g.keyId === key.id)));
        expect(ids(await repository.listGenerations(account.id, { keyId: key.id, status: "failed", limit: 100 }))).toEqual(failedOfKey);

        // Every single filter pages the same way, across the pairs of rows sharing a millisecond.
        for (const q of [{ status: "success" as const }, { model: "claude-c" }, { since: day0 + DAY }, {}]) {
          expect(ids(await allPages(repository, account.id, q, 3))).toEqual(ids(await repository.listGenerations(account.id, { ...q, limit: 1000 })));
        }
        // The same after the queued ones are committed.
        await repository.flush();
        expect(ids(await allPages(repository, account.id, query, 2))).toEqual(expected);
        expect(ids(await repository.listGenerations(account.id, { status: "cancelled", limit: 1000 }))).toEqual(
          ids(newestFirst(made.filter((g) => g.status === "cancelled"))),
        );
      });

      it("never lists another account's generations, whatever the filters", async () => {
        const { repository, account, key, made } = await logFixture();
        const mine = new Set(ids(made));
        for (const q of [{}, { status: "failed" as const }, { model: "gpt-a" }, { since: day0 }, { keyId: key.id }]) {
          const rows = await repository.listGenerations(account.id, { ...q, limit: 1000 });
          expect(rows.every((g) => g.accountId === account.id && mine.has(g.id))).toBe(true);
        }
        // Another account's key as a filter finds nothing in this account.
        const [foreign] = (await repository.listGenerations((await repository.listAccounts({ limit: 10 })).find((a) => a.id !== account.id)!.id, { limit: 1 }));
        expect(foreign).toBeDefined();
        expect(await repository.listGenerations(account.id, { keyId: foreign!.keyId, limit: 100 })).toEqual([]);
      });
    });
  });
}
