import { describe, expect, it } from "bun:test";
import { InsufficientBalanceError } from "../../../src/core/errors.ts";
import { InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../../../src/plugins/storage/errors.ts";
import type { Funds, NewTopup, PaymentEffect, PaymentEvent, PlanPurchase, Repository, UnmatchedTransfer } from "../../../src/plugins/storage/repository.ts";
import { accountWithKey, makeGeneration } from "./helpers.ts";

/**
 * The payments slice of the storage contract (PaymentStore), run on every store by repository-contract.ts:
 * top-ups through their states, each processor event applied once with its effect, money taken back, account
 * blocks, subscription cycles, unmatched transfers.
 */

export interface PaymentsContractStore {
  open(): Promise<Repository>;
  all<T = Record<string, unknown>>(query: string, ...params: (string | number)[]): Promise<T[]>;
}

const USD = 1_000_000_000;
const DAY = 86_400_000;

let sequence = 0;
/** A processor event; received strictly after the one made before it (listPaymentEvents is in that order). */
const eventOf = (type = "checkout.session.completed", id = `stripe:evt_${crypto.randomUUID()}`): PaymentEvent => ({
  id,
  processor: id.split(":")[0]!,
  type,
  receivedAt: Date.now() + ++sequence,
});

export function paymentsContract(name: string, options: { fresh(): Promise<PaymentsContractStore>; concurrentInstances: boolean }): void {
  const count = async (store: PaymentsContractStore, query: string, ...params: (string | number)[]) =>
    (await store.all<{ n: number }>(`select count(*) as n from ${query}`, ...params))[0]!.n;

  async function setup() {
    const store = await options.fresh();
    const repository = await store.open();
    const { account, key } = await accountWithKey(repository);
    const topupOf = (overrides: Partial<NewTopup> = {}) =>
      repository.createTopup({
        id: `tu_${crypto.randomUUID().replaceAll("-", "")}`,
        accountId: account.id,
        method: "card",
        amount: 20 * USD,
        network: null,
        payTo: null,
        payAmountMicro: null,
        expiresAt: null,
        ...overrides,
      });
    return { store, repository, account, key, topupOf };
  }

  const credit = (topupId: string, paymentRef: string): PaymentEffect => ({ kind: "credit", topupId, paymentRef });
  const refund = (topupId: string, reference: string, amount: number): PaymentEffect => ({ kind: "take-back", topupId, takeBack: "refund", reference, amount });

  describe(`storage payments contract (${name})`, () => {
    it("creates top-ups pending, attaches the checkout, finds them by id and lists them newest first with a cursor", async () => {
      const { repository, account, topupOf } = await setup();
      const first = await topupOf();
      expect(first).toMatchObject({ accountId: account.id, method: "card", amount: 20 * USD, status: "pending", paymentRef: null, takenBack: 0, flag: null });
      expect(await repository.getTopup(first.id)).toEqual(first);
      expect(await repository.getTopup("tu_missing")).toBeNull();
      const attached = await repository.attachCheckout(first.id, { processorRef: "cs_1", checkoutUrl: "https://pay.test/cs_1", expiresAt: 1_900_000_000_000 });
      expect(attached).toMatchObject({ processorRef: "cs_1", checkoutUrl: "https://pay.test/cs_1", expiresAt: 1_900_000_000_000, status: "pending" });
      expect(await repository.getTopup(first.id)).toEqual(attached);
      await expect(repository.attachCheckout("tu_missing", { processorRef: "cs", checkoutUrl: "u", expiresAt: null })).rejects.toBeInstanceOf(RecordNotFoundError);

      await expect(topupOf({ accountId: "acct_missing" })).rejects.toBeInstanceOf(RecordNotFoundError);
      await expect(topupOf({ id: first.id })).rejects.toBeInstanceOf(RecordConflictError);
      await expect(topupOf({ amount: 0 })).rejects.toBeInstanceOf(InvalidRecordError);
      await expect(topupOf({ method: "cash" as "card" })).rejects.toBeInstanceOf(InvalidRecordError);

      const made = [attached];
      for (let i = 0; i < 6; i++) made.push(await topupOf({ amount: (i + 1) * USD }));
      const expected = made
        .slice()
        .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1))
        .map((t) => t.id);
      const pages: string[] = [];
      let page = await repository.listTopups(account.id, { limit: 3 });
      while (page.length > 0) {
        pages.push(...page.map((t) => t.id));
        const last = page[page.length - 1]!;
        page = await repository.listTopups(account.id, { limit: 3, before: last.createdAt, beforeId: last.id });
      }
      expect(pages).toEqual(expected);
      expect(await repository.listTopups("acct_missing", { limit: 10 })).toEqual([]);
    });

    it("applies the same event 10 times in a row and 10 at once: credits once", async () => {
      const { store, repository, account, topupOf } = await setup();
      const topup = await topupOf();
      const event = eventOf();
      const results = [];
      for (let i = 0; i < 10; i++) results.push(await repository.applyPaymentEvent(event, credit(topup.id, "pi_once")));
      expect(results[0]).toMatchObject({ applied: true, amount: 20 * USD, topup: { status: "credited", paymentRef: "pi_once" } });
      for (const later of results.slice(1)) expect(later).toMatchObject({ applied: false, amount: 0, topup: { status: "credited" } });

      const other = await topupOf({ amount: 7 * USD });
      const together = eventOf();
      const concurrent = await Promise.all(Array.from({ length: 10 }, () => repository.applyPaymentEvent(together, credit(other.id, "pi_together"))));
      expect(concurrent.filter((r) => r.applied)).toHaveLength(1);
      expect(concurrent.reduce((sum, r) => sum + r.amount, 0)).toBe(7 * USD);

      // A new event of the same payment (another event id) credits nothing more: the top-up is credited.
      expect(await repository.applyPaymentEvent(eventOf(), credit(topup.id, "pi_once"))).toMatchObject({ applied: true, amount: 0 });
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 27 * USD, debits: 0, balance: 27 * USD, paidCredits: 27 * USD });
      expect(await count(store, "ledger_entries where reference in ('pi_once', 'pi_together')")).toBe(2);
      expect(await count(store, "payment_events")).toBe(3);
      const entries = await repository.listLedgerEntries(account.id, { limit: 10 });
      expect(entries.map((e) => [e.kind, e.amount, e.reference]).sort()).toEqual([
        ["card", 20 * USD, "pi_once"],
        ["card", 7 * USD, "pi_together"],
      ]);
      expect(await repository.findTopupByPaymentRef("pi_once")).toMatchObject({ id: topup.id, status: "credited" });
      expect(await repository.findTopupByPaymentRef("pi_none")).toBeNull();
    });

    it("credits a pending, paid or expired top-up (never a credited one twice), with the top-up's own amount and method as the ledger kind", async () => {
      const { repository, account, topupOf } = await setup();
      const usdt = await topupOf({ method: "usdt", amount: 15 * USD, network: "tron", payTo: "TAddr", payAmountMicro: 15_000_123, expiresAt: Date.now() + DAY });
      expect(await repository.applyPaymentEvent(eventOf("trc20.transfer", "tron:tx1"), credit(usdt.id, "tron:tx1"))).toMatchObject({
        applied: true,
        amount: 15 * USD,
        topup: { status: "credited", paymentRef: "tron:tx1" },
      });
      const expired = await topupOf();
      await repository.applyPaymentEvent(eventOf("checkout.session.expired"), { kind: "expire", topupId: expired.id });
      // A payment the processor confirms after our sweep expired the record: the money arrived, so it is credited (once).
      expect(await repository.applyPaymentEvent(eventOf(), credit(expired.id, "pi_late"))).toMatchObject({ applied: true, amount: expired.amount, topup: { status: "credited" } });
      // Flagged (paid, not credited), then credited by a later event.
      const flagged = await topupOf({ amount: 5 * USD });
      await repository.applyPaymentEvent(eventOf(), { kind: "flag", topupId: flagged.id, paymentRef: "pi_f", reason: "amount paid 4.00 USD differs from 5.00 USD" });
      expect(await repository.applyPaymentEvent(eventOf(), credit(flagged.id, "pi_f"))).toMatchObject({ amount: 5 * USD, topup: { status: "credited" } });
      // An unknown top-up: the event is recorded, nothing else.
      expect(await repository.applyPaymentEvent(eventOf(), credit("tu_missing", "pi_x"))).toEqual({ applied: true, topup: null, amount: 0 });
      // A payment that paid another top-up is flagged, not credited twice.
      const twice = await topupOf({ amount: 15 * USD, method: "usdt" });
      expect(await repository.applyPaymentEvent(eventOf(), credit(twice.id, "tron:tx1"))).toMatchObject({ amount: 0, topup: { status: "paid", paymentRef: null } });
      expect((await repository.getTopup(twice.id))!.flag).toContain("tron:tx1");
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 40 * USD, debits: 0, balance: 40 * USD, paidCredits: 40 * USD });
      const events = await repository.listPaymentEvents(0);
      expect(events.map((e) => e.amount)).toEqual([15 * USD, 0, 20 * USD, 0, 5 * USD, 0, 0]);
      expect(await repository.listPaymentEvents(0, "tron")).toEqual([expect.objectContaining({ id: "tron:tx1", topupId: usdt.id, amount: 15 * USD, type: "trc20.transfer" })]);
      expect(await repository.listPaymentEvents(Date.now() + DAY)).toEqual([]);
    });

    it("flags only a pending top-up, and expires only a pending one", async () => {
      const { repository, topupOf } = await setup();
      const pending = await topupOf();
      const flagged = await repository.applyPaymentEvent(eventOf(), { kind: "flag", topupId: pending.id, paymentRef: "pi_fl", reason: "currency eur differs from usd" });
      expect(flagged).toMatchObject({ applied: true, amount: 0, topup: { status: "paid", flag: "currency eur differs from usd", paymentRef: "pi_fl" } });
      // Paid stays paid: neither a second flag nor an expiry changes it.
      await repository.applyPaymentEvent(eventOf(), { kind: "flag", topupId: pending.id, paymentRef: "pi_other", reason: "again" });
      await repository.applyPaymentEvent(eventOf(), { kind: "expire", topupId: pending.id });
      expect(await repository.getTopup(pending.id)).toMatchObject({ status: "paid", flag: "currency eur differs from usd", paymentRef: "pi_fl" });

      const credited = await topupOf();
      await repository.applyPaymentEvent(eventOf(), credit(credited.id, "pi_cr"));
      await repository.applyPaymentEvent(eventOf(), { kind: "expire", topupId: credited.id });
      await repository.applyPaymentEvent(eventOf(), { kind: "flag", topupId: credited.id, paymentRef: null, reason: "late" });
      expect(await repository.getTopup(credited.id)).toMatchObject({ status: "credited", flag: null });

      const due = await topupOf({ method: "usdt", network: "tron", payTo: "TAddr", payAmountMicro: 12_000_001, expiresAt: Date.now() - 1000 });
      const open = await topupOf({ method: "usdt", network: "tron", payTo: "TAddr", payAmountMicro: 12_000_002, expiresAt: Date.now() + DAY });
      await topupOf({ method: "usdt", network: "tron", payTo: "TOther", payAmountMicro: 12_000_003, expiresAt: Date.now() + DAY });
      expect((await repository.openTopupsTo("tron", "TAddr", Date.now())).map((t) => t.id)).toEqual([open.id]);
      expect((await repository.expiredPendingTopups(Date.now(), 10)).map((t) => t.id)).toEqual([due.id]);
      expect(await repository.applyPaymentEvent(eventOf("expire", `sweep:${due.id}`), { kind: "expire", topupId: due.id })).toMatchObject({ topup: { status: "expired" } });
      expect(await repository.expiredPendingTopups(Date.now(), 10)).toEqual([]);
      expect((await repository.getTopup(open.id))!.payAmountMicro).toBe(12_000_002);
    });

    it("takes a refund back in two parts, each reference once, and bounds one beyond what is left", async () => {
      const { store, repository, account, topupOf } = await setup();
      const topup = await topupOf({ amount: 20 * USD });
      await repository.applyPaymentEvent(eventOf(), credit(topup.id, "pi_r"));
      const first = eventOf("charge.refunded");
      expect(await repository.applyPaymentEvent(first, refund(topup.id, "re_1", 5 * USD))).toMatchObject({
        applied: true,
        amount: -5 * USD,
        topup: { status: "refunded", takenBack: 5 * USD },
      });
      // Replayed, or the same refund under a new event id: nothing more.
      expect(await repository.applyPaymentEvent(first, refund(topup.id, "re_1", 5 * USD))).toMatchObject({ applied: false, amount: 0 });
      expect(await repository.applyPaymentEvent(eventOf("charge.refunded"), refund(topup.id, "re_1", 5 * USD))).toMatchObject({ applied: true, amount: 0 });
      expect(await repository.applyPaymentEvent(eventOf("charge.refunded"), refund(topup.id, "re_2", 10 * USD))).toMatchObject({
        amount: -10 * USD,
        topup: { takenBack: 15 * USD },
      });
      // 8 asked, 5 left.
      expect(await repository.applyPaymentEvent(eventOf("charge.refunded"), refund(topup.id, "re_3", 8 * USD))).toMatchObject({
        amount: -5 * USD,
        topup: { takenBack: 20 * USD, status: "refunded" },
      });
      expect(await repository.applyPaymentEvent(eventOf("charge.refunded"), refund(topup.id, "re_4", USD))).toMatchObject({ amount: 0 });
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 0, debits: 0, balance: 0, paidCredits: 0 });
      expect(await count(store, "ledger_entries where kind = 'refund'")).toBe(3);
      const entries = await repository.listLedgerEntries(account.id, { limit: 10 });
      expect(entries.filter((e) => e.kind === "refund").map((e) => [e.reference, e.amount]).sort()).toEqual([
        ["re_1", -5 * USD],
        ["re_2", -10 * USD],
        ["re_3", -5 * USD],
      ]);
      const sums = (await store.all<{ balance: number }>("select coalesce(sum(amount_nano), 0) as balance from ledger where account_id = ?", account.id))[0]!;
      expect(sums.balance).toBe(0);

      // A pending top-up has nothing to take back: the event is recorded only.
      const pending = await topupOf();
      expect(await repository.applyPaymentEvent(eventOf(), refund(pending.id, "re_p", USD))).toMatchObject({ applied: true, amount: 0, topup: { status: "pending", takenBack: 0 } });
      await expect(repository.applyPaymentEvent(eventOf(), refund(topup.id, "re_bad", 0))).rejects.toBeInstanceOf(InvalidRecordError);
    });

    it("leaves a debt when a refund follows spending, and refuses new holds at once", async () => {
      const { repository, account, key, topupOf } = await setup();
      const topup = await topupOf({ amount: 10 * USD });
      await repository.applyPaymentEvent(eventOf(), credit(topup.id, "pi_spent"));
      repository.recordGeneration(makeGeneration(account.id, key.id, { inputCost: 3 * USD, outputCost: 3 * USD }));
      await repository.flush();
      const hold = (amount: number) => (funds: Funds) => {
        if (funds.account < amount) throw new InsufficientBalanceError("not enough balance");
        return amount;
      };
      const reservation = () => ({ id: `gen-${crypto.randomUUID()}`, accountId: account.id, keyId: key.id, keyLimited: false, instanceId: "gw_test", createdAt: Date.now() });
      // A hold first: a store that keeps the funds it read (process holds) must hear of the refund.
      const held = reservation();
      expect(await repository.reserve(held, hold(USD))).toBe(USD);
      await repository.releaseReservation(held.id);

      expect(await repository.applyPaymentEvent(eventOf("charge.refunded"), refund(topup.id, "re_all", 10 * USD))).toMatchObject({ amount: -10 * USD });
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 0, debits: 6 * USD, balance: -6 * USD, paidCredits: 0 });
      await expect(repository.reserve(reservation(), hold(1))).rejects.toBeInstanceOf(InsufficientBalanceError);
      // The ledger shows why: the credit, the usage, the refund.
      const entries = await repository.listLedgerEntries(account.id, { limit: 10 });
      expect(entries.map((e) => e.kind).sort()).toEqual(["card", "refund"]);
    });

    it("blocks the account on a dispute until an operator clears it", async () => {
      const { store, repository, account, key, topupOf } = await setup();
      const topup = await topupOf({ amount: 30 * USD });
      await repository.applyPaymentEvent(eventOf(), credit(topup.id, "pi_d"));
      expect(await repository.clearAccountBlock(account.id)).toBe(false);
      const disputed = await repository.applyPaymentEvent(eventOf("charge.dispute.created"), {
        kind: "take-back",
        topupId: topup.id,
        takeBack: "dispute",
        reference: "dp_1",
        amount: 30 * USD,
      });
      expect(disputed).toMatchObject({ applied: true, amount: -30 * USD, topup: { status: "disputed", takenBack: 30 * USD } });
      expect(await repository.findKeyByHash(key.keyHash)).toMatchObject({ id: key.id, accountBlockedReason: "payment dispute dp_1" });
      expect(await repository.getKey(key.id)).toMatchObject({ accountBlockedReason: "payment dispute dp_1" });
      expect((await repository.listKeys(account.id, { limit: 5 }))[0]).toMatchObject({ accountBlockedReason: "payment dispute dp_1" });
      expect(await repository.getAccount(account.id)).toMatchObject({ blockedReason: "payment dispute dp_1" });
      expect((await repository.listAccounts({ limit: 5 })).find((a) => a.id === account.id)).toMatchObject({ blockedReason: "payment dispute dp_1" });
      expect(await repository.accountTotals(account.id)).toMatchObject({ credits: 0, balance: 0, paidCredits: 0 });
      expect(await count(store, "ledger_entries where kind = 'dispute' and reference = 'dp_1'")).toBe(1);
      // A refund after a dispute: nothing left to take, and the top-up stays disputed.
      expect(await repository.applyPaymentEvent(eventOf(), refund(topup.id, "re_after", USD))).toMatchObject({ amount: 0, topup: { status: "disputed" } });

      expect(await repository.clearAccountBlock(account.id)).toBe(true);
      expect(await repository.clearAccountBlock(account.id)).toBe(false);
      expect(await repository.findKeyByHash(key.keyHash)).toMatchObject({ accountBlockedReason: null });
      expect(await repository.getAccount(account.id)).toMatchObject({ blockedReason: null });
      const deleted = await repository.deleteKey(key.id);
      expect(deleted).toMatchObject({ id: key.id, accountBlockedReason: null });
    });

    it("starts a subscription's cycles one after the other, once per purchase, and stops their renewal", async () => {
      const { store, repository, account } = await setup();
      const start = Date.now() - 1000;
      const purchase = (id: string, at: number): PlanPurchase => ({
        id,
        accountId: account.id,
        plan: "pro",
        funding: "card",
        price: 20 * USD,
        bonus: 2 * USD,
        startedAt: at,
        endsAt: at + 30 * DAY,
        renewing: true,
      });
      const first = await repository.applyPaymentEvent(eventOf("invoice.paid"), { kind: "plan-cycle", purchase: purchase("plan_in_1", start), subscriptionRef: "sub_1" });
      expect(first).toEqual({ applied: true, topup: null, amount: 2 * USD });
      // Paid again before the first cycle ends: the renewal starts at its end.
      await repository.applyPaymentEvent(eventOf("invoice.paid"), { kind: "plan-cycle", purchase: purchase("plan_in_2", start + 29 * DAY), subscriptionRef: "sub_1" });
      // The same invoice under another event id: nothing.
      expect(
        await repository.applyPaymentEvent(eventOf("invoice.payment_succeeded"), { kind: "plan-cycle", purchase: purchase("plan_in_2", start + 29 * DAY), subscriptionRef: "sub_1" }),
      ).toEqual({ applied: true, topup: null, amount: 0 });
      const cycles = await store.all<{ id: string; started_at: number; ends_at: number; renewing: number | boolean; subscription_ref: string }>(
        "select id, started_at, ends_at, renewing, subscription_ref from account_plans where account_id = ? order by started_at",
        account.id,
      );
      expect(cycles.map((c) => [c.id, c.started_at, c.ends_at, Boolean(c.renewing), c.subscription_ref])).toEqual([
        ["plan_in_1", start, start + 30 * DAY, false, "sub_1"],
        ["plan_in_2", start + 30 * DAY, start + 60 * DAY, true, "sub_1"],
      ]);
      expect(await repository.activePlan(account.id, start + DAY)).toMatchObject({ id: "plan_in_1" });
      expect(await repository.activePlan(account.id, start + 31 * DAY)).toMatchObject({ id: "plan_in_2" });
      expect(await repository.accountTotals(account.id)).toEqual({ credits: 4 * USD, debits: 0, balance: 4 * USD, paidCredits: 0 });

      expect(await repository.applyPaymentEvent(eventOf("customer.subscription.deleted"), { kind: "plan-stop", subscriptionRef: "sub_1" })).toMatchObject({ applied: true });
      const stopped = await store.all<{ renewing: number | boolean }>("select renewing from account_plans where subscription_ref = 'sub_1'");
      expect(stopped.map((c) => Boolean(c.renewing))).toEqual([false, false]);
      expect(await repository.activePlan(account.id, start + 61 * DAY)).toBeNull();
      // A cycle paid after the last one ended starts when it is paid.
      await repository.applyPaymentEvent(eventOf("invoice.paid"), { kind: "plan-cycle", purchase: purchase("plan_in_3", start + 70 * DAY), subscriptionRef: "sub_1" });
      expect(await repository.activePlan(account.id, start + 71 * DAY)).toMatchObject({ id: "plan_in_3", startedAt: start + 70 * DAY });
    });

    it("records an unmatched transfer once and lists them newest first with a cursor", async () => {
      const { repository } = await setup();
      const transfer = (i: number, recordedAt: number): UnmatchedTransfer => ({
        id: `tron:tx_${i}`,
        network: "tron",
        token: "USDT",
        from: "TFrom",
        to: "TAddr",
        amountMicro: 11_000_000 + i,
        at: recordedAt - 5000,
        reason: "below the 12 USD minimum",
        recordedAt,
      });
      const base = Date.now();
      expect(await repository.recordUnmatchedTransfer(transfer(0, base))).toBe(true);
      expect(await repository.recordUnmatchedTransfer(transfer(0, base + 1))).toBe(false);
      // Pairs share a millisecond: the cursor splits them by id.
      for (let i = 1; i < 7; i++) await repository.recordUnmatchedTransfer(transfer(i, base + Math.ceil(i / 2)));
      const all = await repository.listUnmatchedTransfers({ limit: 100 });
      expect(all).toHaveLength(7);
      expect(all[all.length - 1]).toEqual(transfer(0, base));
      const pages: string[] = [];
      let page = await repository.listUnmatchedTransfers({ limit: 2 });
      while (page.length > 0) {
        pages.push(...page.map((t) => t.id));
        const last = page[page.length - 1]!;
        page = await repository.listUnmatchedTransfers({ limit: 2, before: last.recordedAt, beforeId: last.id });
      }
      expect(pages).toEqual(all.map((t) => t.id));
      expect(pages).toEqual(["tron:tx_6", "tron:tx_5", "tron:tx_4", "tron:tx_3", "tron:tx_2", "tron:tx_1", "tron:tx_0"]);
    });

    it.skipIf(!options.concurrentInstances)("credits once when two gateways apply the same event, and serializes different events of one top-up", async () => {
      const store = await options.fresh();
      const a = await store.open();
      const b = await store.open();
      const { account } = await accountWithKey(a);
      const topup = await a.createTopup({ id: "tu_race", accountId: account.id, method: "card", amount: 9 * USD, network: null, payTo: null, payAmountMicro: null, expiresAt: null });
      const event = eventOf();
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).applyPaymentEvent(event, credit(topup.id, "pi_race"))));
      expect(results.filter((r) => r.applied)).toHaveLength(1);
      expect(await count(store, "ledger_entries where reference = 'pi_race'")).toBe(1);
      // Different refunds of the topup from both gateways at once: never more than it credited.
      const refunds = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).applyPaymentEvent(eventOf("charge.refunded"), refund(topup.id, `re_race_${i}`, 2 * USD))),
      );
      expect(refunds.reduce((sum, r) => sum + r.amount, 0)).toBe(-9 * USD);
      expect(await b.getTopup(topup.id)).toMatchObject({ takenBack: 9 * USD, status: "refunded" });
      expect(await b.accountTotals(account.id)).toEqual({ credits: 0, debits: 0, balance: 0, paidCredits: 0 });
    });
  });
}
