import type { SQL } from "bun";
import type { Funds, ReservationInput } from "../repository.ts";
import { spendBucketStart } from "../sqlite/metering-writer.ts";
import type { PendingGenerations } from "../sqlite/pending.ts";
import { notStored, num, numOrNull, storedIdsSql } from "./overlay.ts";

type Tx = SQL;

/**
 * Funds in ONE statement (one snapshot): balance and holds of the account, room and holds of the key,
 * spend per window, plus which of this process's queued generations are already stored and the holds
 * of those that are not.
 */
const FUNDS = `
select
  (select total_credits_nano - total_debits_nano from accounts where id = $1) as balance,
  (select coalesce(sum(amount_nano), 0) from reservations where account_id = $1) as account_held,
  (select limit_nano - usage_nano from api_keys where id = $2) as key_room,
  (select coalesce(sum(amount_nano), 0) from reservations where key_id = $2) as key_held,
  ${storedIdsSql("$3")} as stored,
  coalesce((select json_agg(json_build_array(id, account_id, key_id, amount_nano))
              from reservations where id = any($3::text[])), '[]') as queued_holds,
  coalesce((select json_agg(json_build_array(s.spent, s.oldest) order by w.ord)
              from unnest($4::bigint[]) with ordinality as w(start, ord)
              cross join lateral (select coalesce(sum(cost_nano), 0) as spent, min(bucket_start) as oldest
                                    from spend_buckets where account_id = $1 and bucket_start >= w.start) s), '[]') as windows`;

export interface FundsScope {
  accountId: string;
  /** The key whose budget is checked, or null. */
  keyId: string | null;
  windows?: Record<string, number>;
}

export interface FundsRead extends Funds {
  /** credits − debits, this process's queued debits included. */
  balance: number;
}

/**
 * What a new reservation may use, as if this process's queued generations were already written: each
 * queued request counts with its exact cost instead of its hold (the commit swaps one for the other).
 * Call it after locking the account (and key) row, in the same transaction as the insert.
 */
export async function readFunds(tx: Tx, pending: PendingGenerations, scope: FundsScope): Promise<FundsRead> {
  const { accountId, keyId } = scope;
  const queued = pending.queue.filter((g) => g.accountId === accountId || (keyId !== null && g.keyId === keyId));
  const windowEntries = Object.entries(scope.windows ?? {}).map(([name, start]) => [name, spendBucketStart(start)] as const);
  const [row] = await tx.unsafe(FUNDS, [accountId, keyId ?? "", queued.map((g) => g.id), windowEntries.map(([, start]) => start)]);
  const stored: string[] = row.stored;
  const storedSet = new Set(stored);
  const missing = notStored(queued, stored);

  const hasAccount = row.balance !== null;
  let balance = num(row.balance);
  let accountHeld = num(row.account_held);
  let key = keyId === null || row.key_room === null ? null : Number(row.key_room) - num(row.key_held);
  const spent = windowEntries.map((_, i) => num(row.windows[i]?.[0]));
  const oldest = windowEntries.map((_, i) => numOrNull(row.windows[i]?.[1]));

  for (const g of missing) {
    if (g.accountId === accountId) {
      balance -= g.totalCost;
      if (g.totalCost > 0) {
        const bucket = spendBucketStart(g.createdAt);
        windowEntries.forEach(([, start], i) => {
          if (bucket < start) return;
          spent[i] += g.totalCost;
          oldest[i] = oldest[i] === null ? bucket : Math.min(oldest[i]!, bucket);
        });
      }
    }
    if (key !== null && g.keyId === keyId) key -= g.totalCost;
  }
  for (const [id, holdAccount, holdKey, amount] of row.queued_holds as [string, string, string, number][]) {
    if (storedSet.has(id)) continue;
    if (holdAccount === accountId) accountHeld -= Number(amount);
    if (key !== null && holdKey === keyId) key += Number(amount);
  }

  const windows: Funds["windows"] = {};
  windowEntries.forEach(([name], i) => {
    windows[name] = { spent: spent[i] + accountHeld, oldestAt: oldest[i] };
  });
  return { balance, account: hasAccount ? balance - accountHeld : 0, key: keyId === null ? null : (key ?? 0), windows };
}

/**
 * Budget reservations on Postgres. `reserve` is one READ COMMITTED transaction: lock the account row
 * (and the key row when the key has a budget) with FOR NO KEY UPDATE, then read the funds in a NEW
 * statement, whose snapshot is taken after the lock, so it sees every hold committed by the previous
 * holder; decide; insert. Reservations of the same account, from any process, run one at a time.
 */
export function createPostgresReservations(client: SQL, pending: PendingGenerations) {
  return {
    async reserve(input: ReservationInput, decide: (funds: Funds) => number): Promise<number> {
      return client.begin(async (tx) => {
        await tx.unsafe(`select 1 from accounts where id = $1 for no key update`, [input.accountId]);
        if (input.keyLimited) await tx.unsafe(`select 1 from api_keys where id = $1 for no key update`, [input.keyId]);
        const funds = await readFunds(tx, pending, {
          accountId: input.accountId,
          keyId: input.keyLimited ? input.keyId : null,
          windows: input.windows,
        });
        const amount = decide({ account: funds.account, key: funds.key, windows: funds.windows });
        if (amount > 0) {
          await tx.unsafe(
            `insert into reservations (id, account_id, key_id, amount_nano, instance_id, created_at) values ($1, $2, $3, $4, $5, $6)`,
            [input.id, input.accountId, input.keyId, amount, input.instanceId, input.createdAt],
          );
        }
        return amount;
      });
    },

    async releaseReservation(id: string): Promise<void> {
      await client.unsafe(`delete from reservations where id = $1`, [id]);
    },

    async heartbeat(instanceId: string, now: number): Promise<void> {
      await client.unsafe(
        `insert into gateway_instances (id, heartbeat_at) values ($1, $2)
           on conflict (id) do update set heartbeat_at = excluded.heartbeat_at`,
        [instanceId, now],
      );
    },

    async releaseStaleReservations(aliveSince: number): Promise<number> {
      return client.begin(async (tx) => {
        const released = await tx.unsafe(
          `delete from reservations where instance_id not in (select id from gateway_instances where heartbeat_at >= $1)`,
          [aliveSince],
        );
        await tx.unsafe(`delete from gateway_instances where heartbeat_at < $1`, [aliveSince]);
        return released.count;
      });
    },

    async removeInstance(instanceId: string): Promise<void> {
      await client.begin(async (tx) => {
        await tx.unsafe(`delete from reservations where instance_id = $1`, [instanceId]);
        await tx.unsafe(`delete from gateway_instances where id = $1`, [instanceId]);
      });
    },
  };
}
