import type { SQL } from "bun";
import { InsufficientFundsError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import { cycleOf } from "../rows.ts";
import { toCycle, type PlanRow } from "../shared/plan-rows.ts";
import { nanoToUsdString } from "../../../core/money.ts";
import type { PlanCycle, PlanPurchase, PlanStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { guard } from "./errors.ts";
import { newId } from "../shared/ids.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import { readFunds } from "./reservations.ts";

const INSERT_ENTRY = `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at) values ($1, $2, $3, $4, $5, null, $6)`;

/**
 * Plan cycles: a balance-funded purchase debits the price (once per account); any purchase credits
 * the plan's bonus. One transaction holding the account row (FOR NO KEY UPDATE), so two gateways
 * cannot both fund a cycle from the same balance, nor spend it while a reservation is being decided.
 */
export function createPostgresPlans(client: SQL, pending: PendingGenerations) {
  /** The purchase's writes inside the caller's transaction; `subscriptionRef`: the subscription paying a card-funded cycle. The balance after it. */
  async function buy(tx: SQL, p: PlanPurchase, subscriptionRef: string | null): Promise<number> {
    const locked = await tx.unsafe(`select 1 from accounts where id = $1 for no key update`, [p.accountId]);
    if (locked.length === 0) throw new RecordNotFoundError(`no account "${p.accountId}"`);
    const funds = await readFunds(tx, pending, { accountId: p.accountId, keyId: null });
    let after = funds.balance;
    if (p.funding === "balance") {
      const funded = await tx.unsafe(`select 1 from account_plans where account_id = $1 and funding = 'balance' limit 1`, [p.accountId]);
      if (funded.length > 0) {
        throw new RecordConflictError("this account already funded a plan cycle from its balance (once per account); recurring plans need card funding");
      }
      if (funds.account < p.price) {
        throw new InsufficientFundsError(
          `the plan costs $${nanoToUsdString(p.price)} and the available balance is $${nanoToUsdString(Math.max(0, funds.account))}; top up first`,
        );
      }
      await tx.unsafe(INSERT_ENTRY, [newId("le"), p.accountId, "plan", -p.price, `plan:${p.id}`, p.startedAt]);
      await tx.unsafe(`update accounts set total_debits_nano = total_debits_nano + $1 where id = $2`, [p.price, p.accountId]);
      after -= p.price;
    }
    if (p.bonus > 0) {
      await tx.unsafe(INSERT_ENTRY, [newId("le"), p.accountId, "bonus", p.bonus, `plan:${p.id}:bonus`, p.startedAt]);
      await tx.unsafe(`update accounts set total_credits_nano = total_credits_nano + $1 where id = $2`, [p.bonus, p.accountId]);
      after += p.bonus;
    }
    await tx.unsafe(
      `insert into account_plans (id, account_id, plan, funding, price_nano, started_at, ends_at, renewing, subscription_ref) values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [p.id, p.accountId, p.plan, p.funding, p.price, p.startedAt, p.endsAt, p.renewing, subscriptionRef],
    );
    return after;
  }

  return {
    /** A purchase inside a transaction the caller holds (a subscription's cycle, payments.ts). */
    buyInTransaction: buy,

    async purchasePlan(p: PlanPurchase): Promise<{ cycle: PlanCycle; balance: number }> {
      const balance = await client.begin((tx) => buy(tx, p, null));
      return {
        cycle: cycleOf(p),
        balance,
      };
    },

    async activePlan(accountId: string, at: number): Promise<PlanCycle | null> {
      const [row] = await client.unsafe<PlanRow[]>(
        `select * from account_plans where account_id = $1 and started_at <= $2 and (ends_at > $2 or renewing) order by started_at desc limit 1`,
        [accountId, at],
      );
      return row ? toCycle(row) : null;
    },
  };
}

/** The plan slice of the store, store failures as `UnavailableError`. */
export function postgresPlanStore(plans: ReturnType<typeof createPostgresPlans>, gate: StoreGate): PlanStore {
  return {
    purchasePlan: (purchase) =>
      guard(async () => {
        gate.assertOpen();
        return plans.purchasePlan(purchase);
      }),

    activePlan: (accountId, at) =>
      guard(async () => {
        gate.assertOpen();
        return plans.activePlan(accountId, at);
      }),
  };
}
