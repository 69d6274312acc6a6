import { and, eq, gt, lte } from "drizzle-orm";
import { RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { SessionStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { guard, isForeignKeyViolation, isUniqueViolation } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { dashboardSessions } from "./schema.ts";

/** Dashboard sessions on Postgres: a row per sign-in, by the hash of its id; expired rows read as absent. */
export function createPostgresSessions(db: PostgresDb, gate: StoreGate): SessionStore {
  return {
    createSession: (session) =>
      guard(async () => {
        gate.assertOpen();
        try {
          await db.insert(dashboardSessions).values(session);
        } catch (error) {
          if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`user ${session.userId} not found`);
          if (isUniqueViolation(error)) throw new RecordConflictError("a session with this id already exists");
          throw error;
        }
      }),

    findSession: (idHash, now) =>
      guard(async () => {
        const [row] = await db
          .select()
          .from(dashboardSessions)
          .where(and(eq(dashboardSessions.idHash, idHash), gt(dashboardSessions.expiresAt, now)));
        return row ?? null;
      }),

    deleteSession: (idHash) =>
      guard(async () => {
        gate.assertOpen();
        await db.delete(dashboardSessions).where(eq(dashboardSessions.idHash, idHash));
      }),

    deleteExpiredSessions: (now) =>
      guard(async () => {
        gate.assertOpen();
        const rows = await db.delete(dashboardSessions).where(lte(dashboardSessions.expiresAt, now)).returning({ idHash: dashboardSessions.idHash });
        return rows.length;
      }),
  };
}
