import { afterAll, describe, expect, it } from "bun:test";
import { existsSync } from "node:fs";
import type { PluginHost } from "../../../src/core/plugin.ts";
import storage from "../../../src/plugins/storage/index.ts";
import { parseDatabaseUrl } from "../../../src/plugins/storage/database-url.ts";
import type { Repository } from "../../../src/plugins/storage/repository.ts";
import { captureLog, removeTempDirs, tempDbPath } from "./helpers.ts";

function host(): PluginHost {
  return {
    configFile: "plugins-config.yaml",
    env: {},
    now: Date.now,
    log: captureLog(),
    service() {
      throw new Error("no services in this test");
    },
    has: () => false,
    secret() {},
    workers: null,
  };
}

afterAll(removeTempDirs);

describe("storage plugin", () => {
  it("parses sqlite URLs, bare paths and postgres URLs", () => {
    expect(parseDatabaseUrl("sqlite:./data/gateway.db")).toEqual({ dialect: "sqlite", path: "./data/gateway.db" });
    expect(parseDatabaseUrl("sqlite:///var/lib/gw.db")).toEqual({ dialect: "sqlite", path: "/var/lib/gw.db" });
    expect(parseDatabaseUrl("/var/lib/gw.db")).toEqual({ dialect: "sqlite", path: "/var/lib/gw.db" });
    expect(parseDatabaseUrl("sqlite::memory:")).toEqual({ dialect: "sqlite", path: ":memory:" });
    expect(parseDatabaseUrl("postgres://u:p@db:5432/gw")).toEqual({ dialect: "postgres", url: "postgres://u:p@db:5432/gw" });
    expect(() => parseDatabaseUrl("sqlite:")).toThrow();
    expect(() => parseDatabaseUrl("mysql://db/gw")).toThrow("unsupported scheme");
  });

  it("opens and migrates the SQLite file, provides the repository, is ready, and closes", async () => {
    const path = tempDbPath();
    const instance = await storage.setup({ database_url: `sqlite:${path}`, flush_interval_ms: 5, max_batch: 512 }, host());
    expect(existsSync(path)).toBe(true);
    const repository = instance.provides as Repository;
    const account = await repository.createAccount("Acme");
    expect(await repository.getAccount(account.id)).toEqual(account);
    expect(await instance.ready!()).toBe(true);
    await instance.close!();
    expect(await instance.ready!()).toBe(false);
  });

  it("refuses holds in the workers' primary in a gateway of one process, naming the modes it may use", async () => {
    expect(() => storage.setup({ database_url: `sqlite:${tempDbPath()}`, sqlite_holds: "primary" }, host())).toThrow('one process uses "process" or "shared"');
  });

  it("keeps the workers' holds in the primary on SQLite (locking the file against any other gateway), not on Postgres or with SQLITE_HOLDS=shared", async () => {
    const path = tempDbPath();
    const served: string[] = [];
    const primaryHost = (env: Record<string, string>) => ({
      env,
      log: captureLog(),
      now: Date.now,
      workers: 2,
      serve: (topic: string) => void served.push(topic),
      askAll: async () => [],
      onWorkerExit() {},
    });
    const part = await storage.primary!({ database_url: `sqlite:${path}` }, primaryHost({}));
    expect(served).toContain("storage.hold");
    // A gateway outside this primary cannot open the file.
    expect(() => storage.setup({ database_url: `sqlite:${path}`, sqlite_holds: "shared" }, host())).toThrow("is in use by");
    await part.close?.();
    served.length = 0;
    await storage.primary!({ database_url: `sqlite:${tempDbPath()}` }, primaryHost({ SQLITE_HOLDS: "shared" }));
    await storage.primary!({ database_url: "postgres://u:p@127.0.0.1:1/gw" }, primaryHost({}));
    expect(served).toEqual([]);
  });

  it("opens Postgres for a postgres:// URL; an unreachable server rejects setup", async () => {
    await expect(Promise.resolve().then(() => storage.setup({ database_url: "postgres://127.0.0.1:1/gw" }, host()))).rejects.toThrow();
  });
});
