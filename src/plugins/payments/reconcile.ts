import { UpstreamError } from "../../core/errors.ts";
import { nanoToUsd, type NanoUsd } from "../../core/money.ts";
import type { PaymentStore, Topup } from "../storage/repository.ts";
import type { PaymentProcessor, ProcessorRecord } from "./processor.ts";
import { wasCredited } from "./views.ts";

export type DifferenceKind = "paid_not_credited" | "credited_not_paid" | "amount_differs" | "returned_not_taken_back";

export interface Difference {
  payment_ref: string | null;
  topup_id: string | null;
  kind: DifferenceKind;
  /** USD as the processor has it (paid, or returned for returned_not_taken_back); null when it has no record. */
  processor_amount: number | null;
  /** USD as our records have it (credited, or taken back). */
  our_amount: number;
}

export interface ProcessorReport {
  name: string;
  /** The processor's payments since `since`. */
  records: number;
  differences: Difference[];
}

/**
 * Compares a processor's own payments since `since` with our top-ups and the events we applied:
 * - paid_not_credited: the processor was paid and our top-up is not credited (missing, pending, flagged);
 * - amount_differs: credited, but our amount is not what the processor was paid;
 * - returned_not_taken_back: the processor gave back (refunds, lost disputes) more than we took back;
 * - credited_not_paid: we credited (an event of this processor since `since`) a payment the processor does not list.
 */
export async function reconcileProcessor(processor: PaymentProcessor & { records: (since: number) => Promise<ProcessorRecord[]> }, store: PaymentStore, since: number): Promise<ProcessorReport> {
  let records: ProcessorRecord[];
  try {
    records = await processor.records(since);
  } catch (error) {
    throw new UpstreamError(`could not read the payments of ${processor.name}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const differences: Difference[] = [];
  const seenRefs = new Set<string>();
  const seenTopups = new Set<string>();
  for (const record of records) {
    seenRefs.add(record.paymentRef);
    const topup = (record.topupId ? await store.getTopup(record.topupId) : null) ?? (await store.findTopupByPaymentRef(record.paymentRef));
    if (topup) seenTopups.add(topup.id);
    const base = { payment_ref: record.paymentRef, topup_id: topup?.id ?? record.topupId };
    if (!topup || !wasCredited(topup)) {
      differences.push({ ...base, kind: "paid_not_credited", processor_amount: usd(record.amount), our_amount: 0 });
      continue;
    }
    if (topup.amount !== record.amount) differences.push({ ...base, kind: "amount_differs", processor_amount: usd(record.amount), our_amount: usd(topup.amount) });
    if (record.returned > topup.takenBack) {
      differences.push({ ...base, kind: "returned_not_taken_back", processor_amount: usd(record.returned), our_amount: usd(topup.takenBack) });
    }
  }
  // Our credits through this processor's events since `since` whose payment the processor did not list.
  const events = await store.listPaymentEvents(since, processor.name);
  const checked = new Set<string>();
  for (const event of events) {
    if (event.amount <= 0 || !event.topupId || checked.has(event.topupId) || seenTopups.has(event.topupId)) continue;
    checked.add(event.topupId);
    const topup: Topup | null = await store.getTopup(event.topupId);
    if (topup?.paymentRef && seenRefs.has(topup.paymentRef)) continue;
    differences.push({
      payment_ref: topup?.paymentRef ?? null,
      topup_id: event.topupId,
      kind: "credited_not_paid",
      processor_amount: null,
      our_amount: usd(topup?.amount ?? event.amount),
    });
  }
  return { name: processor.name, records: records.length, differences };
}

function usd(nano: NanoUsd): number {
  return nanoToUsd(nano);
}
