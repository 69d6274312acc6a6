import { Database } from "bun:sqlite";
import { UnavailableError } from "../../../core/errors.ts";
import type { HoldsMode } from "./reservations.ts";

/**
 * Who may serve from a SQLite file, enforced with the file locks of a small sidecar database
 * (`<file>.lock`), held for the life of the process and dropped by the OS if it dies:
 * - a `process`-mode gateway keeps its budget holds in memory, so it must be alone: it takes the
 *   sidecar's EXCLUSIVE lock;
 * - `shared`-mode gateways (holds in the table) may be many: each keeps a SHARED lock.
 * Either fails at once, naming the other side, when the other kind holds the file.
 */
export function lockForHolds(databasePath: string, mode: HoldsMode): { release(): void } {
  const lockPath = databasePath + ".lock";
  const lock = new Database(lockPath, { create: true });
  try {
    lock.exec("PRAGMA busy_timeout = 0");
    lock.exec("PRAGMA locking_mode = EXCLUSIVE"); // locks taken below are kept until the connection closes
    if (mode === "process") {
      lock.exec("BEGIN EXCLUSIVE");
      lock.exec("COMMIT");
    } else {
      lock.query("select count(*) from sqlite_master").get();
    }
  } catch (error) {
    lock.close();
    const other = mode === "process" ? "another gateway process" : "a gateway process in `process` holds mode";
    throw new UnavailableError(
      `${databasePath} is in use by ${other}: a process-mode gateway (storage.sqlite_holds: process, the default) must be the only process on its SQLite file; ` +
        `run every process with sqlite_holds: shared, or use Postgres for several instances`,
      { cause: error },
    );
  }
  return { release: () => lock.close() };
}
