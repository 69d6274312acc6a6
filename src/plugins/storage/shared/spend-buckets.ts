import type { Generation } from "../repository.ts";

/** Spend windows count spend in 5-minute buckets by request start. */
export const SPEND_BUCKET_MS = 5 * 60 * 1000;

export function spendBucketStart(ms: number): number {
  return ms - (ms % SPEND_BUCKET_MS);
}

/** One (account, 5-minute bucket) of a batch's spend, summed before it is written. */
export interface SpendBucket {
  accountId: string;
  bucketStart: number;
  cost: number;
}

/** Adds a charged generation to its batch's spend buckets (keyed by account and bucket). */
export function addToSpend(spend: Map<string, SpendBucket>, g: Generation): void {
  const bucketStart = spendBucketStart(g.createdAt);
  const spendKey = g.accountId + "\u0000" + bucketStart;
  const bucket = spend.get(spendKey);
  if (bucket) bucket.cost += g.totalCost;
  else spend.set(spendKey, { accountId: g.accountId, bucketStart, cost: g.totalCost });
}
