import type { Logger } from "../../core/log.ts";
import type { PaymentsService } from "../payments/processor.ts";
import type { PaymentStore, SettingsStore } from "../storage/repository.ts";
import { matchTransfer, microToDecimal, type MatchRules, type SeenTransfer } from "./matcher.ts";

/**
 * Polls a receiving address for confirmed token transfers and credits the top-ups they pay, each transfer once.
 * Network-agnostic: the network's module supplies a TransferSource (TRON: TronGrid's TRC-20 transfers).
 *
 * Once per transfer, whatever repeats: the credit is a payment event whose id is the transaction's
 * ("tron:<tx>"), applied by the store once in the credit's own transaction; an unmatched transfer is recorded once
 * per id; before recording one as unmatched the poller checks that no top-up was paid by it (another instance, an
 * earlier process). A transfer is remembered as handled only once its outcome is stored: when the store or the
 * API fails, the next poll sees it again.
 */

/** The confirmed transfers to the receiving address since a time (a network's module implements it). */
export interface TransferSource {
  transfersSince(since: number): Promise<{ transfers: SeenTransfer[]; malformed: number; truncated: boolean }>;
}

export interface PollerOptions {
  /** "tron": the top-ups' `network`. */
  network: string;
  /** "tron": the payment events' processor (their ids are "<processor>:<tx>"). */
  processor: string;
  /** The payment event type ("trc20.transfer"). */
  eventType: string;
  /** The receiving address. */
  address: string;
  source: TransferSource;
  store: Pick<PaymentStore, "openTopupsTo" | "findTopupByPaymentRef" | "recordUnmatchedTransfer"> & Pick<SettingsStore, "getSetting" | "setSetting">;
  payments: Pick<PaymentsService, "apply">;
  rules: MatchRules;
  /** How long a top-up's amount stays reserved (its expiry). */
  invoiceMs: number;
  pollMs: number;
  /** The settings row that keeps where the last complete poll started (shared by every instance). */
  cursorSetting: string;
  /** Each poll reads back this far behind the cursor: a block's transfer solidifies after its block time. */
  marginMs: number;
  now: () => number;
  log: Logger;
}

/** What one poll did. */
export interface PollSummary {
  /** False when the API or the store failed: logged, retried at the next poll. */
  ok: boolean;
  /** The window's start (epoch ms). */
  since: number;
  /** Transfers read (all pages). */
  seen: number;
  /** Top-ups credited by this poll. */
  credited: number;
  /** Transfers recorded as unmatched by this poll. */
  unmatched: number;
  /** Why the poll was not ok. */
  error?: string;
}

export interface Poller {
  /** One poll now (after the one in flight, if any). Never throws: failures are in the summary and the log. */
  pollOnce(): Promise<PollSummary>;
  /** Polls every `pollMs` (an unref'd timer: it keeps no process alive). */
  start(): void;
  /** Stops the timer and waits for a poll in flight. */
  close(): Promise<void>;
}

const CANDIDATES_LOOKBACK_MS = 24 * 3_600_000;

export function createPoller(options: PollerOptions): Poller {
  const { store, log, now } = options;
  /** Transfers whose outcome is stored, by id → block time; forgotten once older than every window read. */
  const handled = new Map<string, number>();
  let chain: Promise<unknown> = Promise.resolve();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;

  function pollOnce(): Promise<PollSummary> {
    const next = chain.then(poll);
    chain = next.catch(() => undefined);
    return next;
  }

  async function poll(): Promise<PollSummary> {
    const started = now();
    let since = started;
    const summary = (fields: Partial<PollSummary>): PollSummary => ({ ok: true, since, seen: 0, credited: 0, unmatched: 0, ...fields });
    try {
      const open = await store.openTopupsTo(options.network, options.address, started);
      const cursor = parseCursor(await store.getSetting(options.cursorSetting));
      const oldestOpen = open.reduce((oldest, topup) => Math.min(oldest, topup.createdAt), Number.POSITIVE_INFINITY);
      // From the last complete poll (first start: one invoice period back), or the oldest open top-up if older.
      since = Math.max(0, Math.min(cursor ?? started - options.invoiceMs, oldestOpen) - options.marginMs);
      const read = await options.source.transfersSince(since);
      if (read.malformed > 0) log.warn("transfers skipped: malformed rows in the API's answer", { malformed: read.malformed });
      if (read.truncated) log.error("too many transfers in the window: the oldest were not read; the cursor stays", { since });
      // Pending top-ups that were open at any time of the window or up to a day before (so that a late payment is
      // named "after expiry" while the top-up is still pending, not yet expired by the payments core's sweep).
      const candidates = await store.openTopupsTo(options.network, options.address, since - Math.max(options.invoiceMs, CANDIDATES_LOOKBACK_MS));
      const transfers = [...read.transfers].sort((a, b) => a.at - b.at || a.id.localeCompare(b.id));
      let credited = 0;
      let unmatched = 0;
      let failures = 0;
      for (const transfer of transfers) {
        if (transfer.to !== options.address || handled.has(transfer.id)) continue;
        try {
          const outcome = await handle(transfer, candidates);
          if (outcome === "credited") credited++;
          if (outcome === "unmatched") unmatched++;
          handled.set(transfer.id, transfer.at);
        } catch (error) {
          failures++;
          log.error("transfer not handled: retried at the next poll", { transfer: transfer.id, error: String((error as Error)?.message ?? error) });
        }
      }
      for (const [id, at] of handled) if (at < since - options.marginMs) handled.delete(id);
      if (failures > 0) return summary({ ok: false, seen: transfers.length, credited, unmatched, error: `${failures} transfers not handled` });
      if (!read.truncated) await store.setSetting(options.cursorSetting, String(started));
      return summary({ seen: transfers.length, credited, unmatched });
    } catch (error) {
      const message = String((error as Error)?.message ?? error);
      log.error("poll failed: retried at the next poll", { error: message });
      return summary({ ok: false, error: message });
    }
  }

  /** One transfer's outcome, stored: "credited", "unmatched", or "known" (its outcome was stored before). */
  async function handle(transfer: SeenTransfer, candidates: Parameters<typeof matchTransfer>[1]): Promise<"credited" | "unmatched" | "known"> {
    const match = matchTransfer(transfer, candidates, options.rules);
    if (match.kind === "credit") {
      const result = await options.payments.apply(
        { id: transfer.id, processor: options.processor, type: options.eventType, receivedAt: now() },
        { kind: "credit", topupId: match.topupId, paymentRef: transfer.id },
      );
      if (result.applied && result.amount > 0) {
        log.info("top-up credited", { topup: match.topupId, transfer: transfer.id, amount: microToDecimal(match.amountMicro), from: transfer.from });
        return "credited";
      }
      // Applied before (another instance, an earlier poll): nothing more to do. Otherwise the event is recorded
      // but the top-up was no longer payable (expired meanwhile): the money is the operator's to sort out.
      if (result.topup?.paymentRef === transfer.id) return "known";
      const reason = `${microToDecimal(match.amountMicro)} ${options.rules.token.symbol} for top-up ${match.topupId}, which was ${result.topup?.status ?? "gone"} when it was applied`;
      return (await record(transfer, match.amountMicro, reason)) ? "unmatched" : "known";
    }
    // Not payable now, perhaps because it paid a top-up already (then the top-up is no longer pending).
    if (await store.findTopupByPaymentRef(transfer.id)) return "known";
    return (await record(transfer, match.amountMicro, match.reason)) ? "unmatched" : "known";
  }

  async function record(transfer: SeenTransfer, amountMicro: number, reason: string): Promise<boolean> {
    const recorded = await store.recordUnmatchedTransfer({
      id: transfer.id,
      network: options.network,
      token: transfer.contract === options.rules.token.contract ? options.rules.token.symbol : `${transfer.symbol} ${transfer.contract}`,
      from: transfer.from,
      to: transfer.to,
      amountMicro,
      at: transfer.at,
      reason,
      recordedAt: now(),
    });
    if (recorded) log.warn("transfer matches no top-up: recorded for the operator", { transfer: transfer.id, from: transfer.from, reason });
    return recorded;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      // A poll driven by hand may be running: the timer's poll then waits its turn in the chain.
      void pollOnce().finally(schedule);
    }, options.pollMs);
    timer.unref?.();
  }

  return {
    pollOnce,
    start() {
      if (timer === undefined && !stopped) schedule();
    },
    async close() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await chain;
    },
  };
}

function parseCursor(text: string | null): number | null {
  if (text === null) return null;
  const value = Number(text);
  return Number.isSafeInteger(value) && value >= 0 ? value : null;
}
