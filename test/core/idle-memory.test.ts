import { describe, expect, it } from "bun:test";
import { startIdleMemoryRelease } from "../../src/core/idle-memory.ts";

describe("idle memory release", () => {
  it("releases once after a burst goes quiet, never while requests keep coming, again after the next burst", async () => {
    let requests = 0;
    let releases = 0;
    const idle = startIdleMemoryRelease(() => requests, 100, () => releases++);
    try {
      await Bun.sleep(250);
      expect(releases).toBe(0); // no traffic yet: nothing to give back

      const busyUntil = performance.now() + 400;
      while (performance.now() < busyUntil) {
        requests++;
        await Bun.sleep(5);
      }
      expect(releases).toBe(0); // a request every 5 ms: never quiet for 100 ms

      await Bun.sleep(350);
      expect(releases).toBe(1); // quiet: released once, not once per quiet period

      requests++;
      await Bun.sleep(350);
      expect(releases).toBe(2);
    } finally {
      idle.stop();
    }
  });

  it("is off with a period of 0", async () => {
    let calls = 0;
    let releases = 0;
    // Traffic once, then quiet: any running timer would release.
    startIdleMemoryRelease(() => (calls++ === 0 ? 0 : 1), 0, () => releases++);
    await Bun.sleep(50);
    expect(releases).toBe(0);
  });
});
