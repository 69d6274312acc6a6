import { and, desc, eq, or, sql } from "drizzle-orm";
import type { Account, AccountQuery, ApiKey, RequestPage } from "../repository.ts";
import { toApiKey } from "../rows.ts";
import { olderThan, pageLimit } from "../shared/cursor.ts";
import { ASCII_LOWER, ASCII_UPPER, foldAscii } from "../search.ts";
import type { PostgresDb } from "./open.ts";
import { accounts, apiKeys } from "./schema.ts";

/** The admin lists: accounts (with a search) and an account's keys, newest first with a (created_at, id) cursor. */
export function createPostgresListing(db: PostgresDb) {
  /** A-Z folded and nothing else, as SQLite's lower() does (Postgres's lower() would fold É too). */
  const folded = (column: typeof accounts.name | typeof accounts.id) => sql`translate(${column}, ${ASCII_UPPER}, ${ASCII_LOWER})`;
  return {
    async listAccounts(query: AccountQuery): Promise<Account[]> {
      const limit = pageLimit(query);
      if (limit === 0) return [];
      const q = query.q ? foldAscii(query.q) : undefined;
      return db
        .select({ id: accounts.id, name: accounts.name, createdAt: accounts.createdAt })
        .from(accounts)
        .where(
          and(
            olderThan(accounts, query),
            // strpos, not LIKE: % and _ in the search are plain characters.
            q === undefined ? undefined : or(sql`strpos(${folded(accounts.name)}, ${q}) > 0`, sql`strpos(${folded(accounts.id)}, ${q}) > 0`),
          ),
        )
        .orderBy(desc(accounts.createdAt), desc(accounts.id))
        .limit(limit);
    },

    async listKeys(accountId: string, page: RequestPage): Promise<ApiKey[]> {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      const rows = await db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.accountId, accountId), olderThan(apiKeys, page)))
        .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
        .limit(limit);
      return rows.map(toApiKey);
    },
  };
}
