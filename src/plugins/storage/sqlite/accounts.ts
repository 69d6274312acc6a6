import { desc, eq, sql } from "drizzle-orm";
import type { Account, AccountStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { newId } from "../shared/ids.ts";
import { pageLimit } from "../shared/cursor.ts";
import { accountsPageFilter } from "../shared/listing.ts";
import type { SqliteDb } from "./open.ts";
import { accounts } from "./schema.ts";

/** Accounts on SQLite: created, read, listed newest first with a search. */
export function createSqliteAccounts(db: SqliteDb, gate: StoreGate): AccountStore {
  const columns = { id: accounts.id, name: accounts.name, createdAt: accounts.createdAt, blockedReason: accounts.blockedReason };
  return {
    async createAccount(name) {
      gate.assertOpen();
      const account: Account = { id: newId("acct"), name, createdAt: Date.now(), blockedReason: null };
      db.insert(accounts).values(account).run();
      return account;
    },

    async getAccount(id) {
      return db.select(columns).from(accounts).where(eq(accounts.id, id)).get() ?? null;
    },

    async listAccounts(query) {
      const limit = pageLimit(query);
      if (limit === 0) return [];
      // lower() folds only A-Z here, as foldAscii does: the same rows as on Postgres.
      const filter = accountsPageFilter(accounts, query, (column, q) => sql`instr(lower(${column}), ${q}) > 0`);
      return db.select(columns).from(accounts).where(filter).orderBy(desc(accounts.createdAt), desc(accounts.id)).limit(limit).all();
    },
  };
}
