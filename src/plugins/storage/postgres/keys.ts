import type { SQL } from "bun";
import { and, desc, eq, getTableColumns, isNull, sql } from "drizzle-orm";
import { RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { KeyStore, NewApiKey } from "../repository.ts";
import { newApiKeyRow, toApiKey } from "../rows.ts";
import type { StoreGate } from "../shared/gate.ts";
import { olderThan, pageLimit } from "../shared/cursor.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import { guard, isForeignKeyViolation, isUniqueViolation } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { costOf, notStored, num, storedIdsSql } from "./overlay.ts";
import { accounts, apiKeys } from "./schema.ts";

/** A key's columns with its account's block: one indexed read (the key by its unique index, the account by its primary key). */
const keyWithAccount = { ...getTableColumns(apiKeys), accountBlockedReason: accounts.blockedReason };
/** The same for statements on `api_keys` alone (RETURNING): the account's block as a subquery. */
const accountBlockOf = sql<string | null>`(select blocked_reason from accounts where accounts.id = ${apiKeys.accountId})`;

const KEY_USAGE = `select (select usage_nano from api_keys where id = $1) as usage, ${storedIdsSql("$2")} as stored`;

/** API keys on Postgres; a key's usage adds its queued generations the store did not hold yet (overlay.ts). */
export function createPostgresKeys(client: SQL, db: PostgresDb, pending: PendingGenerations, gate: StoreGate): KeyStore {
  const withAccount = () => db.select(keyWithAccount).from(apiKeys).innerJoin(accounts, eq(accounts.id, apiKeys.accountId));
  const selectKeyByHash = withAccount().where(eq(apiKeys.keyHash, sql.placeholder("hash"))).prepare("gw_key_by_hash");
  const selectKeyById = withAccount().where(eq(apiKeys.id, sql.placeholder("id"))).prepare("gw_key_by_id");

  return {
    createKey: (key: NewApiKey) =>
      guard(async () => {
        gate.assertOpen();
        const row = newApiKeyRow(key);
        let inserted: { accountBlockedReason: string | null } | undefined;
        try {
          [inserted] = await db.insert(apiKeys).values(row).returning({ accountBlockedReason: accountBlockOf });
        } catch (error) {
          if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`account ${key.accountId} not found`);
          if (isUniqueViolation(error)) throw new RecordConflictError("a key with this id or hash already exists");
          throw error;
        }
        return toApiKey({ ...row, accountBlockedReason: inserted?.accountBlockedReason ?? null });
      }),

    findKeyByHash: (keyHash) =>
      guard(async () => {
        const [row] = await selectKeyByHash.execute({ hash: keyHash });
        return row === undefined ? null : toApiKey(row);
      }),

    getKey: (id) =>
      guard(async () => {
        const [row] = await selectKeyById.execute({ id });
        return row === undefined ? null : toApiKey(row);
      }),

    deleteKey: (id) =>
      guard(async () => {
        gate.assertOpen();
        const [row] = await db
          .update(apiKeys)
          .set({ deletedAt: Date.now() })
          .where(and(eq(apiKeys.id, id), isNull(apiKeys.deletedAt)))
          .returning({ ...getTableColumns(apiKeys), accountBlockedReason: accountBlockOf });
        return row === undefined ? null : toApiKey(row);
      }),

    listKeys: (accountId, page) =>
      guard(async () => {
        const limit = pageLimit(page);
        if (limit === 0) return [];
        const rows = await withAccount()
          .where(and(eq(apiKeys.accountId, accountId), olderThan(apiKeys, page)))
          .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
          .limit(limit);
        return rows.map(toApiKey);
      }),

    keyUsage: (keyId) =>
      guard(async () => {
        const queued = pending.queue.filter((g) => g.keyId === keyId);
        const [row] = await client.unsafe(KEY_USAGE, [keyId, queued.map((g) => g.id)]);
        return num(row.usage) + costOf(notStored(queued, row.stored));
      }),
  };
}
