import { SQL } from "bun";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { UnavailableError } from "../../../src/core/errors.ts";
import type { PluginHost } from "../../../src/core/plugin.ts";
import storage from "../../../src/plugins/storage/index.ts";
import { createPostgresRepository, type PostgresRepositoryOptions } from "../../../src/plugins/storage/postgres/repository.ts";
import { DEFAULT_MIGRATIONS_FOLDER as PG_MIGRATIONS_FOLDER } from "../../../src/plugins/storage/postgres/open.ts";
import type { Repository } from "../../../src/plugins/storage/repository.ts";
import { accountWithKey, captureLog, makeGeneration } from "./helpers.ts";
import postgresJournal from "../../../drizzle/postgres/meta/_journal.json";
import { repositoryContract, type ContractStore } from "./repository-contract.ts";

/**
 * The Postgres store: the shared contract plus what is Postgres's own (migrations racing, a failing
 * commit kept and retried, connections dropped and re-made). Needs a server: set POSTGRES_TEST_URL
 * (or DATABASE_URL_POSTGRES) to a URL whose user may create databases; each store is a fresh
 * scratch database, dropped at the end.
 */
const ADMIN_URL =
  process.env.POSTGRES_TEST_URL ??
  process.env.DATABASE_URL_POSTGRES ??
  (/^postgres(ql)?:\/\//.test(process.env.DATABASE_URL ?? "") ? process.env.DATABASE_URL : undefined);

/** Scratch databases of this run: created on demand, dropped at the end. */
function scratchDatabases(adminUrl: string) {
  const admin = new SQL({ url: adminUrl, max: 2 });
  const made: { name: string; raw: SQL }[] = [];
  let shared: { url: string; raw: SQL } | null = null;
  let sequence = 0;

  function urlOf(name: string): string {
    const url = new URL(adminUrl);
    url.pathname = "/" + name;
    return url.toString();
  }

  async function create(): Promise<{ url: string; raw: SQL }> {
    const name = `gw_test_${process.pid}_${Date.now().toString(36)}_${++sequence}`;
    await admin.unsafe(`create database "${name}"`);
    const raw = new SQL({ url: urlOf(name), max: 2 });
    made.push({ name, raw });
    return { url: urlOf(name), raw };
  }

  return {
    /** A new, empty database (never migrated). */
    create,
    /**
     * The run's contract database, emptied: creating and dropping a database per test costs about
     * half a second each, truncating a few milliseconds. The first test finds it unmigrated.
     */
    async reset(): Promise<{ url: string; raw: SQL }> {
      if (shared === null) return (shared = await create());
      const tables: { name: string }[] = await shared.raw.unsafe("select tablename as name from pg_tables where schemaname = 'public'");
      if (tables.length > 0) await shared.raw.unsafe(`truncate table ${tables.map((t) => `"${t.name}"`).join(", ")}`);
      return shared;
    },
    async dropAll(): Promise<void> {
      for (const { name, raw } of made.splice(0)) {
        await raw.close().catch(() => {});
        await admin.unsafe(`drop database if exists "${name}" with (force)`);
      }
      await admin.close();
    },
  };
}

/** Raw SQL with `?` placeholders; int8 / numeric strings become numbers. */
async function rawAll<T>(raw: SQL, query: string, params: (string | number)[]): Promise<T[]> {
  let n = 0;
  const text = query.replace(/\?/g, () => `$${++n}`);
  const rows: Record<string, unknown>[] = await raw.unsafe(text, params);
  return rows.map((row) =>
    Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === "string" && /^-?\d+(\.0+)?$/.test(v) ? Number(v) : v])),
  ) as T[];
}

if (!ADMIN_URL) {
  describe.skip("storage/postgres repository (skipped because POSTGRES_TEST_URL is unset)", () => {
    it("needs POSTGRES_TEST_URL (or DATABASE_URL_POSTGRES), e.g. postgres://postgres@127.0.0.1:5432/test", () => {});
  });
} else {
  const databases = scratchDatabases(ADMIN_URL);
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await databases.dropAll();
  };

  repositoryContract({
    name: "postgres",
    async fresh(): Promise<ContractStore> {
      const { url, raw } = await databases.reset();
      return {
        open: (options) => createPostgresRepository(url, options),
        all: (query, ...params) => rawAll(raw, query, params),
      };
    },
    cleanup,
  });

  describe("storage/postgres repository", () => {
    const opened: Repository[] = [];
    afterEach(async () => {
      for (const repository of opened.splice(0).reverse()) await repository.close();
    });
    afterAll(cleanup, 60_000);

    async function open(url: string, options: PostgresRepositoryOptions = {}): Promise<Repository> {
      const repository = await createPostgresRepository(url, { log: captureLog(), ...options });
      opened.push(repository);
      return repository;
    }

    const count = async (raw: SQL, what: string, ...params: (string | number)[]) =>
      (await rawAll<{ n: number }>(raw, `select count(*) as n from ${what}`, params))[0].n;

    it("migrates once when several gateways start together on an empty database", async () => {
      const { url, raw } = await databases.create();
      const repositories = await Promise.all(Array.from({ length: 6 }, () => open(url, { poolSize: 2 })));
      expect(repositories).toHaveLength(6);
      // Every migration applied once, not once per gateway.
      expect(await count(raw, "drizzle.__drizzle_migrations")).toBe(postgresJournal.entries.length);
      const tables = await rawAll<{ name: string }>(raw, "select table_name as name from information_schema.tables where table_schema = 'public' order by 1", []);
      expect(tables.map((t) => t.name)).toEqual([
        "account_plans",
        "accounts",
        "api_keys",
        "dashboard_sessions",
        "gateway_instances",
        "generations",
        "ledger", // the view over ledger_entries and generations
        "ledger_entries",
        "payment_events",
        "reservations",
        "settings",
        "spend_buckets",
        "topups",
        "unmatched_transfers",
        "usage_daily",
        "users",
      ]);
      // Reopening applies nothing new.
      await open(url);
      // Every migration applied once, not once per gateway.
      expect(await count(raw, "drizzle.__drizzle_migrations")).toBe(postgresJournal.entries.length);
    });

    it("migration 0007 (payments) keeps every ledger row of an older database, and its new CHECKs take refund and dispute as negative", async () => {
      const { url, raw } = await databases.create();
      // The migrations before 0007, as a database written before payments has them.
      const before = mkdtempSync(join(tmpdir(), "pg-migrations-"));
      cpSync(PG_MIGRATIONS_FOLDER, before, { recursive: true });
      const journal = JSON.parse(readFileSync(join(before, "meta/_journal.json"), "utf8"));
      const at = journal.entries.findIndex((entry: { tag: string }) => entry.tag.startsWith("0007_"));
      expect(at).toBeGreaterThan(0);
      journal.entries = journal.entries.slice(0, at);
      writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(journal));
      await (await open(url, { migrationsFolder: before })).close();
      rmSync(before, { recursive: true, force: true });
      await raw.unsafe(`insert into accounts (id, name, created_at, total_credits_nano) values ('acct_1', 'a', 0, 7)`);
      await raw.unsafe(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, created_at) values ('le_1', 'acct_1', 'card', 9, 'pi_1', 1), ('le_2', 'acct_1', 'plan', -2, 'plan:p', 2)`);

      const repository = await open(url);
      expect(await count(raw, "drizzle.__drizzle_migrations")).toBe(postgresJournal.entries.length);
      expect(await rawAll(raw, "select id, kind, amount_nano from ledger_entries order by id", [])).toEqual([
        { id: "le_1", kind: "card", amount_nano: 9 },
        { id: "le_2", kind: "plan", amount_nano: -2 },
      ]);
      expect(await repository.getAccount("acct_1")).toMatchObject({ blockedReason: null });
      await raw.unsafe(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, created_at) values ('le_3', 'acct_1', 'refund', -1, 're_1', 3)`);
      expect(raw.unsafe(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, created_at) values ('le_4', 'acct_1', 'dispute', 1, 'dp_1', 3)`)).rejects.toThrow(
        "ledger_sign_check",
      );
    });

    it("keeps a batch whose commit fails (queued, visible, hold kept) and retries it until it lands", async () => {
      const { url, raw } = await databases.reset();
      const log = captureLog();
      const repository = await open(url, { flushIntervalMs: 2, log });
      const { account, key } = await accountWithKey(repository);
      await repository.addCredit({ accountId: account.id, amount: 1_000_000, kind: "card", reference: "c" });
      const generation = makeGeneration(account.id, key.id);
      await repository.reserve(
        { id: generation.id, accountId: account.id, keyId: key.id, keyLimited: false, instanceId: "gw_t", createdAt: Date.now() },
        () => 500_000,
      );
      // Every commit fails while the table is away (not a "never writable" error: retried, not dropped).
      await raw.unsafe("alter table usage_daily rename to usage_daily_away");
      repository.recordGeneration(generation);
      await expect(repository.flush()).rejects.toBeInstanceOf(UnavailableError);
      await Bun.sleep(30);
      expect(log.lines.some((line) => line.level === "error" && line.message.includes("flush failed"))).toBe(true);
      expect(await repository.findGeneration(account.id, generation.id)).toEqual(generation);
      expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
      expect(await count(raw, "generations")).toBe(0);
      expect(await count(raw, "reservations")).toBe(1); // all or nothing: the hold goes with the debit

      await raw.unsafe("alter table usage_daily_away rename to usage_daily");
      for (let i = 0; i < 400 && (await count(raw, "generations")) === 0; i++) await Bun.sleep(5);
      expect(await count(raw, "generations")).toBe(1);
      expect(await count(raw, "reservations")).toBe(0);
      expect((await repository.accountTotals(account.id)).debits).toBe(3_000);
      await repository.flush();
      expect(log.lines.some((line) => line.message.includes("resumed"))).toBe(true);
    });

    it("surfaces a lost server as UnavailableError and reconnects by itself when it is back", async () => {
      const { url } = await databases.reset();
      const upstream = new URL(url);
      const proxy = tcpProxy(upstream.hostname, Number(upstream.port || 5432));
      try {
        const viaProxy = new URL(url);
        viaProxy.hostname = "127.0.0.1";
        viaProxy.port = String(proxy.port);
        const repository = await open(viaProxy.toString(), { flushIntervalMs: 2, connectTimeoutSeconds: 1 });
        const { account, key } = await accountWithKey(repository);
        await repository.ping();

        proxy.stop(); // the server "goes away": every connection cut, new ones refused
        await expect(repository.ping()).rejects.toBeInstanceOf(UnavailableError);
        await expect(repository.getAccount(account.id)).rejects.toBeInstanceOf(UnavailableError);
        await expect(repository.addCredit({ accountId: account.id, amount: 5, kind: "card", reference: "down" })).rejects.toBeInstanceOf(
          UnavailableError,
        );
        await expect(
          repository.reserve({ id: "gen-x", accountId: account.id, keyId: key.id, keyLimited: false, instanceId: "gw", createdAt: 1 }, () => 1),
        ).rejects.toBeInstanceOf(UnavailableError);
        const generation = makeGeneration(account.id, key.id);
        repository.recordGeneration(generation); // queued, retried
        await expect(repository.flush()).rejects.toBeInstanceOf(UnavailableError);

        proxy.start();
        let up = false;
        for (let i = 0; i < 100 && !up; i++) {
          up = await repository.ping().then(
            () => true,
            () => false,
          );
          if (!up) await Bun.sleep(20);
        }
        expect(up).toBe(true);
        await repository.flush();
        expect(await repository.getAccount(account.id)).toEqual(account);
        expect((await repository.accountTotals(account.id)).debits).toBe(generation.totalCost);
      } finally {
        proxy.stop();
      }
    });

    it("opens through the storage plugin from a postgres:// database_url", async () => {
      const { url } = await databases.reset();
      const host = {
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
      } satisfies PluginHost;
      const instance = await storage.setup({ database_url: url, flush_interval_ms: 5, max_batch: 512 }, host);
      const repository = instance.provides as Repository;
      const account = await repository.createAccount("Acme");
      expect(await repository.getAccount(account.id)).toEqual(account);
      expect(await instance.ready!()).toBe(true);
      await instance.close!();
      expect(await instance.ready!()).toBe(false);
    });

    it("measures group-commit throughput (printed, not asserted)", async () => {
      const { url } = await databases.reset();
      const repository = await open(url, { flushIntervalMs: 60_000 });
      const { account, key } = await accountWithKey(repository);
      const total = 20_000;
      const batch = 512;
      let elapsed = 0;
      for (let done = 0; done < total; done += batch) {
        for (let i = 0; i < batch; i++) repository.recordGeneration(makeGeneration(account.id, key.id, { model: `m${i % 4}` }));
        const started = performance.now();
        await repository.flush();
        elapsed += performance.now() - started;
      }
      console.log(`postgres group commit: ${Math.round(total / (elapsed / 1000))} generations/s (${total} in batches of ${batch})`);
      expect((await repository.accountTotals(account.id)).debits).toBe(Math.ceil(total / batch) * batch * 3_000);
    }, 60_000);
  });
}

/** A TCP relay to the server that can be cut (every connection closed, new ones refused) and restored. */
function tcpProxy(targetHost: string, targetPort: number) {
  type Pair = { client: Bun.Socket<Pair>; server?: Bun.TCPSocket; buffered: Uint8Array[] };
  const pairs = new Set<Pair>();
  let listener: Bun.TCPSocketListener<Pair> | null = null;
  let port = 0;

  function start(): void {
    listener = Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          const pair: Pair = { client, buffered: [] };
          client.data = pair;
          pairs.add(pair);
          void Bun.connect({
            hostname: targetHost,
            port: targetPort,
            socket: {
              open(server) {
                pair.server = server;
                for (const chunk of pair.buffered.splice(0)) server.write(chunk);
              },
              data(_server, chunk) {
                pair.client.write(chunk);
              },
              close() {
                pair.client.end();
              },
              error() {
                pair.client.end();
              },
            },
          }).catch(() => client.end());
        },
        data(client, chunk) {
          const pair = client.data;
          if (pair.server) pair.server.write(chunk);
          else pair.buffered.push(new Uint8Array(chunk));
        },
        close(client) {
          client.data?.server?.end();
          pairs.delete(client.data);
        },
      },
    });
    port = listener.port;
  }

  start();
  return {
    get port() {
      return port;
    },
    start,
    stop(): void {
      listener?.stop(true);
      listener = null;
      for (const pair of pairs) {
        pair.client.terminate();
        pair.server?.terminate();
      }
      pairs.clear();
    },
  };
}
