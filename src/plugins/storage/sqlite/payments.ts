import type { Database } from "bun:sqlite";
import { InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { PaymentEffect, PaymentEvent, PaymentEventResult, PaymentStore, Topup } from "../repository.ts";
import { CREDITS_CAP_MESSAGE, PAID_KINDS } from "../rows.ts";
import { pageLimit } from "../shared/cursor.ts";
import type { StoreGate } from "../shared/gate.ts";
import { newId } from "../shared/ids.ts";
import {
  checkPaymentEvent,
  checkUnmatched,
  CREDITABLE,
  disputeBlockReason,
  effectTopupId,
  newTopup,
  olderThanRaw,
  paymentEventFromRaw,
  paymentReusedFlag,
  renewalCycle,
  TAKEABLE,
  takeBackBound,
  takeBackStatus,
  TOPUP_COLUMNS,
  topupFromRaw,
  topupValues,
  unmatchedFromRaw,
  type PaymentEventRaw,
  type TopupRaw,
  type UnmatchedRaw,
} from "../shared/payment-rows.ts";
import { failClosed, isUniqueViolation } from "./errors.ts";
import type { createSqlitePlans } from "./plans.ts";

type Plans = ReturnType<typeof createSqlitePlans>;

/**
 * Payments on SQLite: top-ups, and each processor event recorded and applied in ONE IMMEDIATE transaction
 * (the event's primary key makes a replay change nothing). Effects that move stored funds (a credit, a
 * take-back, a plan cycle's bonus) call `storedChanged` so that the holds of this process (process mode)
 * see the new funds at once: a refund reduces what the next request may hold.
 */
export function createSqlitePayments(client: Database, gate: StoreGate, plans: Plans, storedChanged: () => void): PaymentStore {
  const q = {
    accountExists: client.prepare<{ id: string }, [string]>(`select id from accounts where id = ?`),
    insertTopup: client.prepare(`insert into topups (${TOPUP_COLUMNS}) values (${TOPUP_COLUMNS.split(",").map(() => "?").join(", ")})`),
    topup: client.prepare<TopupRaw, [string]>(`select * from topups where id = ?`),
    topupByPaymentRef: client.prepare<TopupRaw, [string]>(`select * from topups where payment_ref = ?`),
    attach: client.prepare<TopupRaw, [string, string, number | null, number, string]>(
      `update topups set processor_ref = ?, checkout_url = ?, expires_at = coalesce(?, expires_at), updated_at = ? where id = ? returning *`,
    ),
    openTo: client.prepare<TopupRaw, [string, string, number]>(
      `select * from topups where network = ? and pay_to = ? and status = 'pending' and (expires_at is null or expires_at > ?) order by created_at, id`,
    ),
    expiredPending: client.prepare<TopupRaw, [number, number]>(
      `select * from topups where status = 'pending' and expires_at <= ? order by expires_at, id limit ?`,
    ),
    insertEvent: client.prepare(`insert or ignore into payment_events (id, processor, type, topup_id, amount_nano, received_at) values (?, ?, ?, ?, 0, ?)`),
    eventAmount: client.prepare(`update payment_events set amount_nano = ? where id = ?`),
    ledgerByRef: client.prepare<{ account_id: string; amount_nano: number; kind: string }, [string]>(
      `select account_id, amount_nano, kind from ledger_entries where reference = ?`,
    ),
    insertEntry: client.prepare(`insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at) values (?, ?, ?, ?, ?, null, ?)`),
    credits: client.prepare<{ credits: number }, [string]>(`select total_credits_nano as credits from accounts where id = ?`),
    addCredits: client.prepare(`update accounts set total_credits_nano = total_credits_nano + ?, paid_credits_nano = paid_credits_nano + ? where id = ?`),
    credited: client.prepare(`update topups set status = 'credited', payment_ref = ?, updated_at = ? where id = ?`),
    flag: client.prepare(`update topups set status = 'paid', flag = ?, payment_ref = coalesce(?, payment_ref), updated_at = ? where id = ?`),
    expire: client.prepare(`update topups set status = 'expired', updated_at = ? where id = ? and status = 'pending'`),
    takeBack: client.prepare(`update topups set taken_back_nano = taken_back_nano + ?, status = ?, updated_at = ? where id = ?`),
    block: client.prepare(`update accounts set blocked_reason = ? where id = ?`),
    planExists: client.prepare<{ id: string }, [string]>(`select id from account_plans where id = ?`),
    currentCycle: client.prepare<{ id: string; ends_at: number }, [string, string, number]>(
      `select id, ends_at from account_plans where account_id = ? and subscription_ref = ? and ends_at > ? order by ends_at desc limit 1`,
    ),
    stopCycle: client.prepare(`update account_plans set renewing = 0 where id = ?`),
    stopSubscription: client.prepare(`update account_plans set renewing = 0 where subscription_ref = ? and renewing = 1`),
    insertUnmatched: client.prepare(
      `insert or ignore into unmatched_transfers (id, network, token, from_address, to_address, amount_micro, at, reason, recorded_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    clearBlock: client.prepare(`update accounts set blocked_reason = null where id = ? and blocked_reason is not null`),
  };

  const read = (id: string | null): Topup | null => {
    if (id === null) return null;
    const row = q.topup.get(id);
    return row ? topupFromRaw(row) : null;
  };

  /** The credit of a top-up's own amount, once per payment: what it credited (0 for a replayed payment or a flag). */
  function credit(topup: Topup, paymentRef: string, now: number): number {
    const holder = q.topupByPaymentRef.get(paymentRef);
    if (holder && holder.id !== topup.id) {
      // The payment paid another top-up: flagged here, never credited twice.
      q.flag.run(paymentReusedFlag(paymentRef, `top-up ${holder.id}`), null, now, topup.id);
      return 0;
    }
    const existing = q.ledgerByRef.get(paymentRef);
    if (existing) {
      // The same credit (account, amount, kind) is a replay: the top-up is credited, nothing added.
      if (existing.account_id === topup.accountId && existing.amount_nano === topup.amount && existing.kind === topup.method) {
        q.credited.run(paymentRef, now, topup.id);
      } else {
        q.flag.run(paymentReusedFlag(paymentRef, "another ledger entry"), paymentRef, now, topup.id);
      }
      return 0;
    }
    const current = q.credits.get(topup.accountId);
    if (current !== null && current.credits + topup.amount > Number.MAX_SAFE_INTEGER) {
      throw new InvalidRecordError(CREDITS_CAP_MESSAGE, { field: "amount" });
    }
    q.addCredits.run(topup.amount, PAID_KINDS.has(topup.method) ? topup.amount : 0, topup.accountId);
    q.insertEntry.run(newId("le"), topup.accountId, topup.method, topup.amount, paymentRef, now);
    q.credited.run(paymentRef, now, topup.id);
    return topup.amount;
  }

  /** Money taken back from a credited top-up: −(what it took), bounded by what is left; each reference once. */
  function takeBack(topup: Topup, effect: Extract<PaymentEffect, { kind: "take-back" }>, now: number): number {
    if (q.ledgerByRef.get(effect.reference)) return 0;
    const amount = takeBackBound(topup, effect.amount);
    if (amount === 0 && effect.takeBack === "refund") return 0;
    if (amount > 0) {
      q.insertEntry.run(newId("le"), topup.accountId, effect.takeBack, -amount, effect.reference, now);
      const paid = PAID_KINDS.has(topup.method) ? -amount : 0;
      q.addCredits.run(-amount, paid, topup.accountId);
    }
    q.takeBack.run(amount, takeBackStatus(topup.status, effect.takeBack), now, topup.id);
    if (effect.takeBack === "dispute") q.block.run(disputeBlockReason(effect.reference), topup.accountId);
    return -amount;
  }

  /** A subscription's cycle: once per purchase id, after the running cycle of that subscription when there is one. */
  function planCycle(effect: Extract<PaymentEffect, { kind: "plan-cycle" }>): number {
    if (q.planExists.get(effect.purchase.id)) return 0;
    if (!q.accountExists.get(effect.purchase.accountId)) throw new RecordNotFoundError(`no account "${effect.purchase.accountId}"`);
    const running = q.currentCycle.get(effect.purchase.accountId, effect.subscriptionRef, effect.purchase.startedAt);
    const purchase = renewalCycle(effect.purchase, running ? { endsAt: running.ends_at } : null);
    if (running) q.stopCycle.run(running.id);
    plans.buyInTransaction(purchase, effect.subscriptionRef);
    return purchase.bonus;
  }

  const applyTx = client.transaction((event: PaymentEvent, effect: PaymentEffect): PaymentEventResult => {
    const topupId = effectTopupId(effect);
    if (q.insertEvent.run(event.id, event.processor, event.type, topupId, event.receivedAt).changes === 0) {
      return { applied: false, topup: read(topupId), amount: 0 };
    }
    const now = Date.now();
    const topup = read(topupId);
    let amount = 0;
    switch (effect.kind) {
      case "credit":
        if (topup && CREDITABLE.has(topup.status)) amount = credit(topup, effect.paymentRef, now);
        break;
      case "flag":
        if (topup?.status === "pending") {
          const taken = effect.paymentRef !== null && q.topupByPaymentRef.get(effect.paymentRef);
          q.flag.run(effect.reason, taken ? null : effect.paymentRef, now, topup.id);
        }
        break;
      case "expire":
        if (topup) q.expire.run(now, topup.id);
        break;
      case "take-back":
        if (topup && TAKEABLE.has(topup.status)) amount = takeBack(topup, effect, now);
        break;
      case "plan-cycle":
        amount = planCycle(effect);
        break;
      case "plan-stop":
        q.stopSubscription.run(effect.subscriptionRef);
        break;
      case "none":
        break;
    }
    if (amount !== 0) q.eventAmount.run(amount, event.id);
    return { applied: true, topup: read(topupId), amount };
  });

  return {
    async createTopup(input) {
      gate.assertOpen();
      const topup = newTopup(input, Date.now());
      if (!q.accountExists.get(topup.accountId)) throw new RecordNotFoundError(`account ${topup.accountId} not found`);
      try {
        q.insertTopup.run(...topupValues(topup));
      } catch (error) {
        if (isUniqueViolation(error)) throw new RecordConflictError("a top-up with this id already exists", { field: "id" });
        throw error;
      }
      return topup;
    },

    async getTopup(id) {
      return read(id);
    },

    async findTopupByPaymentRef(paymentRef) {
      const row = q.topupByPaymentRef.get(paymentRef);
      return row ? topupFromRaw(row) : null;
    },

    async listTopups(accountId, page) {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      const params: (string | number)[] = [accountId];
      const cursor = olderThanRaw("created_at", page, (value) => (params.push(value), "?"));
      const rows = client.query<TopupRaw, (string | number)[]>(`select * from topups where account_id = ?${cursor} order by created_at desc, id desc limit ${limit}`).all(...params);
      return rows.map(topupFromRaw);
    },

    async attachCheckout(id, checkout) {
      gate.assertOpen();
      const row = q.attach.get(checkout.processorRef, checkout.checkoutUrl, checkout.expiresAt, Date.now(), id);
      if (!row) throw new RecordNotFoundError(`top-up ${id} not found`);
      return topupFromRaw(row);
    },

    async openTopupsTo(network, payTo, now) {
      return failClosed(() => q.openTo.all(network, payTo, now).map(topupFromRaw));
    },

    async expiredPendingTopups(now, limit) {
      return q.expiredPending.all(now, Math.max(0, Math.floor(limit))).map(topupFromRaw);
    },

    async applyPaymentEvent(event, effect) {
      gate.assertOpen();
      checkPaymentEvent(event, effect);
      try {
        return failClosed(() => applyTx.immediate(event, effect));
      } finally {
        storedChanged();
      }
    },

    async listPaymentEvents(since, processor) {
      const rows =
        processor === undefined
          ? client.query<PaymentEventRaw, [number]>(`select * from payment_events where received_at >= ? order by received_at, id`).all(since)
          : client.query<PaymentEventRaw, [number, string]>(`select * from payment_events where received_at >= ? and processor = ? order by received_at, id`).all(since, processor);
      return rows.map(paymentEventFromRaw);
    },

    async recordUnmatchedTransfer(t) {
      gate.assertOpen();
      checkUnmatched(t);
      return q.insertUnmatched.run(t.id, t.network, t.token, t.from, t.to, t.amountMicro, t.at, t.reason, t.recordedAt).changes > 0;
    },

    async listUnmatchedTransfers(page) {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      const params: (string | number)[] = [];
      const cursor = olderThanRaw("recorded_at", page, (value) => (params.push(value), "?"));
      const rows = client.query<UnmatchedRaw, (string | number)[]>(`select * from unmatched_transfers where 1 = 1${cursor} order by recorded_at desc, id desc limit ${limit}`).all(...params);
      return rows.map(unmatchedFromRaw);
    },

    async clearAccountBlock(accountId) {
      gate.assertOpen();
      return q.clearBlock.run(accountId).changes > 0;
    },
  };
}
