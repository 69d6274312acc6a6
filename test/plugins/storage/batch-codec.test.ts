import { describe, expect, it } from "bun:test";
import { packBatch, unpackBatch } from "../../../src/plugins/storage/sqlite/batch-codec.ts";
import { makeGeneration } from "./helpers.ts";

describe("storage/sqlite batch codec (metering thread)", () => {
  it("gives back every generation field for field: nulls, unicode, booleans, the largest safe integers", () => {
    const batch = [
      makeGeneration("acct_1", "key_1"),
      makeGeneration("acct_é🌍", "key_\u0000x", { responseId: null, errorCode: "upstream_error", status: "failed", stream: true, timeToFirstTokenMs: null, model: "" }),
      makeGeneration("acct_2", "key_2", { inputCost: Number.MAX_SAFE_INTEGER - 5, outputCost: 5, totalCost: Number.MAX_SAFE_INTEGER, createdAt: 0, latencyMs: 0 }),
    ];
    const packed = packBatch(batch);
    // What crosses to the thread: a string and a transferable buffer.
    expect(typeof packed.text).toBe("string");
    expect(packed.numbers).toBeInstanceOf(Float64Array);
    expect(unpackBatch(packed)).toEqual(batch);
    expect(unpackBatch(packBatch([]))).toEqual([]);
  });
});
