import { afterAll, beforeAll, beforeEach, describe, expect, it } from "bun:test";
import { createTronGrid, TronGridError } from "../../../src/plugins/payments-usdt-tron/trongrid.ts";
import { FAKE_USDT, startFakeTronGrid, type FakeTronGrid } from "../../fake-trongrid/server.ts";

const ADDRESS = "TQ4ZQ4ujfW9XbyP7BhYxcv7L1ERQyL5mNs";
const OTHER = "TXLAQ63Xg1NAzckPwKHvzw7CSEmLMEqcdj";
const T0 = Date.UTC(2026, 10, 1, 12);

let tron: FakeTronGrid;
beforeAll(async () => {
  tron = await startFakeTronGrid({ pageLimitMax: 200 });
});
afterAll(async () => {
  await tron?.stop();
});
beforeEach(() => tron.reset());

describe("TronGrid client against the fake", () => {
  it("asks TronGrid's documented endpoint for confirmed transfers to the address, with the key header", async () => {
    tron.addTransfer({ to: ADDRESS, value: "20004217", at: T0 });
    const client = createTronGrid({ apiUrl: tron.url + "/", apiKey: "tron-key-123" });
    const read = await client.confirmedTransfersTo({ address: ADDRESS, since: T0 - 1000, contract: FAKE_USDT.address });
    expect(read.transfers).toHaveLength(1);
    expect(read.transfers[0]).toMatchObject({ contract: FAKE_USDT.address, symbol: "USDT", decimals: 6, to: ADDRESS, value: "20004217", at: T0, type: "Transfer" });
    const call = tron.requests[0]!;
    expect(call.path).toBe(`/v1/accounts/${ADDRESS}/transactions/trc20`);
    expect(call.query).toEqual({
      only_confirmed: "true",
      only_to: "true",
      limit: "200",
      min_timestamp: String(T0 - 1000),
      contract_address: FAKE_USDT.address,
    });
    expect(call.headers["tron-pro-api-key"]).toBe("tron-key-123");
  });

  it("sends no key header without a key", async () => {
    await createTronGrid({ apiUrl: tron.url }).confirmedTransfersTo({ address: ADDRESS, since: 0 });
    expect(tron.requests[0]!.headers["tron-pro-api-key"]).toBeUndefined();
  });

  it("unconfirmed, outgoing, older and other addresses' transfers are not returned", async () => {
    tron.addTransfer({ to: ADDRESS, value: "1", at: T0, confirmed: false });
    tron.addTransfer({ to: OTHER, from: ADDRESS, value: "2", at: T0 });
    tron.addTransfer({ to: OTHER, value: "3", at: T0 });
    tron.addTransfer({ to: ADDRESS, value: "4", at: T0 - 10_000 });
    const kept = tron.addTransfer({ to: ADDRESS, value: "5", at: T0 });
    const read = await createTronGrid({ apiUrl: tron.url }).confirmedTransfersTo({ address: ADDRESS, since: T0 - 5_000 });
    expect(read.transfers.map((transfer) => transfer.txId)).toEqual([kept]);
  });

  it("follows meta.fingerprint over every page", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 450; i++) ids.add(tron.addTransfer({ to: ADDRESS, value: String(12_000_000 + i), at: T0 + i }));
    const read = await createTronGrid({ apiUrl: tron.url }).confirmedTransfersTo({ address: ADDRESS, since: 0 });
    expect(new Set(read.transfers.map((transfer) => transfer.txId))).toEqual(ids);
    expect(read.truncated).toBe(false);
    expect(tron.requests).toHaveLength(3);
    expect(tron.requests[1]!.query.fingerprint).toBeString();
  });

  it("stops at the pages cap and says so", async () => {
    for (let i = 0; i < 450; i++) tron.addTransfer({ to: ADDRESS, value: "12000000", at: T0 + i });
    const read = await createTronGrid({ apiUrl: tron.url, maxPages: 2 }).confirmedTransfersTo({ address: ADDRESS, since: 0 });
    expect(read.transfers).toHaveLength(400);
    expect(read.truncated).toBe(true);
  });

  it("a 500, a body that is not JSON, success=false and an unreachable API are TronGridErrors", async () => {
    const client = createTronGrid({ apiUrl: tron.url });
    for (const kind of ["500", "garbage", "success-false"] as const) {
      tron.failNext(1, kind);
      await expect(client.confirmedTransfersTo({ address: ADDRESS, since: 0 })).rejects.toBeInstanceOf(TronGridError);
    }
    await expect(createTronGrid({ apiUrl: "http://127.0.0.1:1" }).confirmedTransfersTo({ address: ADDRESS, since: 0 })).rejects.toBeInstanceOf(TronGridError);
  });

  it("an API that never answers is a TronGridError after the timeout", async () => {
    const silent = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
    try {
      const client = createTronGrid({ apiUrl: `http://127.0.0.1:${silent.port}`, timeoutMs: 200 });
      await expect(client.confirmedTransfersTo({ address: ADDRESS, since: 0 })).rejects.toThrow(/no answer within 200 ms/);
    } finally {
      silent.stop(true);
    }
  });

  it("malformed rows are skipped and counted", async () => {
    const odd = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () =>
        Response.json({
          success: true,
          meta: { at: 1, page_size: 3 },
          data: [
            { transaction_id: "zz", token_info: FAKE_USDT, block_timestamp: T0, from: OTHER, to: ADDRESS, type: "Transfer", value: "1" },
            { transaction_id: "a".repeat(64), token_info: FAKE_USDT, block_timestamp: T0, from: OTHER, to: ADDRESS, type: "Transfer", value: 12.5 },
            { transaction_id: "b".repeat(64), token_info: FAKE_USDT, block_timestamp: T0, from: OTHER, to: ADDRESS, type: "Transfer", value: "12500000" },
          ],
        }),
    });
    try {
      const read = await createTronGrid({ apiUrl: `http://127.0.0.1:${odd.port}` }).confirmedTransfersTo({ address: ADDRESS, since: 0 });
      expect(read.malformed).toBe(2);
      expect(read.transfers.map((transfer) => transfer.txId)).toEqual(["b".repeat(64)]);
    } finally {
      odd.stop(true);
    }
  });
});
