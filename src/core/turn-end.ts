/**
 * Work held to the end of this turn of the event loop and done together: the upstream requests, the client
 * answers and the log lines that one turn produced. On this 2-core VM, writing each request and each answer to
 * its socket as soon as it was ready cost the event loop 10-16% more CPU per request than writing them back to
 * back once the turn's callbacks have run (bench/compare.ts; see the README's Performance section). The wait is
 * one turn: no change at c=1.
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
