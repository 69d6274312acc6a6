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
    const repository = createSqliteRepository(target.path, { ...options, holds });
    host.log.info("storage open", { dialect: "sqlite", path: target.path, holds });
    return instance(repository);
  },
});
