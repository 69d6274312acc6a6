import type { SQLiteError } from "bun:sqlite";
import { GatewayError, UnavailableError } from "../../../core/errors.ts";
import { StorageError } from "../errors.ts";

/** A unique index or the primary key refused the row (a taken id is a conflict, not a driver failure). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as Partial<SQLiteError> | null)?.code;
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

/** Another connection (a process on the same file) holds the write lock. */
export function isBusy(error: unknown): boolean {
  const code = (error as Partial<SQLiteError> | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_BUSY");
}

/** SQLite errors that say "this row can never be written"; every other failure is retried. */
export function isPermanent(error: unknown): boolean {
  const code = (error as Partial<SQLiteError> | null)?.code;
  if (typeof code !== "string") return !(error instanceof Error && /closed database/i.test(error.message));
  return /^SQLITE_(CONSTRAINT|MISMATCH|TOOBIG|RANGE)/.test(code);
}

/** A driver failure (locked, I/O, closed) on a path that guards money: 503, never served unmetered. */
export function failClosed<T>(operation: () => T): T {
  try {
    return operation();
  } catch (error) {
    if (error instanceof GatewayError || error instanceof StorageError) throw error;
    throw new UnavailableError("the store is briefly unavailable; retry in a few seconds", { headers: { "retry-after": "2" }, cause: error });
  }
}
