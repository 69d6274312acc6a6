import type { SQL } from "bun";
import type { Generation } from "../repository.ts";
import { attemptsText, storedRequestedModel } from "../rows.ts";
import { addToSpend, type SpendBucket } from "../shared/spend-buckets.ts";
import { addToCounters, emptyCounters, utcDay } from "../shared/pending.ts";
import { pipelinedTransaction } from "./pipeline.ts";

/**
 * Each statement takes the whole batch as arrays (`unnest`), and the statements are pipelined, so a
 * batch costs two round trips (BEGIN + reservations and generations; the rest + COMMIT), not a
 * few per generation. Rows another transaction may also lock are locked or upserted in key order, in one
 * global order: roll-ups, spend buckets, accounts, keys. So two gateways' batches never deadlock, and
 * accounts come before keys as in `reserve`; they come LAST, so the rows every reservation waits on
 * are held for one round trip and the COMMIT only.
 */
/**
 * The head of the batch in ONE statement: its reservations go; its generations are inserted unless
 * already stored (a request is metered once, a retried batch is harmless). A generation with a cost
 * is its own usage debit in the ledger (schema.ts). Returns the ids inserted.
 */
const STORE_GENERATIONS = `
with released as (delete from reservations where id = any($1::text[])),
stored as (
  insert into generations (id, response_id, account_id, key_id, model, provider, ingress, stream, status, error_code,
    created_at, latency_ms, time_to_first_token_ms, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens,
    reasoning_tokens, input_cost_nano, cache_read_cost_nano, cache_write_cost_nano, output_cost_nano, total_cost_nano,
    unbilled_cost_nano, usage_estimated, attempts, cache_write_1h_tokens, cache_discount_nano, requested_model)
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[],
    $9::text[], $10::text[], $11::bigint[], $12::integer[], $13::integer[], $14::integer[], $15::integer[], $16::integer[],
    $17::integer[], $18::integer[], $19::bigint[], $20::bigint[], $21::bigint[], $22::bigint[], $23::bigint[],
    $24::bigint[], $25::boolean[], $26::text[], $27::integer[], $28::bigint[], $29::text[])
  on conflict (id) do nothing
  returning id
)
select id from stored`;

const LOCK_ACCOUNTS = `select id from accounts where id = any($1::text[]) order by id for no key update`;
const ADD_ACCOUNT_DEBITS = `
update accounts a set total_debits_nano = a.total_debits_nano + v.amount
  from unnest($1::text[], $2::bigint[]) as v(id, amount) where a.id = v.id`;

const LOCK_KEYS = `select id from api_keys where id = any($1::text[]) order by id for no key update`;
const ADD_KEY_USAGE = `
update api_keys k set usage_nano = k.usage_nano + v.amount
  from unnest($1::text[], $2::bigint[]) as v(id, amount) where k.id = v.id`;

const UPSERT_USAGE = `
insert into usage_daily (account_id, key_id, day, model, cost_nano, requests, successful_requests, failed_requests,
  prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens)
select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
  $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[]) order by 1, 2, 3, 4
on conflict (account_id, key_id, day, model) do update set
  cost_nano = usage_daily.cost_nano + excluded.cost_nano,
  requests = usage_daily.requests + excluded.requests,
  successful_requests = usage_daily.successful_requests + excluded.successful_requests,
  failed_requests = usage_daily.failed_requests + excluded.failed_requests,
  prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
  completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,
  cached_tokens = usage_daily.cached_tokens + excluded.cached_tokens,
  cache_write_tokens = usage_daily.cache_write_tokens + excluded.cache_write_tokens`;

const UPSERT_SPEND = `
insert into spend_buckets (account_id, bucket_start, cost_nano)
select * from unnest($1::text[], $2::bigint[], $3::bigint[]) order by 1, 2
on conflict (account_id, bucket_start) do update set cost_nano = spend_buckets.cost_nano + excluded.cost_nano`;

function sumInto(map: Map<string, number>, key: string, amount: number): void {
  map.set(key, (map.get(key) ?? 0) + amount);
}

/** Keys sorted, values in the same order: the two arrays of an `unnest`. */
function sortedColumns(map: Map<string, number>): [string[], number[]] {
  const keys = [...map.keys()].sort();
  return [keys, keys.map((key) => map.get(key)!)];
}

/**
 * Writes a batch of generations in ONE transaction: the batch's reservations go, and per new
 * generation its row (its usage debit in the ledger); per account, key, (account, key, day, model) and
 * (account, 5-minute bucket) one aggregated update. A generation id already stored is skipped whole
 * (on conflict do nothing): a request is never debited twice, and a retried batch is harmless.
 */
export function createMeteringWriter(client: SQL) {
  async function write(batch: readonly Generation[]): Promise<void> {
    await pipelinedTransaction(client, async (transaction) => {
      const [insertedRows] = (await transaction.run([storeGenerations(transaction.sql, batch)])) as [{ id: string }[]];
      if (insertedRows.length === 0) return;
      const fresh = insertedRows.length === batch.length ? batch : batch.filter((g) => inserted(insertedRows).has(g.id));
      await transaction.commit(tailStatements(transaction.sql, aggregate(fresh)));
    });
  }
  return { write };
}

/** The head of the transaction: the batch's reservations go, its generations are inserted (STORE_GENERATIONS). */
function storeGenerations(tx: SQL, batch: readonly Generation[]): PromiseLike<unknown> {
  return tx.unsafe(STORE_GENERATIONS, [
    batch.map((g) => g.id),
    batch.map((g) => g.responseId),
    batch.map((g) => g.accountId),
    batch.map((g) => g.keyId),
    batch.map((g) => g.model),
    batch.map((g) => g.provider),
    batch.map((g) => g.ingress),
    batch.map((g) => g.stream),
    batch.map((g) => g.status),
    batch.map((g) => g.errorCode),
    batch.map((g) => g.createdAt),
    batch.map((g) => g.latencyMs),
    batch.map((g) => g.timeToFirstTokenMs),
    batch.map((g) => g.promptTokens),
    batch.map((g) => g.completionTokens),
    batch.map((g) => g.cachedTokens),
    batch.map((g) => g.cacheWriteTokens),
    batch.map((g) => g.reasoningTokens),
    batch.map((g) => g.inputCost),
    batch.map((g) => g.cacheReadCost),
    batch.map((g) => g.cacheWriteCost),
    batch.map((g) => g.outputCost),
    batch.map((g) => g.totalCost),
    batch.map((g) => g.unbilledCost ?? 0),
    batch.map((g) => g.usageEstimated === true),
    batch.map((g) => attemptsText(g.attempts)),
    batch.map((g) => g.cacheWrite1hTokens ?? 0),
    batch.map((g) => g.cacheDiscount ?? 0),
    batch.map((g) => storedRequestedModel(g)),
  ]);
}

/** The newly stored generations summed per account, key, spend bucket and (account, key, day, model). */
function aggregate(fresh: readonly Generation[]) {
  const debited = fresh.filter((g) => g.totalCost > 0);
  const accountDebits = new Map<string, number>();
  const keyUsage = new Map<string, number>();
  const spend = new Map<string, SpendBucket>();
  for (const g of debited) {
    sumInto(accountDebits, g.accountId, g.totalCost);
    sumInto(keyUsage, g.keyId, g.totalCost);
    addToSpend(spend, g);
  }
  const usage = new Map<string, ReturnType<typeof usageBucket>>();
  for (const g of fresh) {
    const day = utcDay(g.createdAt);
    const bucketKey = g.accountId + "\u0000" + g.keyId + "\u0000" + day + "\u0000" + g.model;
    let bucket = usage.get(bucketKey);
    if (bucket === undefined) usage.set(bucketKey, (bucket = usageBucket(g.accountId, g.keyId, day, g.model)));
    addToCounters(bucket, g);
  }
  return { debited, accountDebits, keyUsage, spend, usage };
}

/**
 * Everything else, to go with the COMMIT in one round trip, the contended rows last: the roll-ups
 * (sorted), then the account rows (sorted) and the key rows (sorted), so the locks that the
 * reservations of every gateway wait on are held only while the server runs the tail.
 */
function tailStatements(tx: SQL, { debited, accountDebits, keyUsage, spend, usage }: ReturnType<typeof aggregate>): PromiseLike<unknown>[] {
  const buckets = [...usage.values()];
  const statements: PromiseLike<unknown>[] = [
    tx.unsafe(UPSERT_USAGE, [
      buckets.map((b) => b.accountId),
      buckets.map((b) => b.keyId),
      buckets.map((b) => b.day),
      buckets.map((b) => b.model),
      buckets.map((b) => b.cost),
      buckets.map((b) => b.requests),
      buckets.map((b) => b.successfulRequests),
      buckets.map((b) => b.failedRequests),
      buckets.map((b) => b.promptTokens),
      buckets.map((b) => b.completionTokens),
      buckets.map((b) => b.cachedTokens),
      buckets.map((b) => b.cacheWriteTokens),
    ]),
  ];
  if (spend.size > 0) {
    const spent = [...spend.values()];
    statements.push(tx.unsafe(UPSERT_SPEND, [spent.map((s) => s.accountId), spent.map((s) => s.bucketStart), spent.map((s) => s.cost)]));
  }
  if (debited.length > 0) {
    const [accountIds, accountAmounts] = sortedColumns(accountDebits);
    const [keyIds, keyAmounts] = sortedColumns(keyUsage);
    statements.push(
      tx.unsafe(LOCK_ACCOUNTS, [accountIds]),
      tx.unsafe(ADD_ACCOUNT_DEBITS, [accountIds, accountAmounts]),
      tx.unsafe(LOCK_KEYS, [keyIds]),
      tx.unsafe(ADD_KEY_USAGE, [keyIds, keyAmounts]),
    );
  }
  return statements;
}

function inserted(rows: readonly { id: string }[]): Set<string> {
  return new Set(rows.map((row) => row.id));
}

function usageBucket(accountId: string, keyId: string, day: string, model: string) {
  return { accountId, keyId, day, model, ...emptyCounters() };
}
