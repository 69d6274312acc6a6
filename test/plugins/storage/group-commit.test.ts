import { describe, expect, it } from "bun:test";
import type { Generation } from "../../../src/plugins/storage/repository.ts";
import { createGroupCommit } from "../../../src/plugins/storage/shared/group-commit.ts";
import { PendingGenerations } from "../../../src/plugins/storage/shared/pending.ts";
import { captureLog, makeGeneration } from "./helpers.ts";

const FLUSH_INTERVAL_MS = 5;

/** Rows recorded every millisecond for `forMs` into a group commit: the start times of the commits, and every row committed once stopped. */
async function commitsUnderSteadyLoad(forMs: number, writeMs: number | null = null) {
  const pending = new PendingGenerations();
  const committed: Generation[] = [];
  const commitStarts: number[] = [];
  const commits = createGroupCommit({
    pending,
    write(batch) {
      commitStarts.push(performance.now());
      if (writeMs === null) {
        committed.push(...batch);
        return;
      }
      // An asynchronous writer (Postgres, the SQLite metering thread): done a little later.
      return Bun.sleep(writeMs).then(() => void committed.push(...batch));
    },
    isPermanent: () => false,
    flushIntervalMs: FLUSH_INTERVAL_MS,
    maxBatch: 10_000,
    log: captureLog(),
  });
  let recorded = 0;
  const feeder = setInterval(() => {
    commits.record(makeGeneration("acct", "key"));
    recorded++;
  }, 1);
  await Bun.sleep(forMs);
  clearInterval(feeder);
  await commits.stop();
  const gaps = commitStarts.slice(1).map((start, i) => start - commitStarts[i]!);
  gaps.sort((a, b) => a - b);
  return { recorded, committed: committed.length, commits: commitStarts.length, medianGapMs: gaps[Math.floor(gaps.length / 2)]! };
}

describe("sqlite group commit", () => {
  it("commits every flush interval, every row once", async () => {
    const run = await commitsUnderSteadyLoad(300);
    expect(run.committed).toBe(run.recorded);
    expect(run.medianGapMs).toBeLessThan(FLUSH_INTERVAL_MS * 3);
  });

  it("paces an asynchronous writer like the timer: one write an interval, not one after the other, every row once", async () => {
    const run = await commitsUnderSteadyLoad(300, 1);
    expect(run.committed).toBe(run.recorded);
    expect(run.medianGapMs).toBeGreaterThanOrEqual(FLUSH_INTERVAL_MS);
    expect(run.medianGapMs).toBeLessThan(FLUSH_INTERVAL_MS * 3);
  });
});

/**
 * `rows` queued at once into a group commit with a synchronous writer and a light-load rule: each transaction's size, the
 * rows still queued when it began, and the event loop's turn it ran in (a counter an immediate bumps every turn).
 */
async function transactionsAt(light: boolean, rows: number, flushAtOnce = false) {
  const pending = new PendingGenerations();
  const transactions: { rows: number; queued: number; turn: number }[] = [];
  let turn = 0;
  let counting = true;
  const countTurns = () => {
    turn++;
    if (counting) setImmediate(countTurns);
  };
  setImmediate(countTurns);
  const commits = createGroupCommit({
    pending,
    write(batch) {
      transactions.push({ rows: batch.length, queued: pending.size, turn });
    },
    isPermanent: () => false,
    flushIntervalMs: FLUSH_INTERVAL_MS,
    maxBatch: 512,
    lightLoad: { rows: 16, applies: () => light },
    log: captureLog(),
  });
  for (let i = 0; i < rows; i++) commits.record(makeGeneration("acct", "key"));
  if (flushAtOnce) commits.flush();
  for (let waited = 0; pending.size > 0 && waited < 500; waited++) await Bun.sleep(1);
  counting = false;
  await commits.stop();
  return transactions;
}

describe("sqlite group commit at light load", () => {
  it("commits an interval's rows in transactions of at most `rows`, one a turn, while the gateway is lightly loaded", async () => {
    const transactions = await transactionsAt(true, 40);
    expect(transactions.map((t) => t.rows)).toEqual([16, 16, 8]);
    // Each began with the rows before it settled and the rest still queued (reads count those), in a turn of its own.
    expect(transactions.map((t) => t.queued)).toEqual([40, 24, 8]);
    expect(new Set(transactions.map((t) => t.turn)).size).toBe(3);
  });

  it("commits them in one transaction under load, sharing its fixed cost", async () => {
    expect((await transactionsAt(false, 40)).map((t) => t.rows)).toEqual([40]);
  });

  it("writes everything at once when asked to flush, light load or not", async () => {
    expect((await transactionsAt(true, 40, true)).map((t) => t.rows)).toEqual([40]);
  });
});
