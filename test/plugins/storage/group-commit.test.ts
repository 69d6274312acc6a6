import { describe, expect, it } from "bun:test";
import type { Generation } from "../../../src/plugins/storage/repository.ts";
import { createGroupCommit } from "../../../src/plugins/storage/sqlite/group-commit.ts";
import { PendingGenerations } from "../../../src/plugins/storage/sqlite/pending.ts";
import { captureLog, makeGeneration } from "./helpers.ts";

const FLUSH_INTERVAL_MS = 5;

/**
 * Rows recorded every millisecond for `forMs` into a group commit whose transaction takes `commitMs`
 * (a blocking sleep stands in for SQLite's synchronous commit); the start times of the commits, and
 * every row committed once stopped.
 */
async function commitsUnderSteadyLoad(commitMs: number, forMs: number) {
  const pending = new PendingGenerations();
  const committed: Generation[] = [];
  const commitStarts: number[] = [];
  const commits = createGroupCommit({
    pending,
    write(batch) {
      commitStarts.push(performance.now());
      if (commitMs > 0) Bun.sleepSync(commitMs);
      committed.push(...batch);
    },
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
  it("commits every flush interval while commits are quick", async () => {
    const run = await commitsUnderSteadyLoad(0, 300);
    expect(run.committed).toBe(run.recorded);
    expect(run.medianGapMs).toBeLessThan(FLUSH_INTERVAL_MS * 3);
  });

  it("waits longer between slow commits, up to six intervals, so commits share their fixed cost among more rows", async () => {
    // A 3 ms commit: the wait grows to 20 × 3 ms, capped at 6 × 5 ms = 30 ms.
    const run = await commitsUnderSteadyLoad(3, 400);
    expect(run.committed).toBe(run.recorded);
    expect(run.medianGapMs).toBeGreaterThanOrEqual(FLUSH_INTERVAL_MS * 6);
    expect(run.medianGapMs).toBeLessThan(FLUSH_INTERVAL_MS * 6 + 25);
  });
});
