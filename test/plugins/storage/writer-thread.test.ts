import { afterAll, describe, expect, it } from "bun:test";
import { openSqlite } from "../../../src/plugins/storage/sqlite/open.ts";
import { createSqliteRepository } from "../../../src/plugins/storage/sqlite/repository.ts";
import { startWriterThread, WriterThreadLost } from "../../../src/plugins/storage/sqlite/writer-thread.ts";
import { accountWithKey, captureLog, makeGeneration, rawGet, removeTempDirs, tempDbPath } from "./helpers.ts";

afterAll(() => removeTempDirs());

const COST = 3_000; // makeGeneration's total cost

/** A file with an account and a key, closed again: what a writer thread can meter against. */
async function fileWithAccount() {
  const path = tempDbPath();
  const setup = createSqliteRepository(path, { log: captureLog() });
  const { account, key } = await accountWithKey(setup);
  await setup.close();
  return { path, accountId: account.id, keyId: key.id };
}

const storedGenerations = (path: string) => rawGet<{ n: number }>(path, "select count(*) as n from generations").n;

describe("metering writer thread", () => {
  for (const holds of ["process", "shared"] as const) {
    it(`a read never counts a batch twice nor misses it while the thread commits (${holds} holds)`, async () => {
      const path = tempDbPath();
      const repository = createSqliteRepository(path, { log: captureLog(), holds, flushIntervalMs: 1 });
      const { account, key } = await accountWithKey(repository);
      let recorded = 0;
      const wrong: number[] = [];
      let polling = true;
      // Every turn of the event loop: the thread's COMMIT may land between any two of them.
      const poll = async () => {
        while (polling) {
          const expected = recorded * COST; // taken with the read: accountTotals reads synchronously
          const debits = (await repository.accountTotals(account.id)).debits;
          if (debits !== expected) wrong.push(debits - expected);
          await new Promise((resolve) => setImmediate(resolve));
        }
      };
      const poller = poll();
      for (let round = 0; round < 150; round++) {
        for (let i = 0; i < 3; i++) {
          repository.recordGeneration(makeGeneration(account.id, key.id));
          recorded += 1;
        }
        await Bun.sleep(1);
      }
      await repository.flush();
      polling = false;
      await poller;
      expect(wrong).toEqual([]);
      expect(storedGenerations(path)).toBe(recorded);
      expect(rawGet<{ d: number }>(path, "select total_debits_nano as d from accounts where id = ?", account.id).d).toBe(recorded * COST);
      await repository.close();
    });
  }

  it("commits on its own connection, and settles only once committed", async () => {
    const { path, accountId, keyId } = await fileWithAccount();
    const thread = startWriterThread(path, { busyTimeoutMs: 1000, holdsInTable: false, log: captureLog() });
    let settledWith = -1;
    await thread.write([makeGeneration(accountId, keyId), makeGeneration(accountId, keyId)], () => {
      settledWith = storedGenerations(path); // what the file holds at the moment the batch settles
    });
    expect(settledWith).toBe(2);
    await thread.stop();
    expect(thread.running).toBe(false);
  });

  it("a batch the store refuses is rejected with its SQLite code, nothing written", async () => {
    const { path, accountId, keyId } = await fileWithAccount();
    const thread = startWriterThread(path, { busyTimeoutMs: 1000, holdsInTable: false, log: captureLog() });
    const bad = makeGeneration(accountId, keyId, { status: null as never }); // status is not null
    let settled = false;
    const failure = await thread.write([makeGeneration(accountId, keyId), bad], () => (settled = true)).catch((error) => error);
    expect((failure as { code?: string }).code).toStartWith("SQLITE_CONSTRAINT");
    expect(settled).toBe(false);
    expect(storedGenerations(path)).toBe(0);
    await thread.stop();
  });

  it("gives the write lock back when the event loop waits for it, then commits the batch", async () => {
    const { path, accountId, keyId } = await fileWithAccount();
    const { client } = openSqlite(path, { busyTimeoutMs: 1000 });
    const thread = startWriterThread(path, { busyTimeoutMs: 1000, holdsInTable: false, log: captureLog() });
    await thread.write([makeGeneration(accountId, keyId)], () => {}); // started
    const written = thread.write([makeGeneration(accountId, keyId)], () => {});
    Bun.sleepSync(5); // the thread prepares the batch: it holds the write lock and waits for "go"
    const started = performance.now();
    client.transaction(() => client.prepare("insert into settings (name, value) values ('x', 'y')").run()).immediate();
    const waitedMs = performance.now() - started;
    await written;
    expect(waitedMs).toBeLessThan(500); // not the 1 s busy timeout: the thread rolled back
    expect(storedGenerations(path)).toBe(2);
    await thread.stop();
    client.close();
  });

  it("a thread that cannot open the file fails the write as lost (retried, never set aside), with a warning", async () => {
    const log = captureLog();
    const thread = startWriterThread(`${tempDbPath()}-missing/none/gateway.db`, { busyTimeoutMs: 1000, holdsInTable: false, log });
    const failure = await thread.write([makeGeneration("acct", "key")], () => {}).catch((error) => error);
    expect(failure).toBeInstanceOf(WriterThreadLost);
    expect(thread.running).toBe(false);
    expect(log.lines.some((line) => line.level === "warn" && line.message.includes("writer thread"))).toBe(true);
  });
});
