import { and, desc, eq, getTableColumns, sql } from "drizzle-orm";
import { RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { KeyStore, NewApiKey } from "../repository.ts";
import { newApiKeyRow, toApiKey } from "../rows.ts";
import type { StoreGate } from "../shared/gate.ts";
import { olderThan, pageLimit } from "../shared/cursor.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import type { StoredView } from "./repository.ts";
import { isUniqueViolation } from "./errors.ts";
import type { SqliteDb } from "./open.ts";
import { accounts, apiKeys } from "./schema.ts";

const p = sql.placeholder;

/** A key's columns with its account's block: one indexed read (the key by its unique index, the account by its primary key). */
const keyWithAccount = { ...getTableColumns(apiKeys), accountBlockedReason: accounts.blockedReason };
/** The same for statements on `api_keys` alone (RETURNING): the account's block as a subquery. */
const accountBlockOf = sql<string | null>`(select blocked_reason from accounts where accounts.id = ${apiKeys.accountId})`;

/** API keys on SQLite; a key's usage adds its generations still queued for the group commit. */
export function createSqliteKeys(db: SqliteDb, pending: PendingGenerations, gate: StoreGate, stored: StoredView): KeyStore {
  const withAccount = () => db.select(keyWithAccount).from(apiKeys).innerJoin(accounts, eq(accounts.id, apiKeys.accountId));
  const selectKeyByHash = withAccount().where(eq(apiKeys.keyHash, p("hash"))).prepare();
  const selectKeyById = withAccount().where(eq(apiKeys.id, p("id"))).prepare();
  const selectKeyUsage = db.select({ usage: apiKeys.usageNano }).from(apiKeys).where(eq(apiKeys.id, p("id"))).prepare();

  return {
    async createKey(key: NewApiKey) {
      gate.assertOpen();
      const account = db.select({ id: accounts.id, blockedReason: accounts.blockedReason }).from(accounts).where(eq(accounts.id, key.accountId)).get();
      if (account === undefined) throw new RecordNotFoundError(`account ${key.accountId} not found`);
      const row = newApiKeyRow(key);
      try {
        db.insert(apiKeys).values(row).run();
      } catch (error) {
        if (isUniqueViolation(error)) throw new RecordConflictError("a key with this id or hash already exists");
        throw error;
      }
      return toApiKey({ ...row, accountBlockedReason: account.blockedReason });
    },

    async findKeyByHash(keyHash) {
      const row = selectKeyByHash.get({ hash: keyHash });
      return row === undefined ? null : toApiKey(row);
    },

    async getKey(id) {
      const row = selectKeyById.get({ id });
      return row === undefined ? null : toApiKey(row);
    },

    async deleteKey(id) {
      gate.assertOpen();
      const row = db
        .update(apiKeys)
        .set({ deletedAt: Date.now() })
        .where(and(eq(apiKeys.id, id), sql`${apiKeys.deletedAt} is null`))
        .returning({ ...getTableColumns(apiKeys), accountBlockedReason: accountBlockOf })
        .get();
      return row === undefined ? null : toApiKey(row);
    },

    async listKeys(accountId, page) {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      return withAccount()
        .where(and(eq(apiKeys.accountId, accountId), olderThan(apiKeys, page)))
        .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
        .limit(limit)
        .all()
        .map(toApiKey);
    },

    async keyUsage(keyId) {
      return (stored(() => selectKeyUsage.get({ id: keyId }))?.usage ?? 0) + pending.keySpend(keyId);
    },
  };
}
