import type { Database } from "bun:sqlite";
import type { Funds, ReservationInput } from "../repository.ts";
import { spendBucketStart } from "./metering-writer.ts";

/**
 * Budget reservations on SQLite. `reserve` runs in one IMMEDIATE transaction (the write lock), so
 * concurrent requests, from this process or another on the same file, see each other's holds.
 * Available funds = credits − committed debits − reservations; a request's reservation is deleted in
 * the group commit that writes its debit (metering-writer), so pending debits are always covered.
 */
export function createSqliteReservations(client: Database) {
  const accountAvailable = client.prepare<{ available: number }, [string, string]>(
    `select a.total_credits_nano - a.total_debits_nano
            - coalesce((select sum(r.amount_nano) from reservations r where r.account_id = ?), 0) as available
       from accounts a where a.id = ?`,
  );
  const keyAvailable = client.prepare<{ available: number | null }, [string, string]>(
    `select k.limit_nano - k.usage_nano
            - coalesce((select sum(r.amount_nano) from reservations r where r.key_id = ?), 0) as available
       from api_keys k where k.id = ?`,
  );
  const windowSpend = client.prepare<{ spent: number; oldest: number | null }, [string, number]>(
    `select coalesce(sum(cost_nano), 0) as spent, min(bucket_start) as oldest from spend_buckets where account_id = ? and bucket_start >= ?`,
  );
  const accountReserved = client.prepare<{ reserved: number }, [string]>(
    `select coalesce(sum(amount_nano), 0) as reserved from reservations where account_id = ?`,
  );
  const insert = client.prepare(
    `insert into reservations (id, account_id, key_id, amount_nano, instance_id, created_at) values (?, ?, ?, ?, ?, ?)`,
  );
  const remove = client.prepare(`delete from reservations where id = ?`);
  const heartbeat = client.prepare(
    `insert into gateway_instances (id, heartbeat_at) values (?, ?) on conflict (id) do update set heartbeat_at = excluded.heartbeat_at`,
  );
  const releaseStale = client.prepare(
    `delete from reservations where instance_id not in (select id from gateway_instances where heartbeat_at >= ?)`,
  );
  const forgetStale = client.prepare(`delete from gateway_instances where heartbeat_at < ?`);
  const releaseInstance = client.prepare(`delete from reservations where instance_id = ?`);
  const forgetInstance = client.prepare(`delete from gateway_instances where id = ?`);

  const reserveTransaction = client.transaction((input: ReservationInput, decide: (funds: Funds) => number): number => {
    const account = accountAvailable.get(input.accountId, input.accountId)?.available ?? 0;
    const key = input.keyLimited ? (keyAvailable.get(input.keyId, input.keyId)?.available ?? 0) : null;
    const windows: Funds["windows"] = {};
    if (input.windows) {
      const reserved = accountReserved.get(input.accountId)?.reserved ?? 0;
      for (const [name, start] of Object.entries(input.windows)) {
        // Whole buckets from the one holding the window's start: never under-counts.
        const row = windowSpend.get(input.accountId, spendBucketStart(start));
        windows[name] = { spent: (row?.spent ?? 0) + reserved, oldestAt: row?.oldest ?? null };
      }
    }
    const amount = decide({ account, key, windows });
    if (amount > 0) insert.run(input.id, input.accountId, input.keyId, amount, input.instanceId, input.createdAt);
    return amount;
  });

  return {
    reserve(input: ReservationInput, decide: (funds: Funds) => number): number {
      return reserveTransaction.immediate(input, decide);
    },
    releaseReservation(id: string): void {
      remove.run(id);
    },
    heartbeat(instanceId: string, now: number): void {
      heartbeat.run(instanceId, now);
    },
    releaseStaleReservations(aliveSince: number): number {
      return client.transaction(() => {
        const released = releaseStale.run(aliveSince).changes;
        forgetStale.run(aliveSince);
        return released;
      }).immediate();
    },
    removeInstance(instanceId: string): void {
      client.transaction(() => {
        releaseInstance.run(instanceId);
        forgetInstance.run(instanceId);
      }).immediate();
    },
  };
}
