import { definePlugin } from "../../core/plugin.ts";
import type { Repository } from "./repository.ts";
import { parseDatabaseUrl } from "./database-url.ts";
import {
  DEFAULT_DATABASE_URL,
  DEFAULT_FLUSH_INTERVAL_MS,
  DEFAULT_MAX_BATCH,
  storageConfigSchema,
} from "./schema.ts";
import { createSqliteRepository } from "./sqlite/repository.ts";

/** The store every other plugin reaches through `host.service("storage")`: accounts, keys, ledger, metering. */
export default definePlugin({
  name: "storage",
  configSchema: storageConfigSchema,
  setup(config, host) {
    const target = parseDatabaseUrl(config.database_url ?? DEFAULT_DATABASE_URL);
    if (target.dialect === "postgres") throw new Error("Postgres support arrives with the scale-out work");
    const repository: Repository = createSqliteRepository(target.path, {
      flushIntervalMs: config.flush_interval_ms ?? DEFAULT_FLUSH_INTERVAL_MS,
      maxBatch: config.max_batch ?? DEFAULT_MAX_BATCH,
      log: host.log,
    });
    host.log.info("storage open", { dialect: "sqlite", path: target.path });
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
  },
});
