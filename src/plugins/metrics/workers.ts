import { AggregatorRegistry } from "prom-client";
import type { PrimaryHost, WorkerLink } from "../../core/workers.ts";
import type { MetricsJSON } from "./registry.ts";

/**
 * Several workers (core/primary.ts): GET /metrics is answered by whichever worker the kernel handed the
 * connection, with the metrics of all of them. That worker calls the primary (`COLLECT`) with the gauges it read
 * from the store; the primary asks every worker for its registry as JSON (`LOCAL`), merges them with prom-client's
 * AggregatorRegistry.aggregate (each metric by its `aggregator`: sum unless it says otherwise) and answers the text.
 */
export const COLLECT = "metrics.collect";
export const LOCAL = "metrics.local";

/** "metrics.collect" payload → the merged exposition (string). */
export interface CollectPayload {
  /** The gauges read from the shared store (the same in every worker): only the asking worker's, just refreshed. */
  store: MetricsJSON;
}

/** A worker that does not answer within this time is left out of the scrape (gateway_workers says how many answered). */
const ASK_TIMEOUT_MS = 1_000;
/** The asking worker waits for the primary's ask and its merge. */
const COLLECT_TIMEOUT_MS = ASK_TIMEOUT_MS + 2_000;

/** The primary's part: gathers every worker's metrics and merges them. */
export function serveMergedMetrics(host: PrimaryHost): void {
  host.serve(COLLECT, async (payload) => {
    const workers = await host.askAll<MetricsJSON>(LOCAL, null, ASK_TIMEOUT_MS);
    return AggregatorRegistry.aggregate([...workers, (payload as CollectPayload).store]).metrics();
  });
}

/** A worker's side: answers the primary with its own metrics (store gauges left out), and asks it for all of them. */
export function mergedMetrics(link: WorkerLink, local: () => Promise<MetricsJSON>): (store: MetricsJSON) => Promise<string> {
  link.answer(LOCAL, local);
  return (store) => link.call<string>(COLLECT, { store } satisfies CollectPayload, COLLECT_TIMEOUT_MS);
}
