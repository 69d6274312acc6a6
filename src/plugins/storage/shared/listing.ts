import { and, or, type Column, type SQL } from "drizzle-orm";
import type { AccountQuery } from "../repository.ts";
import { olderThan } from "./cursor.ts";
import { foldAscii } from "../search.ts";

/**
 * The filter of an accounts page: older than the cursor and, with a search, the name or the id contains
 * it. `contains(column, q)` is the dialect's A-Z-folded substring test (q is already folded).
 */
export function accountsPageFilter(
  table: { id: Column; name: Column; createdAt: Column },
  query: AccountQuery,
  contains: (column: Column, q: string) => SQL,
): SQL | undefined {
  const q = query.q ? foldAscii(query.q) : undefined;
  return and(olderThan(table, query), q === undefined ? undefined : or(contains(table.name, q), contains(table.id, q)));
}
