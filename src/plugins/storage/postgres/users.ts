import { asc, eq } from "drizzle-orm";
import { RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { UserStore } from "../repository.ts";
import { newUserRow, toUser } from "../rows.ts";
import type { StoreGate } from "../shared/gate.ts";
import { guard, isForeignKeyViolation, isUniqueViolation } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { users } from "./schema.ts";

/** Dashboard users on Postgres: one row each, the email unique over the gateway. */
export function createPostgresUsers(db: PostgresDb, gate: StoreGate): UserStore {
  return {
    createUser: (user) =>
      guard(async () => {
        gate.assertOpen();
        const row = newUserRow(user);
        try {
          await db.insert(users).values(row);
        } catch (error) {
          if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`account ${row.accountId} not found`);
          if (isUniqueViolation(error)) throw new RecordConflictError("a user with this email or id already exists", { field: "email" });
          throw error;
        }
        return row;
      }),

    findUserByEmail: (email) =>
      guard(async () => {
        const [row] = await db.select().from(users).where(eq(users.email, email));
        return row === undefined ? null : toUser(row);
      }),

    getUser: (id) =>
      guard(async () => {
        const [row] = await db.select().from(users).where(eq(users.id, id));
        return row === undefined ? null : toUser(row);
      }),

    listUsers: (accountId) =>
      guard(async () => {
        const rows = await db.select().from(users).where(eq(users.accountId, accountId)).orderBy(asc(users.createdAt), asc(users.id));
        return rows.map(toUser);
      }),
  };
}
