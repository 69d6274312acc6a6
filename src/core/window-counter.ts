/** Counts hits per key in fixed one-second windows; `hit` says whether the key is still within the limit. */
export function createSecondWindowCounter(limit: number, now: () => number = Date.now) {
  let window = 0;
  let counts = new Map<string, number>();
  return function hit(key: string): boolean {
    const second = Math.floor(now() / 1000);
    if (second !== window) {
      window = second;
      counts = new Map();
    }
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    return count <= limit;
  };
}
