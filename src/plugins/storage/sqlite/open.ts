import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import { migrate } from "drizzle-orm/bun-sqlite/migrator";
import * as sqliteSchema from "./schema.ts";
import { WRITER_AUTOCHECKPOINT_PAGES } from "./checkpointer.ts";

export type SqliteDb = BunSQLiteDatabase<typeof sqliteSchema>;

export interface OpenSqliteOptions {
  /** How long a write waits for another process's lock before failing (the flush retries). */
  busyTimeoutMs?: number;
  /** Generated migrations; defaults to the repository's `drizzle/sqlite`. */
  migrationsFolder?: string;
}

export const DEFAULT_MIGRATIONS_FOLDER = fileURLToPath(new URL("../../../../drizzle/sqlite", import.meta.url));

/** `:memory:` and `file::memory:…` name a database that lives in this connection only. */
export function isInMemoryPath(path: string): boolean {
  return path === ":memory:" || path.startsWith("file::memory:");
}

/** Opens (creating file and parent directory if missing) a WAL-mode database and applies migrations. */
export function openSqlite(path: string, options: OpenSqliteOptions = {}): { client: Database; db: SqliteDb } {
  if (!isInMemoryPath(path)) mkdirSync(dirname(resolve(path)), { recursive: true });
  const client = new Database(path, { create: true });
  try {
    // busy_timeout first: a second process opening the same new file waits instead of failing.
    client.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 1000))}`);
    // WAL: readers never block the writer. synchronous=NORMAL: a commit survives a process crash
    // (kill -9); only an OS crash / power loss may lose the last few commits, never corrupt.
    client.exec("PRAGMA journal_mode = WAL");
    client.exec("PRAGMA synchronous = NORMAL");
    // 8 MB of page cache: metering appends at the right edge of time-ordered indexes, so its working set is
    // small (a larger cache measured no faster and stayed resident once the file was large: docs/performance.md).
    client.exec("PRAGMA cache_size = -8192");
    // Fewer, larger checkpoints: a group commit does not pay for one every few batches. A file-backed
    // repository moves them to a thread (checkpointer.ts) and turns this off while that thread runs.
    client.exec(`PRAGMA wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
    client.exec("PRAGMA foreign_keys = ON");
    const db = drizzle({ client, schema: sqliteSchema });
    migrateWithRetry(db, options.migrationsFolder ?? DEFAULT_MIGRATIONS_FOLDER);
    return { client, db };
  } catch (error) {
    client.close();
    throw error;
  }
}

/**
 * Instances starting together on one file race to migrate: the loser's transaction fails (locked, or a
 * table the winner just made); once the winner committed, a retry finds everything applied.
 */
function migrateWithRetry(db: SqliteDb, migrationsFolder: string): void {
  for (let attempt = 1; ; attempt++) {
    try {
      migrate(db, { migrationsFolder });
      return;
    } catch (error) {
      if (attempt >= 20) throw error;
      Bun.sleepSync(25 * attempt);
    }
  }
}
