import { asc, eq } from "drizzle-orm";
import { RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { UserStore } from "../repository.ts";
import { newUserRow, toUser } from "../rows.ts";
import type { StoreGate } from "../shared/gate.ts";
import { isUniqueViolation } from "./errors.ts";
import type { SqliteDb } from "./open.ts";
import { accounts, users } from "./schema.ts";

/** Dashboard users on SQLite: one row each, the email unique over the gateway. */
export function createSqliteUsers(db: SqliteDb, gate: StoreGate): UserStore {
  return {
    async createUser(user) {
      gate.assertOpen();
      const row = newUserRow(user);
      const account = db.select({ id: accounts.id }).from(accounts).where(eq(accounts.id, row.accountId)).get();
      if (account === undefined) throw new RecordNotFoundError(`account ${row.accountId} not found`);
      try {
        db.insert(users).values(row).run();
      } catch (error) {
        if (isUniqueViolation(error) || (error as { code?: string } | null)?.code === "SQLITE_CONSTRAINT_PRIMARYKEY") {
          throw new RecordConflictError("a user with this email or id already exists", { field: "email" });
        }
        throw error;
      }
      return row;
    },

    async findUserByEmail(email) {
      const row = db.select().from(users).where(eq(users.email, email)).get();
      return row === undefined ? null : toUser(row);
    },

    async getUser(id) {
      const row = db.select().from(users).where(eq(users.id, id)).get();
      return row === undefined ? null : toUser(row);
    },

    async listUsers(accountId) {
      return db.select().from(users).where(eq(users.accountId, accountId)).orderBy(asc(users.createdAt), asc(users.id)).all().map(toUser);
    },
  };
}
