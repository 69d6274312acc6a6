import { SQL } from "bun";
import { GatewayError, UnavailableError } from "../../../core/errors.ts";

/** The SQLSTATE of a server error (drizzle wraps driver errors in `cause`), if any. */
export function sqlState(error: unknown): string | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e instanceof SQL.PostgresError) return e.errno;
  }
  return undefined;
}

function isSqlError(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e instanceof SQL.SQLError) return true;
  }
  return false;
}

export const isUniqueViolation = (error: unknown) => sqlState(error) === "23505";
export const isForeignKeyViolation = (error: unknown) => sqlState(error) === "23503";

/**
 * "This row can never be written": a data exception (class 22) or an integrity violation (class 23),
 * or a fault of ours before the driver (a TypeError building the batch). Everything else (connection
 * lost, server shutting down, deadlock, serialization failure) may pass, and is retried.
 */
export function isPermanent(error: unknown): boolean {
  const state = sqlState(error);
  if (state !== undefined) return state.startsWith("22") || state.startsWith("23");
  return !isSqlError(error);
}

/** SQLSTATE classes of a statement the server refused as written (data, constraint, syntax, limits). */
const REFUSED_CLASSES = new Set(["21", "22", "23", "24", "25", "26", "27", "2B", "2D", "2F", "34", "38", "39", "3B", "42", "44", "54", "P0"]);

/**
 * Errors of the store itself (no connection, server restarting or gone, login refused, out of
 * resources, deadlock) become `UnavailableError` (503); a refused statement or a bug stays what it is.
 */
export function storeError(error: unknown): unknown {
  if (error instanceof GatewayError || !isSqlError(error)) return error;
  const state = sqlState(error);
  if (state !== undefined && REFUSED_CLASSES.has(state.slice(0, 2))) return error;
  return new UnavailableError("storage unavailable", { cause: error });
}

/** Runs a store call, surfacing store failures as `UnavailableError`. */
export async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw storeError(error);
  }
}
