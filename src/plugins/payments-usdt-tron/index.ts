import { definePlugin, type PluginInstance } from "../../core/plugin.ts";
import { InvalidRequestError, UnavailableError } from "../../core/errors.ts";
import type { NanoUsd } from "../../core/money.ts";
import type { PaymentProcessor, ProcessorRecord } from "../payments/processor.ts";
import type { PaymentStore, SettingsStore } from "../storage/repository.ts";
import { toMicro, type MatchRules, type SeenTransfer } from "./matcher.ts";
import { runsHostDuties } from "../../core/workers.ts";
import { createPoller, type PollSummary, type TransferSource } from "./poller.ts";
import { checkUsdtTronConfig, UsdtTronConfig } from "./schema.ts";
import { createTronGrid, type Trc20Transfer } from "./trongrid.ts";

/** TRC-20 USDT's contract on TRON mainnet; 6 decimals. */
export const USDT_TRON_CONTRACT = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
const NETWORK = "tron";
const MINIMUM_USD = 12; // the spec: "12 USD by USDT"
/** A cent in micro-USDT: the unique offsets stay below it (1..9999 micro). */
const CENT_MICRO = 10_000;
const NANO_PER_MICRO = 1_000;
/** Each poll reads back this far behind the last one: a transfer solidifies about a minute after its block. */
const POLL_MARGIN_MS = 10 * 60_000;
/** How far a block's time may precede a top-up's creation by our clock. */
const CLOCK_SKEW_MS = 60_000;

/** What the plugin offers: a poll on demand (tests, an operator's tool) and whether it is on. */
export interface UsdtTronService {
  /** The receiving address; null when USDT_TRON_ADDRESS is empty (the plugin does nothing). */
  readonly address: string | null;
  /** Polls now, after a poll in flight; never throws (failures are in the summary and the log). */
  pollOnce(): Promise<PollSummary>;
}

declare module "../../core/plugin.ts" {
  interface Services {
    "payments-usdt-tron": UsdtTronService;
  }
}

/**
 * USDT (TRC-20) top-ups on TRON, watch-only: the gateway gives each top-up a unique exact amount to send to the
 * operator's receiving address and polls a TronGrid-compatible API for confirmed transfers to it. No private key.
 */
export default definePlugin({
  name: "payments-usdt-tron",
  requires: ["storage", "payments"],
  configSchema: UsdtTronConfig,
  checkConfig: checkUsdtTronConfig,
  setup(config, host): PluginInstance<UsdtTronService> {
    host.secret(config.api_key);
    if (config.address === "") {
      return { provides: { address: null, pollOnce: async () => ({ ok: true, since: host.now(), seen: 0, credited: 0, unmatched: 0 }) } };
    }
    const address = config.address;
    const store: PaymentStore & SettingsStore = host.service("storage");
    const payments = host.service("payments");
    const tronGrid = createTronGrid({ apiUrl: config.api_url, apiKey: config.api_key || undefined });
    const invoiceMs = config.invoice_minutes * 60_000;
    const rules: MatchRules = { token: { contract: USDT_TRON_CONTRACT, symbol: "USDT", decimals: 6 }, minimumUsd: MINIMUM_USD, clockSkewMs: CLOCK_SKEW_MS };

    const processor: PaymentProcessor = {
      name: NETWORK,
      method: "usdt",
      minimumUsd: MINIMUM_USD,
      prepare: (draft) => prepare(draft.amount, draft.expiresAt ?? null),
      async start() {
        return { kind: "transfer" };
      },
      async records(since) {
        const read = await tronGrid.confirmedTransfersTo({ address, since, contract: USDT_TRON_CONTRACT });
        if (read.truncated) throw new UnavailableError("too many transfers since then to list them all; reconcile a shorter period");
        return read.transfers
          .filter((transfer) => transfer.to === address && transfer.contract === USDT_TRON_CONTRACT && transfer.type === "Transfer")
          .map(
            (transfer): ProcessorRecord => ({
              paymentRef: `${NETWORK}:${transfer.txId}`,
              topupId: null, // the chain carries no top-up id: the amount identifies it
              // Whole cents: the sub-cent offset identifies the invoice and is not credited, so an exact payment
              // of 20.004217 USDT reconciles with the 20.00 USD credited; a wrong amount still differs.
              amount: Math.floor(toMicro(transfer.value, transfer.decimals) / CENT_MICRO) * CENT_MICRO * NANO_PER_MICRO,
              returned: 0,
              at: transfer.at,
            }),
          )
          .sort((a, b) => a.at - b.at);
      },
    };

    // Amounts handed out by this process, until they expire: a top-up is stored after `prepare` returns, so the
    // store alone would not show the previous call's amount yet. Calls are serialized by a promise chain.
    const issued = new Map<number, number>();
    let preparing: Promise<unknown> = Promise.resolve();

    function prepare(amount: NanoUsd, proposedExpiry: number | null) {
      const next = preparing.then(() => pickAmount(amount, proposedExpiry));
      preparing = next.catch(() => undefined);
      return next;
    }

    /** The payments core proposes the expiry (its `usdt_invoice_minutes`); without one, this plugin's `invoice_minutes`. */
    async function pickAmount(amount: NanoUsd, proposedExpiry: number | null) {
      if (!Number.isSafeInteger(amount) || amount <= 0 || amount % (CENT_MICRO * NANO_PER_MICRO) !== 0) {
        throw new InvalidRequestError("a USDT top-up's amount is whole cents", { param: "amount" });
      }
      const now = host.now();
      const base = amount / NANO_PER_MICRO;
      const taken = new Set<number>();
      for (const topup of await store.openTopupsTo(NETWORK, address, now)) if (topup.payAmountMicro !== null) taken.add(topup.payAmountMicro);
      for (const [micro, expiresAt] of issued) {
        if (expiresAt <= now) issued.delete(micro);
        else taken.add(micro);
      }
      // A random free offset: another instance picking at the same moment collides only by chance (1 in 9,999 per
      // pair); the matcher refuses to guess between two open top-ups of one amount (the operator decides).
      const start = 1 + Math.floor(Math.random() * (CENT_MICRO - 1));
      for (let step = 0; step < CENT_MICRO - 1; step++) {
        const offset = 1 + ((start - 1 + step) % (CENT_MICRO - 1));
        if (taken.has(base + offset)) continue;
        const expiresAt = proposedExpiry !== null && proposedExpiry > now ? proposedExpiry : now + invoiceMs;
        issued.set(base + offset, expiresAt);
        return { network: NETWORK, payTo: address, payAmountMicro: base + offset, expiresAt };
      }
      throw new UnavailableError("every exact amount for this USDT top-up is taken by open top-ups; retry later or change the amount by a cent", {
        headers: { "retry-after": "60" },
      });
    }

    const source: TransferSource = {
      async transfersSince(since) {
        // Every TRC-20 token, not only USDT's contract: another token sent to the address is recorded for the operator.
        const read = await tronGrid.confirmedTransfersTo({ address, since });
        return { ...read, transfers: read.transfers.filter((transfer) => transfer.type === "Transfer").map(seen) };
      },
    };

    const poller = createPoller({
      network: NETWORK,
      processor: NETWORK,
      eventType: "trc20.transfer",
      address,
      source,
      store,
      payments,
      rules,
      invoiceMs,
      pollMs: config.poll_ms,
      cursorSetting: "usdt-tron.cursor",
      marginMs: POLL_MARGIN_MS,
      now: host.now,
      log: host.log,
    });
    payments.register(processor);
    // One poller per host: with several workers only worker 0 polls (the others still serve top-ups and pollOnce).
    if (runsHostDuties(host.workers)) {
      poller.start();
      host.log.info("watching for USDT transfers", { address, api_url: config.api_url, poll_ms: config.poll_ms });
    }

    return {
      provides: { address, pollOnce: () => poller.pollOnce() },
      close: () => poller.close(),
    };
  },
});

/** A TronGrid transfer as the matcher sees any network's. */
function seen(transfer: Trc20Transfer): SeenTransfer {
  return {
    id: `${NETWORK}:${transfer.txId}`,
    network: NETWORK,
    contract: transfer.contract,
    symbol: transfer.symbol,
    decimals: transfer.decimals,
    from: transfer.from,
    to: transfer.to,
    value: transfer.value,
    at: transfer.at,
  };
}
