import { and, desc, eq, or, sql } from "drizzle-orm";
import type { Account, AccountQuery, ApiKey, RequestPage } from "../repository.ts";
import { toApiKey } from "../rows.ts";
import { olderThan, pageLimit } from "../shared/cursor.ts";
import { foldAscii } from "../search.ts";
import type { SqliteDb } from "./open.ts";
import { accounts, apiKeys } from "./schema.ts";

/** The admin lists: accounts (with a search) and an account's keys, newest first with a (created_at, id) cursor. */
export function createSqliteListing(db: SqliteDb) {
  return {
    listAccounts(query: AccountQuery): Account[] {
      const limit = pageLimit(query);
      if (limit === 0) return [];
      // lower() folds only A-Z here, as foldAscii does: the same rows as on Postgres.
      const q = query.q ? foldAscii(query.q) : undefined;
      return db
        .select({ id: accounts.id, name: accounts.name, createdAt: accounts.createdAt })
        .from(accounts)
        .where(
          and(
            olderThan(accounts, query),
            q === undefined ? undefined : or(sql`instr(lower(${accounts.name}), ${q}) > 0`, sql`instr(lower(${accounts.id}), ${q}) > 0`),
          ),
        )
        .orderBy(desc(accounts.createdAt), desc(accounts.id))
        .limit(limit)
        .all();
    },

    listKeys(accountId: string, page: RequestPage): ApiKey[] {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      return db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.accountId, accountId), olderThan(apiKeys, page)))
        .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
        .limit(limit)
        .all()
        .map(toApiKey);
    },
  };
}
