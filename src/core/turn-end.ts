/**
 * Work held to the end of this turn of the event loop and done together: the requests that came in, the
 * upstream requests and the client answers they produce, the upstream answers (and their heads) that came in.
 * The kernel's socket work and the gateway's own JavaScript then run in runs of their own instead
 * of alternating request by request, which cost the event loop measurably more CPU per request under load
 * (each step's figure: docs/performance.md). The wait is one turn, and only while other requests are in
 * flight: a request alone has nothing to be done with, and its tasks run at once, which kept its latency.
 */
const tasks: (() => void)[] = [];
/** Requests in flight in this process, every pipeline's (`requestStarted` / `requestEnded`). */
let requestsInFlight = 0;

/** A request is in flight: with others, its tasks wait for the turn's end. */
export function requestStarted(): void {
  requestsInFlight++;
}

export function requestEnded(): void {
  requestsInFlight--;
}

function runTasks(): void {
  // What these tasks queue goes to the next turn.
  const due = tasks.splice(0);
  for (const task of due) run(task);
}

function run(task: () => void): void {
  try {
    task();
  } catch (error) {
    // A bug: the other tasks still run (an upstream request left unwritten would hang its call).
    console.error("a task at the end of the event loop's turn failed:", error);
  }
}

/**
 * Runs `task` once the callbacks of this turn of the event loop have run (setImmediate), with the others queued
 * in it; at once when at most one request is in flight and nothing is queued.
 */
export function atTurnEnd(task: () => void): void {
  if (requestsInFlight <= 1 && tasks.length === 0) return run(task);
  if (tasks.push(task) === 1) setImmediate(runTasks);
}

/** Resolves to `value` at the end of this turn, or at once (see `atTurnEnd`). */
export function afterTurn<T>(value: T): Promise<T> {
  return new Promise((resolve) => atTurnEnd(() => resolve(value)));
}
