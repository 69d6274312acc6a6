import { describe, expect, it } from "bun:test";
import type { Repository, ReservationInput } from "../../../src/plugins/storage/repository.ts";
import { accountWithKey, makeGeneration } from "./helpers.ts";

const USD = 1_000_000_000;

/**
 * What GET /metrics reads of the store (the metrics plugin), run by `repositoryContract` against every store:
 * the ledger's credits by kind, the holds outstanding, and the group commit's observer. `open` gives a
 * repository on a fresh, empty store whose group commit waits `flushIntervalMs` (long: only flush() writes).
 */
export function observabilityContract(name: string, open: (options: { flushIntervalMs: number }) => Promise<Repository>): void {
  const hold = (accountId: string, keyId: string): ReservationInput => ({
    id: "gen-" + crypto.randomUUID().replaceAll("-", ""),
    accountId,
    keyId,
    keyLimited: false,
    instanceId: "gw_test",
    createdAt: Date.now(),
  });

  describe(`storage observability contract (${name})`, () => {
    it("sums the ledger's credits by kind over every account, usage left out", async () => {
      const repository = await open({ flushIntervalMs: 60_000 });
      expect(await repository.creditTotalsByKind()).toEqual({});
      const one = await accountWithKey(repository);
      const other = await repository.createAccount("Other");
      await repository.addCredit({ accountId: one.account.id, amount: 10 * USD, kind: "card", reference: crypto.randomUUID() });
      await repository.addCredit({ accountId: other.id, amount: 2 * USD, kind: "card", reference: crypto.randomUUID() });
      await repository.addCredit({ accountId: other.id, amount: 1 * USD, kind: "bonus", reference: crypto.randomUUID() });
      // A replay is the same credit: counted once.
      const reference = crypto.randomUUID();
      await repository.addCredit({ accountId: one.account.id, amount: 3 * USD, kind: "voucher", reference });
      await repository.addCredit({ accountId: one.account.id, amount: 3 * USD, kind: "voucher", reference });
      // Usage debits are generations, never a kind here, whether queued or written.
      repository.recordGeneration(makeGeneration(one.account.id, one.key.id, { inputCost: 500, outputCost: 700 }));
      expect(await repository.creditTotalsByKind()).toEqual({ card: 12 * USD, bonus: 1 * USD, voucher: 3 * USD });
      await repository.flush();
      expect(await repository.creditTotalsByKind()).toEqual({ card: 12 * USD, bonus: 1 * USD, voucher: 3 * USD });
    });

    it("counts the holds outstanding: a settled request's hold gives way to its debit, a released one is gone", async () => {
      const repository = await open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      await repository.addCredit({ accountId: account.id, amount: 1 * USD, kind: "card", reference: crypto.randomUUID() });
      expect(await repository.holdsOutstanding()).toEqual({ count: 0, amount: 0 });

      const first = hold(account.id, key.id);
      const second = hold(account.id, key.id);
      expect(await repository.reserve(first, () => 3_000)).toBe(3_000);
      expect(await repository.reserve(second, () => 5_000)).toBe(5_000);
      expect(await repository.holdsOutstanding()).toEqual({ count: 2, amount: 8_000 });
      // An extension of a hold is the same hold, larger.
      expect(await repository.reserve({ ...second, extension: true }, () => 1_000)).toBe(1_000);
      expect(await repository.holdsOutstanding()).toEqual({ count: 2, amount: 9_000 });

      // Settled: its debit is queued (not yet written) and replaces its hold at once.
      repository.recordGeneration(makeGeneration(account.id, key.id, { id: first.id, inputCost: 1_000, outputCost: 1_500 }));
      expect(await repository.holdsOutstanding()).toEqual({ count: 1, amount: 6_000 });
      await repository.flush();
      expect(await repository.holdsOutstanding()).toEqual({ count: 1, amount: 6_000 });

      await repository.releaseReservation(second.id);
      expect(await repository.holdsOutstanding()).toEqual({ count: 0, amount: 0 });
    });

    it("tells commit observers of each write that settled rows, until they are removed", async () => {
      const repository = await open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const commits: { seconds: number; rows: number }[] = [];
      const remove = repository.onCommit((seconds, rows) => commits.push({ seconds, rows }));
      await repository.flush(); // nothing queued: no write, no report
      expect(commits).toEqual([]);

      for (let i = 0; i < 3; i++) repository.recordGeneration(makeGeneration(account.id, key.id));
      await repository.flush();
      expect(commits.reduce((sum, commit) => sum + commit.rows, 0)).toBe(3);
      for (const commit of commits) {
        expect(commit.seconds).toBeGreaterThanOrEqual(0);
        expect(commit.seconds).toBeLessThan(60);
      }

      const seen = commits.length;
      remove();
      repository.recordGeneration(makeGeneration(account.id, key.id));
      await repository.flush();
      expect(commits).toHaveLength(seen);
    });

    it("keeps writing when an observer throws", async () => {
      const repository = await open({ flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      repository.onCommit(() => {
        throw new Error("observer fault");
      });
      const generation = makeGeneration(account.id, key.id);
      repository.recordGeneration(generation);
      await repository.flush();
      expect(await repository.findGeneration(account.id, generation.id)).not.toBeNull();
    });
  });
}
