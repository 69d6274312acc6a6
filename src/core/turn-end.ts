/**
 * Work held to the end of this turn of the event loop and done together: the requests that came in, the upstream
 * requests and the client answers they produce, the upstream answers that came in, the log lines. The kernel's socket work and the gateway's own
 * JavaScript then run in runs of their own instead of alternating request by request, which on this 2-core VM
 * cost the event loop measurably more CPU per request (bench/compare.ts, c=64: writing the upstream requests
 * together -16%, the answers -11%, handling the requests together -6 to -9%, the upstream answers -4%; see the README's Performance
 * section). The wait is one turn: no change at c=1.
 */
const tasks: (() => void)[] = [];

function runTasks(): void {
  // What these tasks queue goes to the next turn.
  const due = tasks.splice(0);
  for (const task of due) {
    try {
      task();
    } catch (error) {
      // A bug: the other tasks still run (an upstream request left unwritten would hang its call).
      console.error("a task at the end of the event loop's turn failed:", error);
    }
  }
}

/** Runs `task` once the callbacks of this turn of the event loop have run (setImmediate), with the others queued in it. */
export function atTurnEnd(task: () => void): void {
  if (tasks.push(task) === 1) setImmediate(runTasks);
}

/** Resolves to `value` at the end of this turn (see `atTurnEnd`). */
export function afterTurn<T>(value: T): Promise<T> {
  return new Promise((resolve) => atTurnEnd(() => resolve(value)));
}
