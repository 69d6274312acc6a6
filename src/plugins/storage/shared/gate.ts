import { UnavailableError } from "../../../core/errors.ts";

/**
 * Whether the store still takes writes. `close()` shuts it first, so every domain slice of one store
 * refuses new writes from the same moment; reads keep working until the connection closes.
 */
export class StoreGate {
  closed = false;

  closedError(): UnavailableError {
    return new UnavailableError("storage is closed");
  }

  assertOpen(): void {
    if (this.closed) throw this.closedError();
  }
}
