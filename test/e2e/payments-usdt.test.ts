import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { FAKE_USDT, startFakeTronGrid, type FakeTronGrid } from "../fake-trongrid/server.ts";
import type { PollSummary } from "../../src/plugins/payments-usdt-tron/poller.ts";

/**
 * USDT on TRON, watch-only, end to end: a real gateway on SQLite, a fake TronGrid speaking the real wire format, and
 * polls driven through the running gateway (`pollOnce`), never by waiting on the timer (USDT_POLL_MS is an hour).
 * The gateway's clock is injected, so expiry is reached by moving it, not by sleeping.
 */

const ADDRESS = "TQ4ZQ4ujfW9XbyP7BhYxcv7L1ERQyL5mNs";
const SCAM_TOKEN = { address: "TXLAQ63Xg1NAzckPwKHvzw7CSEmLMEqcdj", symbol: "USDT", name: "Tether USD", decimals: 6 };
const MINUTE = 60_000;

let clock = Date.now();
const now = () => clock;
let tron: FakeTronGrid;
let t: TestGateway;
let db: Database;

function gatewayEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { USDT_TRON_ADDRESS: ADDRESS, TRON_API_URL: tron.url, USDT_POLL_MS: "3600000", SQLITE_HOLDS: "shared", ...extra };
}

beforeAll(async () => {
  tron = await startFakeTronGrid();
  t = await startTestGateway({ env: gatewayEnv(), now });
  db = new Database(join(t.dataDir, "gateway.db"), { readonly: true });
}, 30_000);

afterAll(async () => {
  db?.close();
  await t?.stop();
  await tron?.stop();
});

function poll(gateway: TestGateway = t): Promise<PollSummary> {
  const service = gateway.gateway.service("payments-usdt-tron");
  if (!service) throw new Error("the payments-usdt-tron plugin is not enabled");
  return service.pollOnce();
}

async function call(key: string, method: string, path: string, body?: unknown, on: TestGateway = t) {
  const response = await fetch(on.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/** A new account with no money, its key, and a USDT top-up of `amount` on it. */
async function usdtTopup(amount = 20, on: TestGateway = t) {
  const { accountId, key } = await on.newAccountWithKey({ credit: 0 });
  const created = await call(key, "POST", "/v1/credits/topups", { method: "usdt", amount }, on);
  expect(created.status).toBe(201);
  return { accountId, key, topup: created.body.data as Record<string, any> };
}

/** The pay_amount string as micro-USDT, exactly. */
function micro(payAmount: string): bigint {
  const [whole, fraction = ""] = payAmount.split(".");
  return BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, "0"));
}

async function topupNow(key: string, id: string) {
  const read = await call(key, "GET", `/v1/credits/topups/${id}`);
  expect(read.status).toBe(200);
  return read.body.data as Record<string, any>;
}

async function balance(key: string): Promise<number> {
  const credits = await call(key, "GET", "/v1/credits");
  expect(credits.status).toBe(200);
  return credits.body.data.balance;
}

function ledgerEntries(reference: string): { kind: string; amount_nano: number }[] {
  return db.query<{ kind: string; amount_nano: number }, [string]>("select kind, amount_nano from ledger_entries where reference = ?").all(reference);
}

async function unmatched(): Promise<Record<string, any>[]> {
  const listed = await t.admin("GET", "/admin/v1/payments/unmatched?limit=100");
  expect(listed.status).toBe(200);
  return listed.body.data;
}

function total(summaries: PollSummary[], field: "credited" | "unmatched"): number {
  return summaries.reduce((sum, summary) => sum + summary[field], 0);
}

describe("USDT top-ups on TRON", () => {
  it("a USDT top-up answers where to pay and the exact amount, with its unique sub-cent offset", async () => {
    const { topup } = await usdtTopup(20);
    expect(topup).toMatchObject({ method: "usdt", amount: 20, status: "pending", pay_to: ADDRESS, network: "tron", token: "USDT" });
    expect(topup.pay_amount).toMatch(/^20\.00\d{4}$/);
    expect(topup.pay_amount).not.toBe("20.000000");
    expect(Date.parse(topup.expires_at)).toBe(clock + 60 * MINUTE);
  });

  it("below 12 USD is refused, naming the minimum", async () => {
    const { key } = await t.newAccountWithKey({ credit: 0 });
    const refused = await call(key, "POST", "/v1/credits/topups", { method: "usdt", amount: 11.99 });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe("invalid_request");
    expect(refused.body.error.param).toBe("amount");
    expect(refused.body.error.message).toContain("12");
    expect((await call(key, "POST", "/v1/credits/topups", { method: "usdt", amount: 12 })).status).toBe(201);
  });

  it("concurrent top-ups of one amount get different exact amounts", async () => {
    // Four accounts, five at once each (the top-up endpoints allow 10 requests per second per key).
    const keys = await Promise.all(Array.from({ length: 4 }, () => t.newAccountWithKey({ credit: 0 })));
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call(keys[i % 4]!.key, "POST", "/v1/credits/topups", { method: "usdt", amount: 25 })),
    );
    expect(created.map((answer) => answer.status)).toEqual(Array(20).fill(201));
    const amounts = created.map((answer) => answer.body.data.pay_amount as string);
    expect(new Set(amounts).size).toBe(20);
    for (const amount of amounts) expect(amount).toMatch(/^25\.00\d{4}$/);
  });

  it("the exact transfer, confirmed, is credited once across repeated polls", async () => {
    const { key, topup } = await usdtTopup(20);
    const tx = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000 });
    const summaries: PollSummary[] = [];
    for (let i = 0; i < 5; i++) summaries.push(await poll());
    expect(summaries.every((summary) => summary.ok)).toBe(true);
    expect(total(summaries, "credited")).toBe(1);
    expect(await topupNow(key, topup.id)).toMatchObject({ status: "credited", credited: true });
    expect(await balance(key)).toBe(20);
    // The credit's amount is the top-up's own (20 USD), not the transfer's 20.00xxxx.
    expect(ledgerEntries(`tron:${tx}`)).toEqual([{ kind: "usdt", amount_nano: 20_000_000_000 }]);
    expect((await unmatched()).some((row) => row.id === `tron:${tx}`)).toBe(false);
    // Every poll asked TronGrid for confirmed transfers to the address only.
    for (const request of tron.requests) expect(request.query).toMatchObject({ only_confirmed: "true", only_to: "true" });
  });

  it("an unconfirmed transfer is not credited until it is confirmed", async () => {
    const { key, topup } = await usdtTopup(30);
    const tx = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000, confirmed: false });
    await poll();
    await poll();
    expect((await topupNow(key, topup.id)).status).toBe("pending");
    expect(await balance(key)).toBe(0);
    tron.confirm(tx);
    const summary = await poll();
    expect(summary.credited).toBe(1);
    expect((await topupNow(key, topup.id)).status).toBe("credited");
    expect(await balance(key)).toBe(30);
  });

  it("another token of the same amount is recorded as unmatched, never credited", async () => {
    const { key, topup } = await usdtTopup(40);
    const tx = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000, token: SCAM_TOKEN });
    const summaries = [await poll(), await poll(), await poll()];
    expect(total(summaries, "credited")).toBe(0);
    expect(total(summaries, "unmatched")).toBe(1);
    expect((await topupNow(key, topup.id)).status).toBe("pending");
    expect(await balance(key)).toBe(0);
    const rows = (await unmatched()).filter((row) => row.id === `tron:${tx}`);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.reason).toBe(`token USDT ${SCAM_TOKEN.address} is not USDT`);
    expect(rows[0]).toMatchObject({ network: "tron", to: ADDRESS });
  });

  it("a wrong amount, even by one micro-USDT, is recorded as unmatched", async () => {
    const { key, topup } = await usdtTopup(50);
    const wrong = micro(topup.pay_amount) + 1n;
    const tx = tron.addTransfer({ to: ADDRESS, value: wrong, at: clock + 3_000 });
    await poll();
    expect((await topupNow(key, topup.id)).status).toBe("pending");
    const row = (await unmatched()).find((candidate) => candidate.id === `tron:${tx}`);
    const shown = `50.00${String(wrong % 10_000n).padStart(4, "0")}`;
    expect(row?.reason).toBe(`no open top-up for ${shown} USDT`);
    expect(row?.amount).toBe(shown);
    expect(await balance(key)).toBe(0);
  });

  it("a transfer below 12 USD is recorded as unmatched", async () => {
    const tx = tron.addTransfer({ to: ADDRESS, value: 5_000_000, at: clock + 3_000 });
    await poll();
    const row = (await unmatched()).find((candidate) => candidate.id === `tron:${tx}`);
    expect(row?.reason).toBe("5.000000 USDT is below the 12 USD minimum");
  });

  it("the exact amount after the top-up expired is recorded as unmatched, not credited", async () => {
    const { key, topup } = await usdtTopup(60);
    clock += 61 * MINUTE;
    const tx = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock - 30_000 });
    const summary = await poll();
    expect(summary.credited).toBe(0);
    expect(["pending", "expired"]).toContain((await topupNow(key, topup.id)).status);
    expect(await balance(key)).toBe(0);
    const row = (await unmatched()).find((candidate) => candidate.id === `tron:${tx}`);
    expect(row?.reason).toContain(`after expiry of top-up ${topup.id}`);
  });

  // Needs the payments core to leave a USDT top-up pending for a grace after expires_at (its expiry sweep expires
  // it at once today, and the store credits only pending or paid top-ups): a transfer sent in time solidifies about
  // a minute later, so a payment at the last minute is recorded as unmatched instead of credited.
  it("a transfer sent before the expiry but confirmed after it (and after the expiry sweep) is credited", async () => {
    const { key, topup } = await usdtTopup(65);
    const deadline = Date.parse(topup.expires_at);
    const tx = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: deadline - 20_000, confirmed: false });
    await poll();
    clock = deadline + 2 * MINUTE;
    await t.gateway.service("payments")!.expireDue();
    tron.confirm(tx);
    expect((await poll()).credited).toBe(1);
    expect(await balance(key)).toBe(65);
  });

  it("a failing API (500, garbage) credits nothing; the next poll credits", async () => {
    const { key, topup } = await usdtTopup(70);
    tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000 });
    tron.failNext(1, "500");
    const failed = await poll();
    expect(failed.ok).toBe(false);
    expect(failed.error).toContain("500");
    tron.failNext(1, "garbage");
    expect((await poll()).ok).toBe(false);
    tron.failNext(1, "success-false");
    expect((await poll()).ok).toBe(false);
    expect((await topupNow(key, topup.id)).status).toBe("pending");
    expect((await fetch(t.url + "/health")).status).toBeLessThan(500); // the gateway stays up
    const next = await poll();
    expect(next).toMatchObject({ ok: true, credited: 1 });
    expect(await balance(key)).toBe(70);
  });

  it("two gateway instances on one database, polling at once, credit once", async () => {
    const second = await startTestGateway({
      env: gatewayEnv({ DATABASE_URL: `sqlite:${join(t.dataDir, "gateway.db")}` }),
      fake: t.fake,
      now,
    });
    try {
      const { key, topup } = await usdtTopup(80);
      const tx = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000 });
      const summaries: PollSummary[] = [];
      for (let round = 0; round < 3; round++) summaries.push(...(await Promise.all([poll(t), poll(second), poll(second), poll(t)])));
      expect(summaries.every((summary) => summary.ok)).toBe(true);
      expect(total(summaries, "credited")).toBe(1);
      expect(total(summaries, "unmatched")).toBe(0);
      expect(await balance(key)).toBe(80);
      expect(ledgerEntries(`tron:${tx}`)).toHaveLength(1);
      expect((await unmatched()).some((row) => row.id === `tron:${tx}`)).toBe(false);
    } finally {
      await second.stop();
    }
  }, 30_000);

  it("reconciliation lists the chain's USDT transfers: the credited ones agree, the others are paid but not credited", async () => {
    const since = clock - 10 * MINUTE;
    const { topup } = await usdtTopup(90);
    const paid = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000 });
    const stray = tron.addTransfer({ to: ADDRESS, value: 33_000_000, at: clock + 3_000 });
    const otherToken = tron.addTransfer({ to: ADDRESS, value: micro(topup.pay_amount), at: clock + 3_000, token: SCAM_TOKEN });
    expect((await poll()).credited).toBe(1);
    const report = await t.admin("GET", `/admin/v1/payments/reconcile?since=${since}`);
    expect(report.status).toBe(200);
    const tronReport = report.body.data.processors.find((processor: { name: string }) => processor.name === "tron");
    const refs = (tronReport.differences as { payment_ref: string; kind: string; processor_amount: number }[]).map((difference) => [difference.payment_ref, difference.kind, difference.processor_amount]);
    expect(refs).toContainEqual([`tron:${stray}`, "paid_not_credited", 33]);
    expect(refs.some(([ref]) => ref === `tron:${paid}`)).toBe(false);
    expect(refs.some(([ref]) => ref === `tron:${otherToken}`)).toBe(false); // not USDT: not a payment of this processor
    // The last record reads TronGrid for USDT's contract only.
    expect(tron.requests.at(-1)!.query.contract_address).toBe(FAKE_USDT.address);
  });

  it("with USDT_TRON_ADDRESS empty the plugin does nothing: USDT top-ups are not offered", async () => {
    const off = await startTestGateway({ env: gatewayEnv({ USDT_TRON_ADDRESS: "" }), fake: t.fake, now });
    try {
      const before = tron.requests.length;
      const { key } = await off.newAccountWithKey({ credit: 0 });
      const refused = await call(key, "POST", "/v1/credits/topups", { method: "usdt", amount: 20 }, off);
      expect(refused.status).toBe(400);
      expect(refused.body.error.param).toBe("method");
      expect(off.gateway.service("payments-usdt-tron")?.address).toBeNull();
      expect(tron.requests.length).toBe(before);
    } finally {
      await off.stop();
    }
  }, 30_000);
});

describe("configuration", () => {
  it("plugins-config.yaml enables payments-usdt-tron after payments, off while USDT_TRON_ADDRESS is empty", () => {
    const text = readFileSync("plugins-config.yaml", "utf8");
    expect(text).toMatch(/^ {2}payments-usdt-tron:/m);
    expect(text.indexOf("\n  payments:")).toBeLessThan(text.indexOf("\n  payments-usdt-tron:"));
    expect(text).toContain("${USDT_TRON_ADDRESS:-}");
  });

  it("the fake TronGrid's USDT is the real contract", () => {
    expect(FAKE_USDT.address).toBe("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
  });
});
