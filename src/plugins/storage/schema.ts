import { Type, type Static } from "@sinclair/typebox";

export const DEFAULT_DATABASE_URL = "sqlite:./data/gateway.db";
export const DEFAULT_FLUSH_INTERVAL_MS = 30;
export const DEFAULT_MAX_BATCH = 512;
/** Connections of the Postgres store's pool (SQLite has one connection). */
export const DEFAULT_POOL_SIZE = 20;

/** The `storage` block of plugins-config.yaml. */
export const storageConfigSchema = Type.Object(
  {
    /** `sqlite:PATH` or a bare path (relative to the working directory); `postgres://…` for several instances. */
    database_url: Type.Optional(Type.String({ minLength: 1, default: DEFAULT_DATABASE_URL })),
    /** Group-commit period of metered generations. */
    flush_interval_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 60_000, default: DEFAULT_FLUSH_INTERVAL_MS })),
    /** A queue this long is flushed at once, without waiting for the period. */
    max_batch: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, default: DEFAULT_MAX_BATCH })),
    /**
     * SQLite only: where budget holds of requests in flight live. `process` (default): in this process's
     * memory, no write per request; the file is locked against any other gateway process. `shared`: rows of
     * the file, for several processes on one file. `primary`: the workers of one gateway (GATEWAY_WORKERS, which
     * sets it): in their primary's memory (sqlite/primary-holds.ts).
     */
    sqlite_holds: Type.Optional(Type.Union([Type.Literal("process"), Type.Literal("shared"), Type.Literal("primary")], { default: "process" })),
    /**
     * SQLite with `process` or `primary` holds (not `shared`): the group commit's transactions on a thread of their
     * own, so that the event loop never runs one (sqlite/metering-thread.ts). Off by default: on two cores it measured
     * no gain (docs/performance.md, "The c=1 tail").
     */
    sqlite_metering_thread: Type.Optional(Type.Boolean({ default: false })),
    /** Postgres only: connections in the pool, per gateway process (mind the server's max_connections). */
    pool_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000, default: DEFAULT_POOL_SIZE })),
  },
  { additionalProperties: false },
);

export type StorageConfig = Static<typeof storageConfigSchema>;
