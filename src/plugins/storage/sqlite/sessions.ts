import { and, eq, gt, lte } from "drizzle-orm";
import { RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { SessionStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { isUniqueViolation } from "./errors.ts";
import type { SqliteDb } from "./open.ts";
import { dashboardSessions } from "./schema.ts";

/** Dashboard sessions on SQLite: a row per sign-in, by the hash of its id; expired rows read as absent. */
export function createSqliteSessions(db: SqliteDb, gate: StoreGate): SessionStore {
  return {
    async createSession(session) {
      gate.assertOpen();
      try {
        db.insert(dashboardSessions).values(session).run();
      } catch (error) {
        const code = (error as { code?: string } | null)?.code;
        if (code === "SQLITE_CONSTRAINT_FOREIGNKEY") throw new RecordNotFoundError(`user ${session.userId} not found`);
        if (isUniqueViolation(error) || code === "SQLITE_CONSTRAINT_PRIMARYKEY") throw new RecordConflictError("a session with this id already exists");
        throw error;
      }
    },

    async findSession(idHash, now) {
      const row = db
        .select()
        .from(dashboardSessions)
        .where(and(eq(dashboardSessions.idHash, idHash), gt(dashboardSessions.expiresAt, now)))
        .get();
      return row ?? null;
    },

    async deleteSession(idHash) {
      gate.assertOpen();
      db.delete(dashboardSessions).where(eq(dashboardSessions.idHash, idHash)).run();
    },

    async deleteExpiredSessions(now) {
      gate.assertOpen();
      return db.delete(dashboardSessions).where(lte(dashboardSessions.expiresAt, now)).returning({ idHash: dashboardSessions.idHash }).all().length;
    },
  };
}
