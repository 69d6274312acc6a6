import { describe, expect, it } from "bun:test";
import { ConflictError, errorBody, InsufficientBalanceError, InvalidRequestError, NotFoundError } from "../../../src/core/errors.ts";
import { InsufficientFundsError, InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../../../src/plugins/storage/errors.ts";
import { asHttpError, storeCall } from "../../../src/plugins/storage/http-errors.ts";

describe("storage/http-errors", () => {
  it("maps each storage refusal to its HTTP error, message and param kept", () => {
    const cases = [
      [new RecordNotFoundError("account acct_x not found"), NotFoundError, null],
      [new RecordConflictError("reference already used for another credit", { field: "reference" }), ConflictError, "reference"],
      [new InvalidRecordError("credit reference is required", { field: "reference" }), InvalidRequestError, "reference"],
      [new InsufficientFundsError("top up first"), InsufficientBalanceError, null],
    ] as const;
    for (const [storageError, httpClass, param] of cases) {
      const mapped = asHttpError(storageError);
      expect(mapped).toBeInstanceOf(httpClass);
      expect(errorBody(mapped as InstanceType<typeof httpClass>).error).toMatchObject({ message: storageError.message, param });
    }
  });

  it("passes every other error through unchanged", async () => {
    const other = new TypeError("bug");
    expect(asHttpError(other)).toBe(other);
    await expect(storeCall(Promise.reject(new RecordConflictError("taken")))).rejects.toBeInstanceOf(ConflictError);
    expect(await storeCall(Promise.resolve(7))).toBe(7);
  });
});
