/**
 * The one file that knows TronGrid: the TRC-20 transfers of an account, read-only.
 *
 * The endpoint, as documented by TRON:
 *   GET {api}/v1/accounts/{address}/transactions/trc20
 *   https://developers.tron.network/docs/get-trc20-transaction-history (only_confirmed, limit ≤ 200, fingerprint,
 *   contract_address) and https://github.com/TRON-US/trongrid#2-get-transactions-by-account-address (only_to,
 *   min_timestamp alias of min_block_timestamp, fingerprint = "the fingerprint of the last transaction returned by
 *   the previous page"); header `TRON-PRO-API-KEY` when a key is set.
 * Answer: `{data: [{transaction_id, token_info: {symbol, address, decimals, name}, block_timestamp, from, to, type,
 * value}], success, meta: {at, fingerprint?, page_size}}`; `value` is a string integer in the token's smallest unit.
 * `only_confirmed=true`: solidified transactions only (about 19 blocks, a minute, after inclusion).
 */

/** One TRC-20 transfer as TronGrid reports it, checked. */
export interface Trc20Transfer {
  /** 64 hex characters. */
  txId: string;
  /** The token's contract address (base58). */
  contract: string;
  symbol: string;
  decimals: number;
  from: string;
  to: string;
  /** "Transfer" (TronGrid also lists "Approval"). */
  type: string;
  /** The amount in the token's smallest unit, a decimal string of digits. */
  value: string;
  /** The block's timestamp, epoch ms. */
  at: number;
}

export interface TronGridOptions {
  apiUrl: string;
  apiKey?: string;
  /** Per HTTP call (default 10 s). */
  timeoutMs?: number;
  /** Pages followed at most per query (default 100, 20,000 transfers). */
  maxPages?: number;
  fetch?: typeof fetch;
}

export interface TransferQuery {
  address: string;
  /** Only transfers of blocks at or after this time (epoch ms). */
  since: number;
  /** Only this token's transfers; absent: every TRC-20 token (so that another token sent to the address is seen). */
  contract?: string;
}

export interface TransferPage {
  transfers: Trc20Transfer[];
  /** Rows that were not a well-formed transfer (skipped), for the log. */
  malformed: number;
  /** The pages cap was reached: older transfers of the window were not read. */
  truncated: boolean;
}

/** TronGrid did not answer, answered an error, or answered something that is not its JSON. */
export class TronGridError extends Error {
  override name = "TronGridError";
}

const TX_ID = /^[0-9a-fA-F]{64}$/;
const DIGITS = /^\d{1,78}$/;
const PAGE_SIZE = 200; // the documented maximum

export interface TronGrid {
  /** Confirmed TRC-20 transfers TO `address` since `since`, every page followed (newest first, as TronGrid orders them). */
  confirmedTransfersTo(query: TransferQuery): Promise<TransferPage>;
}

export function createTronGrid(options: TronGridOptions): TronGrid {
  const base = options.apiUrl.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxPages = options.maxPages ?? 100;
  const doFetch = options.fetch ?? fetch;
  const headers: Record<string, string> = { accept: "application/json" };
  if (options.apiKey) headers["TRON-PRO-API-KEY"] = options.apiKey;

  async function page(query: TransferQuery, fingerprint: string | undefined): Promise<{ rows: unknown[]; fingerprint: string | undefined }> {
    const params = new URLSearchParams({
      only_confirmed: "true",
      only_to: "true",
      limit: String(PAGE_SIZE),
      min_timestamp: String(Math.max(0, Math.floor(query.since))),
    });
    if (query.contract) params.set("contract_address", query.contract);
    if (fingerprint) params.set("fingerprint", fingerprint);
    const url = `${base}/v1/accounts/${encodeURIComponent(query.address)}/transactions/trc20?${params}`;
    let response: Response;
    try {
      response = await doFetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
    } catch (error) {
      throw new TronGridError(`TronGrid unreachable: ${(error as Error)?.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : String((error as Error)?.message ?? error)}`, { cause: error });
    }
    const text = await response.text().catch((error) => {
      throw new TronGridError(`TronGrid answer cut: ${String(error)}`, { cause: error });
    });
    if (!response.ok) throw new TronGridError(`TronGrid answered ${response.status}: ${text.slice(0, 200)}`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new TronGridError(`TronGrid answered ${response.status} with a body that is not JSON: ${text.slice(0, 100)}`);
    }
    if (!isObject(body) || !Array.isArray(body.data)) throw new TronGridError(`TronGrid answered JSON without a data array: ${text.slice(0, 200)}`);
    if (body.success === false) throw new TronGridError(`TronGrid answered success=false: ${text.slice(0, 200)}`);
    const meta = isObject(body.meta) ? body.meta : {};
    const next = typeof meta.fingerprint === "string" && meta.fingerprint !== "" ? meta.fingerprint : undefined;
    return { rows: body.data, fingerprint: next };
  }

  return {
    async confirmedTransfersTo(query) {
      const transfers: Trc20Transfer[] = [];
      let malformed = 0;
      let fingerprint: string | undefined;
      const seenFingerprints = new Set<string>();
      for (let pages = 0; pages < maxPages; pages++) {
        const answer = await page(query, fingerprint);
        for (const row of answer.rows) {
          const transfer = parseTransfer(row);
          if (transfer) transfers.push(transfer);
          else malformed++;
        }
        // The last page has no fingerprint; an empty page or a fingerprint seen before ends it too (never loop).
        if (!answer.fingerprint || answer.rows.length === 0 || seenFingerprints.has(answer.fingerprint)) {
          return { transfers, malformed, truncated: false };
        }
        seenFingerprints.add(answer.fingerprint);
        fingerprint = answer.fingerprint;
      }
      return { transfers, malformed, truncated: true };
    },
  };
}

/** A row of `data` as a transfer, or null when a field is missing or malformed. */
export function parseTransfer(row: unknown): Trc20Transfer | null {
  if (!isObject(row) || !isObject(row.token_info)) return null;
  const { transaction_id: txId, block_timestamp: at, from, to, type, value } = row;
  const { address: contract, symbol, decimals } = row.token_info;
  if (typeof txId !== "string" || !TX_ID.test(txId)) return null;
  if (typeof at !== "number" || !Number.isSafeInteger(at) || at < 0) return null;
  if (typeof from !== "string" || typeof to !== "string" || typeof contract !== "string") return null;
  if (typeof value !== "string" || !DIGITS.test(value)) return null;
  const places = typeof decimals === "number" ? decimals : typeof decimals === "string" ? Number(decimals) : NaN;
  if (!Number.isInteger(places) || places < 0 || places > 77) return null;
  return {
    txId: txId.toLowerCase(),
    contract,
    symbol: typeof symbol === "string" ? symbol.slice(0, 40) : "?",
    decimals: places,
    from,
    to,
    type: typeof type === "string" ? type : "",
    value,
    at,
  };
}

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
