import type { Database } from "bun:sqlite";
import type { Logger } from "../../../core/log.ts";
import type { CheckpointWorkerMessage } from "./checkpoint-worker.ts";

/** How long a stop waits for the thread's last checkpoint; the writer's close checkpoints what is left. */
const STOP_TIMEOUT_MS = 5_000;

/** WAL pages after which the writer checkpoints itself (open.ts), as long as no checkpointer thread runs. */
export const WRITER_AUTOCHECKPOINT_PAGES = 10_000;

export interface Checkpointer {
  /** Resolves once the thread checkpoints (true) or could not start (false: the writer checkpoints itself). */
  readonly started: Promise<boolean>;
  /** Stops the thread after a last checkpoint; the writer checkpoints itself again. */
  stop(): Promise<void>;
}

/**
 * Moves WAL checkpoints off the event loop. With SQLite's automatic checkpoint, the commit that pushes
 * the WAL past the threshold copies it into the file and syncs it, for a long while on a large WAL
 * (docs/performance.md), during which no request moves. A worker thread with its own connection checkpoints instead (PASSIVE:
 * it never waits for, nor blocks, the writer), and the writer's automatic checkpoint is turned off only
 * once that thread runs; if it fails or stops, the writer's automatic checkpoint is back.
 */
export function startCheckpointer(client: Database, path: string, options: { intervalMs: number; log: Logger }): Checkpointer {
  const worker = new Worker(new URL("./checkpoint-worker.ts", import.meta.url));
  let running = false;
  let onStopped: (() => void) | null = null;

  const writerCheckpoints = (on: boolean) => {
    try {
      client.exec(`PRAGMA wal_autocheckpoint = ${on ? WRITER_AUTOCHECKPOINT_PAGES : 0}`);
    } catch {
      // The connection is closed: nothing is written any more.
    }
  };

  const started = new Promise<boolean>((resolve) => {
    /** The thread is gone (could not start, gave up, or crashed): the writer checkpoints itself again. */
    const lost = (reason: string, error: unknown) => {
      options.log.warn(`WAL checkpointer thread ${reason}; the writer checkpoints itself`, { error: String(error) });
      if (running) writerCheckpoints(true);
      running = false;
      worker.terminate();
      resolve(false);
      onStopped?.();
    };
    worker.onmessage = (event: MessageEvent<CheckpointWorkerMessage>) => {
      const message = event.data;
      if (message.type === "ready") {
        running = true;
        writerCheckpoints(false);
        resolve(true);
      } else if (message.type === "failed") {
        lost(running ? "gave up after repeated failures" : "could not start", message.error);
      } else {
        onStopped?.();
      }
    };
    worker.onerror = (event) => lost("failed", event.message ?? event);
  });
  worker.unref();
  worker.postMessage({ type: "start", options: { path, intervalMs: options.intervalMs } });

  return {
    started,
    async stop() {
      // Referenced until it is done: an unreferenced worker does not keep the process alive, so a process
      // with nothing else left (a gateway stopping) would exit here, before the store closes its file.
      worker.ref();
      if (!(await started) || !running) {
        worker.terminate();
        return;
      }
      running = false;
      writerCheckpoints(true);
      await new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, STOP_TIMEOUT_MS);
        onStopped = () => {
          clearTimeout(giveUp);
          resolve();
        };
        worker.postMessage({ type: "stop" });
      });
      worker.terminate();
    },
  };
}
