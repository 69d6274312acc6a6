import { ConflictError, GatewayError, InsufficientBalanceError, InvalidRequestError, NotFoundError } from "../../core/errors.ts";
import { InsufficientFundsError, InvalidRecordError, RecordConflictError, RecordNotFoundError, StorageError } from "./errors.ts";

/** The one mapping from the store's refusals (errors.ts) to the gateway's HTTP errors; anything else passes as is. */
export function asHttpError(error: unknown): unknown {
  if (!(error instanceof StorageError)) return error;
  const options = { param: error.field, cause: error };
  if (error instanceof RecordNotFoundError) return new NotFoundError(error.message, options);
  if (error instanceof RecordConflictError) return new ConflictError(error.message, options);
  if (error instanceof InvalidRecordError) return new InvalidRequestError(error.message, options);
  if (error instanceof InsufficientFundsError) return new InsufficientBalanceError(error.message, options);
  return new GatewayError("internal error", { cause: error });
}

/** A store call made by a route: what the store refuses reaches the client as the matching HTTP error. */
export async function storeCall<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw asHttpError(error);
  }
}
