import { afterAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { openSqlite } from "../../../src/plugins/storage/sqlite/open.ts";
import { startCheckpointer, WRITER_AUTOCHECKPOINT_PAGES } from "../../../src/plugins/storage/sqlite/checkpointer.ts";
import { createSqliteRepository } from "../../../src/plugins/storage/sqlite/repository.ts";
import { accountWithKey, captureLog, makeGeneration, rawGet, removeTempDirs, tempDbPath } from "./helpers.ts";

afterAll(() => removeTempDirs());

const autocheckpoint = (client: Database) => (client.query("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number }).wal_autocheckpoint;

/** One small transaction per call, as the group commit makes them: each appends frames to the WAL. */
function commitSettings(client: Database, count: number, from = 0): void {
  const insert = client.prepare("insert into settings (name, value) values (?, ?)");
  for (let i = from; i < from + count; i++) client.transaction(() => insert.run(`s${i}`, "x".repeat(2000)))();
}

/** Frames in the WAL now (a PASSIVE checkpoint of nothing new reports them without copying any). */
function walFrames(client: Database): number {
  return (client.query("PRAGMA wal_checkpoint(PASSIVE)").get() as { log: number }).log;
}

describe("WAL checkpointer thread", () => {
  it("checkpoints in its own thread while it runs: the writer's automatic checkpoint is off, and the WAL restarts instead of growing", async () => {
    const path = tempDbPath();
    const { client } = openSqlite(path);
    expect(autocheckpoint(client)).toBe(WRITER_AUTOCHECKPOINT_PAGES);
    const checkpointer = startCheckpointer(client, path, { intervalMs: 10, log: captureLog() });
    expect(await checkpointer.started).toBe(true);
    expect(autocheckpoint(client)).toBe(0);

    // Without a checkpoint the WAL would hold every frame of these 400 commits.
    for (let round = 0; round < 20; round++) {
      commitSettings(client, 20, round * 20);
      await Bun.sleep(15);
    }
    await Bun.sleep(50);
    commitSettings(client, 1, 10_000); // the first commit after a complete checkpoint restarts the WAL
    expect(walFrames(client)).toBeLessThan(100);

    await checkpointer.stop();
    expect(autocheckpoint(client)).toBe(WRITER_AUTOCHECKPOINT_PAGES);
    client.close();
    const reopened = new Database(path, { readonly: true });
    expect((reopened.query("select count(*) as n from settings").get() as { n: number }).n).toBe(401);
    reopened.close();
  });

  it("a checkpointer that cannot open the file leaves the writer checkpointing itself, with a warning", async () => {
    const path = tempDbPath();
    const { client } = openSqlite(path);
    const log = captureLog();
    const checkpointer = startCheckpointer(client, `${path}-missing-dir/none/gateway.db`, { intervalMs: 10, log });
    expect(await checkpointer.started).toBe(false);
    expect(autocheckpoint(client)).toBe(WRITER_AUTOCHECKPOINT_PAGES);
    expect(log.lines.some((line) => line.level === "warn" && line.message.includes("checkpointer"))).toBe(true);
    await checkpointer.stop();
    client.close();
  });

  it("a repository keeps its WAL short under a stream of group commits, and every generation is in the file after close", async () => {
    const path = tempDbPath();
    const repository = createSqliteRepository(path, { flushIntervalMs: 1, checkpointIntervalMs: 10, log: captureLog() });
    const { account, key } = await accountWithKey(repository);
    await repository.addCredit({ accountId: account.id, amount: 1_000_000_000_000, kind: "card", reference: "wal-credit" });
    for (let i = 0; i < 3000; i++) {
      repository.recordGeneration(makeGeneration(account.id, key.id, { inputCost: 400, outputCost: 600, totalCost: 1_000 }));
      if (i % 100 === 99) await Bun.sleep(5);
    }
    await repository.flush();
    await Bun.sleep(50);
    repository.recordGeneration(makeGeneration(account.id, key.id, { inputCost: 400, outputCost: 600, totalCost: 1_000 }));
    await repository.flush();
    // The writer alone would hold every frame of those commits (thousands, under its 10,000-page threshold).
    const observer = new Database(path);
    expect(walFrames(observer)).toBeLessThan(100);
    observer.close();
    await repository.close();
    expect(rawGet<{ n: number }>(path, "select count(*) as n from generations").n).toBe(3001);
    expect(rawGet<{ debits: number }>(path, "select total_debits_nano as debits from accounts where id = ?", account.id).debits).toBe(3001 * 1_000);
  });
});
