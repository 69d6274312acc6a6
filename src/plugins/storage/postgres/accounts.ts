import { desc, eq, sql } from "drizzle-orm";
import type { Account, AccountStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { newId } from "../shared/ids.ts";
import { pageLimit } from "../shared/cursor.ts";
import { accountsPageFilter } from "../shared/listing.ts";
import { ASCII_LOWER, ASCII_UPPER } from "../search.ts";
import { guard } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { accounts } from "./schema.ts";

/** Accounts on Postgres: created, read, listed newest first with a search. */
export function createPostgresAccounts(db: PostgresDb, gate: StoreGate): AccountStore {
  const columns = { id: accounts.id, name: accounts.name, createdAt: accounts.createdAt, blockedReason: accounts.blockedReason };
  return {
    createAccount: (name) =>
      guard(async () => {
        gate.assertOpen();
        const account: Account = { id: newId("acct"), name, createdAt: Date.now(), blockedReason: null };
        await db.insert(accounts).values(account);
        return account;
      }),

    getAccount: (id) =>
      guard(async () => {
        const [row] = await db.select(columns).from(accounts).where(eq(accounts.id, id));
        return row ?? null;
      }),

    listAccounts: (query) =>
      guard(async () => {
        const limit = pageLimit(query);
        if (limit === 0) return [];
        // A-Z folded and nothing else, as SQLite's lower() does (Postgres's lower() would fold É too);
        // strpos, not LIKE: % and _ in the search are plain characters.
        const filter = accountsPageFilter(accounts, query, (column, q) => sql`strpos(translate(${column}, ${ASCII_UPPER}, ${ASCII_LOWER}), ${q}) > 0`);
        return db.select(columns).from(accounts).where(filter).orderBy(desc(accounts.createdAt), desc(accounts.id)).limit(limit);
      }),
  };
}
