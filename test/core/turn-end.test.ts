import { describe, expect, it, spyOn } from "bun:test";
import { afterTurn, atTurnEnd } from "../../src/core/turn-end.ts";

describe("core/turn-end", () => {
  it("runs the tasks of a turn together after its callbacks, in order, and queues what they add for the next turn", async () => {
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
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen.slice(2)).toEqual(["a", "b"]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen.slice(4)).toEqual(["added by a"]);
  });

  it("still runs the other tasks when one throws", async () => {
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
  });
});
