/**
 * Gives the memory of a burst back once the gateway goes quiet. JSC collects when its heap grows, not
 * when traffic stops, so after a burst the process keeps tens of MB of dead objects and free pages
 * (docs/performance.md). When requests came in
 * during one period and none in the next, a full collection runs once (a few ms, with nothing new
 * being served); a steady stream of requests never pays it.
 */
export function startIdleMemoryRelease(requestsSeen: () => number, quietMs: number, release: () => void = fullCollection): { stop(): void } {
  if (quietMs <= 0) return { stop() {} };
  let seenAtLastCheck = requestsSeen();
  let busySinceRelease = false;
  const timer = setInterval(() => {
    const seen = requestsSeen();
    if (seen !== seenAtLastCheck) {
      seenAtLastCheck = seen;
      busySinceRelease = true;
      return;
    }
    if (!busySinceRelease) return;
    busySinceRelease = false;
    release();
  }, quietMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** A full collection only: `Bun.shrink()` as well gave back a little more but left the next requests cold (a slower p99). */
function fullCollection(): void {
  Bun.gc(true);
}
