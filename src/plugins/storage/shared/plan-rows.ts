import type { PlanCycle } from "../repository.ts";

/** An `account_plans` row as either driver returns it: SQLite gives numbers and 0/1, Postgres int8 strings and booleans. */
export interface PlanRow {
  id: string;
  account_id: string;
  plan: string;
  funding: string;
  price_nano: number | string;
  started_at: number | string;
  ends_at: number | string;
  renewing: number | boolean;
}

export function toCycle(row: PlanRow): PlanCycle {
  return {
    id: row.id,
    accountId: row.account_id,
    plan: row.plan,
    funding: row.funding as PlanCycle["funding"],
    price: Number(row.price_nano),
    startedAt: Number(row.started_at),
    endsAt: Number(row.ends_at),
    renewing: row.renewing === true || row.renewing === 1,
  };
}
