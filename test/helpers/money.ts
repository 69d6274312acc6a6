import { SQL } from "bun";
import { Database } from "bun:sqlite";
import { expect } from "bun:test";
import { join } from "node:path";
import { startTestGateway, type TestGateway } from "./gateway.ts";
import type { FakeUpstream } from "../fake-upstream/server.ts";
import { usdToNano } from "../../src/core/money.ts";

/**
 * The money suites' view of a gateway: the same requests against each place budget holds live
 * (SQLite process memory, SQLite shared rows, Postgres), and the stored ledger read straight from the
 * database, so every invariant is checked against what was written, not against what the API says.
 */

/** A Postgres server whose user may create databases (each store gets a scratch database). */
export const POSTGRES_URL: string | undefined =
  process.env.POSTGRES_TEST_URL ?? (/^postgres(ql)?:\/\//i.test(process.env.DATABASE_URL ?? "") ? process.env.DATABASE_URL : undefined);

/** `sqlite-thread`: process holds, the group commit's transactions on the metering thread (storage `sqlite_metering_thread`). */
export type StoreKind = "sqlite-process" | "sqlite-thread" | "sqlite-shared" | "postgres";

/** The store kinds this machine can run: Postgres only with POSTGRES_TEST_URL (or a postgres:// DATABASE_URL). */
export function storeKinds(): StoreKind[] {
  const sqlite: StoreKind[] = ["sqlite-process", "sqlite-thread", "sqlite-shared"];
  return POSTGRES_URL ? [...sqlite, "postgres"] : sqlite;
}

/** An account's money as stored (nano-USD), after every queued generation was committed. */
export interface StoredMoney {
  credits: number;
  debits: number;
  /** Σ positive ledger entries (credits, bonuses). */
  creditEntries: number;
  /** Σ plan purchases paid from the balance. */
  planDebits: number;
  /** Σ generations.total_cost_nano. */
  generationCosts: number;
  /** Σ generations.unbilled_cost_nano. */
  unbilled: number;
  generations: number;
  /** Σ amount_nano of the `ledger` view: every money movement, signed. */
  ledgerSum: number;
  /** Hold rows of the account (null where holds live in the gateway's memory). */
  holdRows: number | null;
}

export interface StoredKey {
  limit: number | null;
  usage: number;
  generationCosts: number;
}

export interface MoneyStore {
  kind: StoreKind;
  t: TestGateway;
  stored(accountId: string): Promise<StoredMoney>;
  storedKey(keyId: string): Promise<StoredKey>;
  /** Σ committed spend of the account's 5-minute buckets from `since` (epoch ms, bucket-aligned or not: whole buckets). */
  spentSince(accountId: string, since: number): Promise<number>;
  close(): Promise<void>;
}

const ACCOUNT_SQL = `
select a.total_credits_nano as credits, a.total_debits_nano as debits,
  (select coalesce(sum(amount_nano), 0) from ledger_entries where account_id = a.id and amount_nano > 0) as credit_entries,
  (select coalesce(sum(-amount_nano), 0) from ledger_entries where account_id = a.id and amount_nano < 0) as plan_debits,
  (select coalesce(sum(total_cost_nano), 0) from generations where account_id = a.id) as generation_costs,
  (select coalesce(sum(unbilled_cost_nano), 0) from generations where account_id = a.id) as unbilled,
  (select count(*) from generations where account_id = a.id) as generations,
  (select coalesce(sum(amount_nano), 0) from ledger where account_id = a.id) as ledger_sum,
  (select count(*) from reservations where account_id = a.id) as hold_rows
from accounts a where a.id = `;
const KEY_SQL = `
select k.limit_nano as limit_nano, k.usage_nano as usage_nano,
  (select coalesce(sum(total_cost_nano), 0) from generations where key_id = k.id) as generation_costs
from api_keys k where k.id = `;
const SPENT_SQL = `select coalesce(sum(cost_nano), 0) as spent from spend_buckets where account_id = `;

function toStored(row: Record<string, unknown>, processHolds: boolean): StoredMoney {
  const n = (value: unknown) => Number(value ?? 0);
  return {
    credits: n(row.credits),
    debits: n(row.debits),
    creditEntries: n(row.credit_entries),
    planDebits: n(row.plan_debits),
    generationCosts: n(row.generation_costs),
    unbilled: n(row.unbilled),
    generations: n(row.generations),
    ledgerSum: n(row.ledger_sum),
    holdRows: processHolds ? null : n(row.hold_rows),
  };
}

/** A gateway on `kind` with the fake upstream (shared when given) and the configuration's plans. */
export async function startMoneyStore(kind: StoreKind, options: { fake?: FakeUpstream; env?: Record<string, string>; now?: () => number } = {}): Promise<MoneyStore> {
  if (kind === "postgres") return startPostgres(options);
  const env = { SQLITE_HOLDS: kind === "sqlite-shared" ? "shared" : "process", SQLITE_METERING_THREAD: String(kind === "sqlite-thread"), ...options.env };
  const t = await startTestGateway({ fake: options.fake, now: options.now, env });
  const db = new Database(join(t.dataDir, "gateway.db"), { readonly: true });
  const account = db.query<Record<string, unknown>, [string]>(ACCOUNT_SQL + "?");
  const key = db.query<Record<string, unknown>, [string]>(KEY_SQL + "?");
  const spent = db.query<{ spent: number }, [string, number]>(SPENT_SQL + "? and bucket_start >= ?");
  return {
    kind,
    t,
    async stored(accountId) {
      return toStored(account.get(accountId)!, kind !== "sqlite-shared");
    },
    async storedKey(keyId) {
      const row = key.get(keyId)!;
      return { limit: row.limit_nano === null ? null : Number(row.limit_nano), usage: Number(row.usage_nano), generationCosts: Number(row.generation_costs) };
    },
    async spentSince(accountId, since) {
      return spent.get(accountId, since - (since % 300_000))!.spent;
    },
    async close() {
      db.close();
      await t.stop();
    },
  };
}

async function startPostgres(options: { fake?: FakeUpstream; env?: Record<string, string>; now?: () => number }): Promise<MoneyStore> {
  const name = `gw_money_${process.pid}_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e6).toString(36)}`;
  const admin = new SQL({ url: POSTGRES_URL!, max: 1 });
  await admin.unsafe(`create database "${name}"`);
  const url = new URL(POSTGRES_URL!);
  url.pathname = "/" + name;
  // A small pool: suites run side by side on one server (max_connections 100 by default).
  const t = await startTestGateway({ fake: options.fake, now: options.now, env: { DATABASE_URL: url.toString(), DATABASE_POOL_SIZE: "4", ...options.env } });
  const db = new SQL({ url: url.toString(), max: 2 });
  return {
    kind: "postgres",
    t,
    async stored(accountId) {
      const [row] = await db.unsafe(ACCOUNT_SQL + "$1", [accountId]);
      return toStored(row, false);
    },
    async storedKey(keyId) {
      const [row] = await db.unsafe(KEY_SQL + "$1", [keyId]);
      return { limit: row.limit_nano === null ? null : Number(row.limit_nano), usage: Number(row.usage_nano), generationCosts: Number(row.generation_costs) };
    },
    async spentSince(accountId, since) {
      const [row] = await db.unsafe(SPENT_SQL + "$1 and bucket_start >= $2", [accountId, since - (since % 300_000)]);
      return Number(row.spent);
    },
    async close() {
      await t.stop();
      await db.close();
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.close();
    },
  };
}

/** The account's funds as a reservation sees them now (admin API, nano-USD): held = balance − available. */
export async function fundsOf(t: TestGateway, accountId: string, keyId?: string) {
  const { status, body } = await t.admin("GET", `/admin/v1/accounts/${accountId}/funds${keyId ? `?key_id=${keyId}` : ""}`);
  expect(status, JSON.stringify(body)).toBe(200);
  const nano = (usd: number | null) => (usd === null ? null : usdToNano(usd));
  const data = body.data;
  return {
    balance: nano(data.balance)!,
    available: nano(data.available)!,
    held: nano(data.held)!,
    key: data.key && { limit: nano(data.key.limit), usage: nano(data.key.usage)!, available: nano(data.key.available), held: nano(data.key.held) },
    windows: Object.fromEntries(
      Object.entries(data.windows as Record<string, { cap: number; spent_or_held: number }>).map(([name, w]) => [name, { cap: nano(w.cap)!, spentOrHeld: nano(w.spent_or_held)! }]),
    ),
  };
}

/** Waits until the account's generations (committed) reach `count` and no hold row is left. */
export async function settled(store: MoneyStore, accountId: string, count: number, timeoutMs = 5_000): Promise<StoredMoney> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const money = await store.stored(accountId);
    if (money.generations >= count && (money.holdRows === null || money.holdRows === 0)) return money;
    if (Date.now() > deadline) throw new Error(`not settled after ${timeoutMs} ms: ${JSON.stringify(money)}, expected ${count} generations`);
    await Bun.sleep(20);
  }
}

/** The ledger invariants of one account, stored: never below zero, credits − debits = balance, Σ costs = debits. */
export function expectLedgerExact(money: StoredMoney): void {
  expect(money.credits - money.debits).toBeGreaterThanOrEqual(0);
  expect(money.credits).toBe(money.creditEntries);
  expect(money.debits).toBe(money.generationCosts + money.planDebits);
  expect(money.ledgerSum).toBe(money.credits - money.debits);
}
