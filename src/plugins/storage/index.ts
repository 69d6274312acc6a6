import { definePlugin, type PluginInstance } from "../../core/plugin.ts";
import type { Repository } from "./repository.ts";
import { parseDatabaseUrl } from "./database-url.ts";
import {
  DEFAULT_DATABASE_URL,
  DEFAULT_FLUSH_INTERVAL_MS,
  DEFAULT_MAX_BATCH,
  storageConfigSchema,
  DEFAULT_POOL_SIZE,
} from "./schema.ts";
import { createSqliteRepository } from "./sqlite/repository.ts";
import { createPostgresRepository } from "./postgres/repository.ts";
import { servePrimaryHolds } from "./sqlite/primary-holds.ts";
import { workerHoldsMode } from "../../core/primary.ts";

/** The store every other plugin reaches through `host.service("storage")`: accounts, keys, ledger, metering. */
export default definePlugin({
  name: "storage",
  configSchema: storageConfigSchema,
  setup(config, host) {
    const target = parseDatabaseUrl(config.database_url ?? DEFAULT_DATABASE_URL);
    const options = {
      flushIntervalMs: config.flush_interval_ms ?? DEFAULT_FLUSH_INTERVAL_MS,
      maxBatch: config.max_batch ?? DEFAULT_MAX_BATCH,
      log: host.log,
    };
    function instance(repository: Repository): PluginInstance<Repository> {
      return {
        provides: repository,
        async ready() {
          try {
            await repository.ping();
            return true;
          } catch {
            return false;
          }
        },
        close: () => repository.close(),
      };
    }
    if (target.dialect === "postgres") {
      return createPostgresRepository(target.url, { ...options, poolSize: config.pool_size ?? DEFAULT_POOL_SIZE }).then((repository) => {
        host.log.info("storage open", { dialect: "postgres", host: URL.parse(target.url)?.host });
        return instance(repository);
      });
    }
    const holds = config.sqlite_holds ?? "process";
    if (holds === "primary" && host.workers === null) {
      throw new Error('storage.sqlite_holds "primary" is the mode of a gateway\'s workers (GATEWAY_WORKERS > 1), which set it; one process uses "process" or "shared"');
    }
    const meteringThread = config.sqlite_metering_thread === true && holds !== "shared";
    const repository = createSqliteRepository(target.path, { ...options, holds, primary: holds === "primary" ? host.workers! : undefined, meteringThread });
    host.log.info("storage open", { dialect: "sqlite", path: target.path, holds, ...(meteringThread ? { metering_thread: true } : {}) });
    return instance(repository);
  },
  /** With workers on SQLite: their budget holds, unless SQLITE_HOLDS says `shared` (sqlite/primary-holds.ts). */
  primary(config, host) {
    const target = parseDatabaseUrl(config.database_url ?? DEFAULT_DATABASE_URL);
    if (target.dialect !== "sqlite" || workerHoldsMode(host.env) !== "primary") return {};
    return servePrimaryHolds(target.path, host);
  },
});
