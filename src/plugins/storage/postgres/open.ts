import { SQL } from "bun";
import { fileURLToPath } from "node:url";
import { drizzle, type BunSQLDatabase } from "drizzle-orm/bun-sql";
import { migrate } from "drizzle-orm/bun-sql/migrator";
import { DEFAULT_POOL_SIZE } from "../schema.ts";
import * as postgresSchema from "./schema.ts";

export type PostgresDb = BunSQLDatabase<typeof postgresSchema>;

export interface OpenPostgresOptions {
  /** Connections in the pool (default 20, `storage.config.pool_size`). */
  poolSize?: number;
  /** Seconds to wait for a new connection before the query fails (default 5). */
  connectTimeoutSeconds?: number;
  /** Generated migrations; defaults to the repository's `drizzle/postgres`. */
  migrationsFolder?: string;
}

export const DEFAULT_MIGRATIONS_FOLDER = fileURLToPath(new URL("../../../../drizzle/postgres", import.meta.url));

/**
 * Advisory lock key held while migrating: instances starting together on one database migrate one at a
 * time, and the later ones find everything applied. (An arbitrary constant: "gw-storage" in ASCII.)
 */
const MIGRATION_LOCK_KEY = 0x67772d73746f72n;

/** Opens the connection pool and applies the migrations under an advisory lock. */
export async function openPostgres(url: string, options: OpenPostgresOptions = {}): Promise<{ client: SQL; db: PostgresDb }> {
  const client = new SQL({
    url,
    max: Math.max(1, options.poolSize ?? DEFAULT_POOL_SIZE),
    connectionTimeout: Math.max(1, options.connectTimeoutSeconds ?? 5),
    // Idle connections are dropped, so a pool that outlived a server restart reconnects lazily.
    idleTimeout: 60,
    connection: { application_name: "ai-gateway" },
  });
  try {
    await migrateLocked(client, options.migrationsFolder ?? DEFAULT_MIGRATIONS_FOLDER);
    return { client, db: drizzle({ client, schema: postgresSchema }) };
  } catch (error) {
    await client.close().catch(() => {});
    throw error;
  }
}

/**
 * Runs drizzle's migrator on one reserved connection that holds a session advisory lock: concurrent
 * starts queue on the lock instead of racing on CREATE SCHEMA / CREATE TABLE. If this process dies
 * mid-way, Postgres drops the lock with the connection and rolls the migration back.
 */
async function migrateLocked(client: SQL, migrationsFolder: string): Promise<void> {
  const connection = await client.reserve();
  try {
    await connection.unsafe("select pg_advisory_lock($1::bigint)", [MIGRATION_LOCK_KEY.toString()]);
    try {
      await migrate(drizzle({ client: connection }), { migrationsFolder });
    } finally {
      // A failed unlock means a broken connection, and Postgres dropped the lock with it.
      await connection.unsafe("select pg_advisory_unlock($1::bigint)", [MIGRATION_LOCK_KEY.toString()]).catch(() => {});
    }
  } finally {
    await connection.release();
  }
}
