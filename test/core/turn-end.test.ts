import { describe, expect, it, spyOn } from "bun:test";
import { afterTurn, atTurnEnd, requestEnded, requestStarted } from "../../src/core/turn-end.ts";

/** Runs `body` with `count` requests counted in flight, as the pipeline counts them. */
async function withRequestsInFlight(count: number, body: () => Promise<void>): Promise<void> {
  for (let i = 0; i < count; i++) requestStarted();
  try {
    await body();
  } finally {
    for (let i = 0; i < count; i++) requestEnded();
  }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("core/turn-end", () => {
  it("runs the tasks of a turn together after its callbacks, in order, and queues what they add for the next turn", () =>
    withRequestsInFlight(2, async () => {
      const seen: string[] = [];
      atTurnEnd(() => {
        seen.push("a");
        atTurnEnd(() => seen.push("added by a"));
      });
      atTurnEnd(() => seen.push("b"));
      seen.push("same turn");
      await Promise.resolve();
      seen.push("microtask");
      expect(seen).toEqual(["same turn", "microtask"]);
      await nextTurn();
      expect(seen.slice(2)).toEqual(["a", "b"]);
      await nextTurn();
      expect(seen.slice(4)).toEqual(["added by a"]);
    }));

  it("still runs the other tasks when one throws", () =>
    withRequestsInFlight(2, async () => {
      const reported = spyOn(console, "error").mockImplementation(() => {});
      try {
        const ran: number[] = [];
        atTurnEnd(() => ran.push(1));
        atTurnEnd(() => {
          throw new Error("task failed");
        });
        atTurnEnd(() => ran.push(3));
        expect(await afterTurn("value")).toBe("value");
        expect(ran).toEqual([1, 3]);
        expect(reported).toHaveBeenCalledTimes(1);
        expect(String(reported.mock.calls[0]![1])).toContain("task failed");
      } finally {
        reported.mockRestore();
      }
    }));

  it("runs a task at once while at most one request is in flight: alone, there is nothing to do it with", () =>
    withRequestsInFlight(1, async () => {
      const seen: string[] = [];
      atTurnEnd(() => seen.push("a"));
      seen.push("same turn");
      expect(seen).toEqual(["a", "same turn"]);
      const turnLater = nextTurn().then(() => "a turn later");
      expect(await Promise.race([afterTurn("at once"), turnLater])).toBe("at once");
      const reported = spyOn(console, "error").mockImplementation(() => {});
      try {
        atTurnEnd(() => {
          throw new Error("task failed");
        });
        expect(reported).toHaveBeenCalledTimes(1);
      } finally {
        reported.mockRestore();
      }
    }));

  it("keeps the order: a task queued at a busier moment runs before a later one, even once the request is alone", () =>
    withRequestsInFlight(1, async () => {
      const seen: string[] = [];
      await withRequestsInFlight(1, async () => atTurnEnd(() => seen.push("queued")));
      atTurnEnd(() => seen.push("later"));
      expect(seen).toEqual([]);
      await nextTurn();
      expect(seen).toEqual(["queued", "later"]);
    }));
});
