/**
 * What the store refuses, in its own terms: no HTTP status here. The routes that call the store map
 * these to the gateway's errors in one place (http-errors.ts). A store that cannot answer at all
 * (closed, connection lost) throws `UnavailableError` as every other dependency of a request does.
 */
export class StorageError extends Error {
  /** The input field at fault, when there is one (`amount`, `reference`, ...). */
  readonly field?: string;
  constructor(message: string, options?: { field?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.field = options?.field;
  }
}

/** A record the call names does not exist (an account to credit, to give a key or a plan). */
export class RecordNotFoundError extends StorageError {}
/** The write clashes with a stored record (a reference reused, a key id or hash taken, a second balance-funded plan). */
export class RecordConflictError extends StorageError {}
/** The input can never be stored as given (not a positive integer amount, an unknown kind, past the exact range). */
export class InvalidRecordError extends StorageError {}
/** The account's available funds do not cover the debit. */
export class InsufficientFundsError extends StorageError {}
