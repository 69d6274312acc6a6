import type { Database } from "bun:sqlite";
import { InsufficientFundsError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import { cycleOf } from "../rows.ts";
import { toCycle, type PlanRow } from "../shared/plan-rows.ts";
import { nanoToUsdString } from "../../../core/money.ts";
import type { PlanCycle, PlanPurchase, PlanStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { failClosed } from "./errors.ts";
import { newId } from "../shared/ids.ts";

/** What this process knows of an account's funds that the file does not hold yet (reservations.ts, pending.ts). */
export interface UnstoredFunds {
  /** To add to the stored available funds: settled holds swapped for queued debits, holds kept in memory. */
  availableShift(accountId: string): number;
  /** Debits queued for the group commit. */
  queuedDebits(accountId: string): number;
  /** Runs a read of stored figures to which queued debits are added (repository.ts, StoredView). */
  stored<T>(read: () => T): T;
}

/**
 * Plan cycles: a balance-funded purchase debits the price; any purchase credits the plan's bonus. One
 * transaction. The funds it checks are the ones a request's reservation sees: holds and queued debits count.
 */
export function createSqlitePlans(client: Database, unstored: UnstoredFunds) {
  const available = client.prepare<{ available: number }, [string, string]>(
    `select a.total_credits_nano - a.total_debits_nano
            - coalesce((select sum(r.amount_nano) from reservations r where r.account_id = ?), 0) as available
       from accounts a where a.id = ?`,
  );
  const balanceFunded = client.prepare<{ id: string }, [string]>(
    `select id from account_plans where account_id = ? and funding = 'balance' limit 1`,
  );
  const insertPlan = client.prepare(
    `insert into account_plans (id, account_id, plan, funding, price_nano, started_at, ends_at, renewing, subscription_ref) values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const insertEntry = client.prepare(
    `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at) values (?, ?, ?, ?, ?, null, ?)`,
  );
  const addDebits = client.prepare(`update accounts set total_debits_nano = total_debits_nano + ? where id = ?`);
  const addCredits = client.prepare(`update accounts set total_credits_nano = total_credits_nano + ? where id = ?`);
  const balance = client.prepare<{ balance: number }, [string]>(`select total_credits_nano - total_debits_nano as balance from accounts where id = ?`);
  const active = client.prepare<PlanRow, [string, number, number]>(
    `select * from account_plans where account_id = ? and started_at <= ? and (ends_at > ? or renewing = 1) order by started_at desc limit 1`,
  );

  /** The refusals that come before the funds: an unknown account, a second cycle funded from the balance. Its stored funds. */
  function checkBuyable(p: PlanPurchase): number {
    const stored = available.get(p.accountId, p.accountId);
    if (!stored) throw new RecordNotFoundError(`no account "${p.accountId}"`);
    if (p.funding === "balance" && balanceFunded.get(p.accountId)) {
      throw new RecordConflictError("this account already funded a plan cycle from its balance (once per account); recurring plans need card funding");
    }
    return stored.available;
  }

  /** The purchase's writes, inside the caller's transaction; `subscriptionRef`: the subscription paying a card-funded cycle. */
  function buy(p: PlanPurchase, subscriptionRef: string | null): number {
    const funds = { available: unstored.stored(() => checkBuyable(p)) + unstored.availableShift(p.accountId) };
    if (p.funding === "balance") {
      if (funds.available < p.price) {
        throw new InsufficientFundsError(
          `the plan costs $${nanoToUsdString(p.price)} and the available balance is $${nanoToUsdString(Math.max(0, funds.available))}; top up first`,
        );
      }
      insertEntry.run(newId("le"), p.accountId, "plan", -p.price, `plan:${p.id}`, p.startedAt);
      addDebits.run(p.price, p.accountId);
    }
    if (p.bonus > 0) {
      insertEntry.run(newId("le"), p.accountId, "bonus", p.bonus, `plan:${p.id}:bonus`, p.startedAt);
      addCredits.run(p.bonus, p.accountId);
    }
    insertPlan.run(p.id, p.accountId, p.plan, p.funding, p.price, p.startedAt, p.endsAt, p.renewing ? 1 : 0, subscriptionRef);
    return balance.get(p.accountId)!.balance - unstored.queuedDebits(p.accountId);
  }
  const purchase = client.transaction((p: PlanPurchase) => buy(p, null));

  return {
    purchasePlan(p: PlanPurchase): { cycle: PlanCycle; balance: number } {
      const after = purchase.immediate(p);
      return {
        cycle: cycleOf(p),
        balance: after,
      };
    },
    activePlan(accountId: string, at: number): PlanCycle | null {
      const row = active.get(accountId, at, at);
      return row ? toCycle(row) : null;
    },
    checkBuyable,
    /** A purchase inside a transaction the caller holds (a subscription's cycle, payments.ts); the balance after it. */
    buyInTransaction: buy,
  };
}

/** The plan slice of the store; a purchase moves stored funds, so the reservations hear of it. */
export function sqlitePlanStore(
  plans: ReturnType<typeof createSqlitePlans>,
  gate: StoreGate,
  storedChanged: () => void,
  /** Holds kept elsewhere (the workers' primary): the price is held there first, so no request spends it meanwhile. */
  holdForPurchase?: (accountId: string, price: number) => Promise<{ release(): void }>,
): PlanStore {
  return {
    async purchasePlan(purchase) {
      gate.assertOpen();
      let hold: { release(): void } | null = null;
      if (holdForPurchase && purchase.funding === "balance") {
        failClosed(() => plans.checkBuyable(purchase));
        hold = await holdForPurchase(purchase.accountId, purchase.price);
      }
      try {
        return plans.purchasePlan(purchase);
      } finally {
        hold?.release();
        storedChanged();
      }
    },

    async activePlan(accountId, at) {
      gate.assertOpen();
      return failClosed(() => plans.activePlan(accountId, at));
    },
  };
}
