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
