import type { SQL } from "bun";
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
import { guard, isForeignKeyViolation, isUniqueViolation } from "./errors.ts";
import type { createPostgresPlans } from "./plans.ts";

type Plans = ReturnType<typeof createPostgresPlans>;

const INSERT_ENTRY = `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at) values ($1, $2, $3, $4, $5, null, $6)`;
const ADD_CREDITS = `update accounts set total_credits_nano = total_credits_nano + $1, paid_credits_nano = paid_credits_nano + $2 where id = $3`;
const FLAG = `update topups set status = 'paid', flag = $1, payment_ref = coalesce($2, payment_ref), updated_at = $3 where id = $4`;
const CREDITED = `update topups set status = 'credited', payment_ref = $1, updated_at = $2 where id = $3`;

/**
 * Payments on Postgres: each processor event recorded and applied in one transaction. The event's
 * primary key makes a replay change nothing (a concurrent insert of the same id waits for the first
 * transaction, then does nothing); the top-up's row is locked (FOR UPDATE) before its state is read, so
 * two gateways applying different events of one top-up serialize. Lock order: event, top-up, account
 * (no path locks an account and then a top-up).
 */
export function createPostgresPayments(client: SQL, gate: StoreGate, plans: Plans): PaymentStore {
  const readTopup = async (tx: SQL, id: string | null, lock = false): Promise<Topup | null> => {
    if (id === null) return null;
    const [row] = await tx.unsafe<TopupRaw[]>(`select * from topups where id = $1${lock ? " for update" : ""}`, [id]);
    return row ? topupFromRaw(row) : null;
  };

  async function credit(tx: SQL, topup: Topup, paymentRef: string, now: number): Promise<number> {
    const [holder] = await tx.unsafe<{ id: string }[]>(`select id from topups where payment_ref = $1`, [paymentRef]);
    if (holder && holder.id !== topup.id) {
      // The payment paid another top-up: flagged here, never credited twice.
      await tx.unsafe(FLAG, [paymentReusedFlag(paymentRef, `top-up ${holder.id}`), null, now, topup.id]);
      return 0;
    }
    // On a concurrent insert of the same reference, ON CONFLICT waits for that transaction, then does nothing.
    const inserted = await tx.unsafe(
      `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at)
         values ($1, $2, $3, $4, $5, null, $6) on conflict (reference) do nothing returning id`,
      [newId("le"), topup.accountId, topup.method, topup.amount, paymentRef, now],
    );
    if (inserted.length === 0) {
      const [existing] = await tx.unsafe(`select account_id, amount_nano, kind from ledger_entries where reference = $1`, [paymentRef]);
      // The same credit (account, amount, kind) is a replay: the top-up is credited, nothing added.
      if (existing.account_id === topup.accountId && Number(existing.amount_nano) === topup.amount && existing.kind === topup.method) {
        await tx.unsafe(CREDITED, [paymentRef, now, topup.id]);
      } else {
        await tx.unsafe(FLAG, [paymentReusedFlag(paymentRef, "another ledger entry"), paymentRef, now, topup.id]);
      }
      return 0;
    }
    // No row updated (the account exists: the foreign keys hold) is the cap; throwing rolls everything back.
    const updated = await tx.unsafe(
      `update accounts set total_credits_nano = total_credits_nano + $1, paid_credits_nano = paid_credits_nano + $2
         where id = $3 and total_credits_nano + $1 <= $4 returning id`,
      [topup.amount, PAID_KINDS.has(topup.method) ? topup.amount : 0, topup.accountId, Number.MAX_SAFE_INTEGER],
    );
    if (updated.length === 0) throw new InvalidRecordError(CREDITS_CAP_MESSAGE, { field: "amount" });
    await tx.unsafe(CREDITED, [paymentRef, now, topup.id]);
    return topup.amount;
  }

  async function takeBack(tx: SQL, topup: Topup, effect: Extract<PaymentEffect, { kind: "take-back" }>, now: number): Promise<number> {
    const amount = takeBackBound(topup, effect.amount);
    if (amount === 0 && effect.takeBack === "refund") return 0;
    if (amount > 0) {
      // The reference takes back once, whatever the event: a second insert of it does nothing (and waits for a concurrent one).
      const inserted = await tx.unsafe(
        `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at)
           values ($1, $2, $3, $4, $5, null, $6) on conflict (reference) do nothing returning id`,
        [newId("le"), topup.accountId, effect.takeBack, -amount, effect.reference, now],
      );
      if (inserted.length === 0) return 0;
      await tx.unsafe(ADD_CREDITS, [-amount, PAID_KINDS.has(topup.method) ? -amount : 0, topup.accountId]);
    } else {
      const [seen] = await tx.unsafe(`select 1 from ledger_entries where reference = $1`, [effect.reference]);
      if (seen) return 0;
    }
    await tx.unsafe(`update topups set taken_back_nano = taken_back_nano + $1, status = $2, updated_at = $3 where id = $4`, [
      amount,
      takeBackStatus(topup.status, effect.takeBack),
      now,
      topup.id,
    ]);
    if (effect.takeBack === "dispute") {
      await tx.unsafe(`update accounts set blocked_reason = $1 where id = $2`, [disputeBlockReason(effect.reference), topup.accountId]);
    }
    return -amount;
  }

  async function planCycle(tx: SQL, effect: Extract<PaymentEffect, { kind: "plan-cycle" }>): Promise<number> {
    const { purchase: p, subscriptionRef } = effect;
    // The account's row first (the purchase path takes the same lock): two events of one subscription serialize here.
    const locked = await tx.unsafe(`select 1 from accounts where id = $1 for no key update`, [p.accountId]);
    if (locked.length === 0) throw new RecordNotFoundError(`no account "${p.accountId}"`);
    const [seen] = await tx.unsafe(`select 1 from account_plans where id = $1`, [p.id]);
    if (seen) return 0;
    const [running] = await tx.unsafe<{ id: string; ends_at: string | number }[]>(
      `select id, ends_at from account_plans where account_id = $1 and subscription_ref = $2 and ends_at > $3 order by ends_at desc limit 1`,
      [p.accountId, subscriptionRef, p.startedAt],
    );
    const purchase = renewalCycle(p, running ? { endsAt: Number(running.ends_at) } : null);
    if (running) await tx.unsafe(`update account_plans set renewing = false where id = $1`, [running.id]);
    await plans.buyInTransaction(tx, purchase, subscriptionRef);
    return purchase.bonus;
  }

  async function apply(tx: SQL, event: PaymentEvent, effect: PaymentEffect): Promise<PaymentEventResult> {
    const topupId = effectTopupId(effect);
    const recorded = await tx.unsafe(
      `insert into payment_events (id, processor, type, topup_id, amount_nano, received_at) values ($1, $2, $3, $4, 0, $5) on conflict (id) do nothing returning id`,
      [event.id, event.processor, event.type, topupId, event.receivedAt],
    );
    if (recorded.length === 0) return { applied: false, topup: await readTopup(tx, topupId), amount: 0 };
    const now = Date.now();
    const topup = await readTopup(tx, topupId, true);
    let amount = 0;
    switch (effect.kind) {
      case "credit":
        if (topup && CREDITABLE.has(topup.status)) amount = await credit(tx, topup, effect.paymentRef, now);
        break;
      case "flag":
        if (topup?.status === "pending") {
          const taken = effect.paymentRef !== null && (await tx.unsafe(`select 1 from topups where payment_ref = $1`, [effect.paymentRef])).length > 0;
          await tx.unsafe(FLAG, [effect.reason, taken ? null : effect.paymentRef, now, topup.id]);
        }
        break;
      case "expire":
        if (topup) await tx.unsafe(`update topups set status = 'expired', updated_at = $1 where id = $2 and status = 'pending'`, [now, topup.id]);
        break;
      case "take-back":
        if (topup && TAKEABLE.has(topup.status)) amount = await takeBack(tx, topup, effect, now);
        break;
      case "plan-cycle":
        amount = await planCycle(tx, effect);
        break;
      case "plan-stop":
        await tx.unsafe(`update account_plans set renewing = false where subscription_ref = $1 and renewing`, [effect.subscriptionRef]);
        break;
      case "none":
        break;
    }
    if (amount !== 0) await tx.unsafe(`update payment_events set amount_nano = $1 where id = $2`, [amount, event.id]);
    return { applied: true, topup: await readTopup(tx, topupId), amount };
  }

  return {
    createTopup: (input) =>
      guard(async () => {
        gate.assertOpen();
        const topup = newTopup(input, Date.now());
        const values = topupValues(topup);
        try {
          await client.unsafe(`insert into topups (${TOPUP_COLUMNS}) values (${values.map((_, i) => `$${i + 1}`).join(", ")})`, values);
        } catch (error) {
          if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`account ${topup.accountId} not found`);
          if (isUniqueViolation(error)) throw new RecordConflictError("a top-up with this id already exists", { field: "id" });
          throw error;
        }
        return topup;
      }),

    getTopup: (id) => guard(() => readTopup(client, id)),

    findTopupByPaymentRef: (paymentRef) =>
      guard(async () => {
        const [row] = await client.unsafe<TopupRaw[]>(`select * from topups where payment_ref = $1`, [paymentRef]);
        return row ? topupFromRaw(row) : null;
      }),

    listTopups: (accountId, page) =>
      guard(async () => {
        const limit = pageLimit(page);
        if (limit === 0) return [];
        const params: (string | number)[] = [accountId];
        const cursor = olderThanRaw("created_at", page, (value) => `$${params.push(value)}`);
        const rows = await client.unsafe<TopupRaw[]>(`select * from topups where account_id = $1${cursor} order by created_at desc, id desc limit ${limit}`, params);
        return rows.map(topupFromRaw);
      }),

    attachCheckout: (id, checkout) =>
      guard(async () => {
        gate.assertOpen();
        const [row] = await client.unsafe<TopupRaw[]>(
          `update topups set processor_ref = $1, checkout_url = $2, expires_at = coalesce($3, expires_at), updated_at = $4 where id = $5 returning *`,
          [checkout.processorRef, checkout.checkoutUrl, checkout.expiresAt, Date.now(), id],
        );
        if (!row) throw new RecordNotFoundError(`top-up ${id} not found`);
        return topupFromRaw(row);
      }),

    openTopupsTo: (network, payTo, now) =>
      guard(async () => {
        const rows = await client.unsafe<TopupRaw[]>(
          `select * from topups where network = $1 and pay_to = $2 and status = 'pending' and (expires_at is null or expires_at > $3) order by created_at, id`,
          [network, payTo, now],
        );
        return rows.map(topupFromRaw);
      }),

    expiredPendingTopups: (now, limit) =>
      guard(async () => {
        const rows = await client.unsafe<TopupRaw[]>(`select * from topups where status = 'pending' and expires_at <= $1 order by expires_at, id limit $2`, [
          now,
          Math.max(0, Math.floor(limit)),
        ]);
        return rows.map(topupFromRaw);
      }),

    applyPaymentEvent: (event, effect) =>
      guard(async () => {
        gate.assertOpen();
        checkPaymentEvent(event, effect);
        return client.begin((tx) => apply(tx, event, effect));
      }),

    listPaymentEvents: (since, processor) =>
      guard(async () => {
        const rows =
          processor === undefined
            ? await client.unsafe<PaymentEventRaw[]>(`select * from payment_events where received_at >= $1 order by received_at, id`, [since])
            : await client.unsafe<PaymentEventRaw[]>(`select * from payment_events where received_at >= $1 and processor = $2 order by received_at, id`, [since, processor]);
        return rows.map(paymentEventFromRaw);
      }),

    recordUnmatchedTransfer: (t) =>
      guard(async () => {
        gate.assertOpen();
        checkUnmatched(t);
        const inserted = await client.unsafe(
          `insert into unmatched_transfers (id, network, token, from_address, to_address, amount_micro, at, reason, recorded_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict (id) do nothing returning id`,
          [t.id, t.network, t.token, t.from, t.to, t.amountMicro, t.at, t.reason, t.recordedAt],
        );
        return inserted.length > 0;
      }),

    listUnmatchedTransfers: (page) =>
      guard(async () => {
        const limit = pageLimit(page);
        if (limit === 0) return [];
        const params: (string | number)[] = [];
        const cursor = olderThanRaw("recorded_at", page, (value) => `$${params.push(value)}`);
        const rows = await client.unsafe<UnmatchedRaw[]>(`select * from unmatched_transfers where true${cursor} order by recorded_at desc, id desc limit ${limit}`, params);
        return rows.map(unmatchedFromRaw);
      }),

    clearAccountBlock: (accountId) =>
      guard(async () => {
        gate.assertOpen();
        const cleared = await client.unsafe(`update accounts set blocked_reason = null where id = $1 and blocked_reason is not null returning id`, [accountId]);
        return cleared.length > 0;
      }),
  };
}
