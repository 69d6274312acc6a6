/**
 * A fake TronGrid for tests (real HTTP through Bun.serve): the TRC-20 transfers of an account, in TronGrid's wire
 * format. Only `GET /v1/accounts/:address/transactions/trc20`, as documented at
 * https://developers.tron.network/docs/get-trc20-transaction-history and https://github.com/TRON-US/trongrid:
 * `only_confirmed`, `only_unconfirmed` (not both: 400), `only_to`, `only_from`, `contract_address`,
 * `min_timestamp` / `min_block_timestamp`, `max_timestamp` / `max_block_timestamp`, `limit` (default 20, 1..200),
 * `fingerprint` paging (`meta.fingerprint` and `meta.links.next` while there is more), `order_by=block_timestamp,asc|desc`
 * (default newest first); query names in snake_case or camelCase, as TronGrid takes both.
 *
 *   const tron = await startFakeTronGrid();
 *   const tx = tron.addTransfer({ to: ADDRESS, value: "20004217", at: Date.now(), confirmed: false });
 *   tron.confirm(tx);
 *   tron.failNext(2, "500");          // or "garbage", "success-false"
 *   tron.requests                      // every call: path, query, headers
 */

export const FAKE_USDT = { address: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", symbol: "USDT", name: "Tether USD", decimals: 6 };

export interface FakeTransferInput {
  /** 64 hex characters; default: random. */
  txId?: string;
  to: string;
  /** Default: a fixed payer address. */
  from?: string;
  /** In the token's smallest unit (micro-USDT). */
  value: string | number | bigint;
  /** The block's timestamp, epoch ms. */
  at: number;
  /** Solidified; default true. */
  confirmed?: boolean;
  /** Default: USDT. */
  token?: { address: string; symbol: string; name?: string; decimals: number };
  /** Default "Transfer". */
  type?: string;
}

interface StoredTransfer {
  txId: string;
  to: string;
  from: string;
  value: string;
  at: number;
  confirmed: boolean;
  token: { address: string; symbol: string; name: string; decimals: number };
  type: string;
}

export type FakeFailure = "500" | "garbage" | "success-false";

export interface FakeTronGridRequest {
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
}

export interface FakeTronGrid {
  url: string;
  port: number;
  /** Every call received, in order. */
  readonly requests: FakeTronGridRequest[];
  /** Adds a transfer to the chain; returns its transaction id. */
  addTransfer(transfer: FakeTransferInput): string;
  /** The transfer's block is solidified from now on. */
  confirm(txId: string): void;
  /** The next `count` calls fail: 500, a body that is not JSON, or `{success: false}`. */
  failNext(count: number, kind?: FakeFailure): void;
  /** Transfers, failures and recorded calls forgotten. */
  reset(): void;
  stop(): Promise<void>;
}

export const FAKE_PAYER = "TJmmqjb1DK9TTZbQXzRQ2AuA94z4gKAPFh";

export async function startFakeTronGrid(options: { pageLimitMax?: number } = {}): Promise<FakeTronGrid> {
  const maxLimit = options.pageLimitMax ?? 200;
  const transfers: StoredTransfer[] = [];
  const requests: FakeTronGridRequest[] = [];
  let failures: FakeFailure[] = [];

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const url = new URL(request.url);
      const query = Object.fromEntries(url.searchParams);
      requests.push({ path: url.pathname, query, headers: Object.fromEntries(request.headers) });
      const failure = failures.shift();
      if (failure === "500") return Response.json({ Error: "internal error" }, { status: 500 });
      if (failure === "garbage") return new Response('{"data":[{"transaction_id": <html>oops', { status: 200, headers: { "content-type": "application/json" } });
      if (failure === "success-false") return Response.json({ success: false, error: "server busy", statusCode: 200 });

      const match = /^\/v1\/accounts\/([^/]+)\/transactions\/trc20\/?$/.exec(url.pathname);
      if (request.method !== "GET" || !match) return Response.json({ success: false, error: "not found", statusCode: 404 }, { status: 404 });
      return listTransfers(decodeURIComponent(match[1]!), url);
    },
  });

  function param(url: URL, snake: string): string | null {
    const camel = snake.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
    return url.searchParams.get(snake) ?? url.searchParams.get(camel);
  }

  function flag(url: URL, snake: string): boolean {
    return param(url, snake) === "true";
  }

  function badRequest(error: string): Response {
    return Response.json({ success: false, error, statusCode: 400 }, { status: 400 });
  }

  function listTransfers(address: string, url: URL): Response {
    if (flag(url, "only_confirmed") && flag(url, "only_unconfirmed")) return badRequest("only_confirmed and only_unconfirmed cannot be used together");
    const limitText = param(url, "limit");
    const limit = limitText === null ? 20 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) return badRequest(`limit must be an integer between 1 and ${maxLimit}`);
    const minAt = Number(param(url, "min_timestamp") ?? param(url, "min_block_timestamp") ?? 0);
    const maxAt = Number(param(url, "max_timestamp") ?? param(url, "max_block_timestamp") ?? Number.MAX_SAFE_INTEGER);
    if (!Number.isFinite(minAt) || !Number.isFinite(maxAt)) return badRequest("min_timestamp and max_timestamp are epoch milliseconds");
    const contract = param(url, "contract_address");
    const ascending = (param(url, "order_by") ?? "block_timestamp,desc").endsWith(",asc");

    const selected = transfers
      .filter((transfer) => transfer.to === address || transfer.from === address)
      .filter((transfer) => !flag(url, "only_to") || transfer.to === address)
      .filter((transfer) => !flag(url, "only_from") || transfer.from === address)
      .filter((transfer) => !flag(url, "only_confirmed") || transfer.confirmed)
      .filter((transfer) => !flag(url, "only_unconfirmed") || !transfer.confirmed)
      .filter((transfer) => contract === null || transfer.token.address === contract)
      .filter((transfer) => transfer.at >= minAt && transfer.at <= maxAt)
      .sort((a, b) => (ascending ? a.at - b.at : b.at - a.at) || a.txId.localeCompare(b.txId));

    // The fingerprint is opaque to clients; here: the position after the previous page, in this query's order.
    const fingerprint = param(url, "fingerprint");
    let offset = 0;
    if (fingerprint !== null) {
      offset = Number(Buffer.from(fingerprint, "base64url").toString("utf8"));
      if (!Number.isInteger(offset) || offset < 0) return badRequest("invalid fingerprint");
    }
    const page = selected.slice(offset, offset + limit);
    const more = offset + limit < selected.length;
    const meta: Record<string, unknown> = { at: Date.now(), page_size: page.length };
    if (more) {
      const next = Buffer.from(String(offset + limit), "utf8").toString("base64url");
      const nextUrl = new URL(url);
      nextUrl.searchParams.set("fingerprint", next);
      meta.fingerprint = next;
      meta.links = { next: nextUrl.toString() };
    }
    return Response.json({
      data: page.map((transfer) => ({
        transaction_id: transfer.txId,
        token_info: { symbol: transfer.token.symbol, address: transfer.token.address, decimals: transfer.token.decimals, name: transfer.token.name },
        block_timestamp: transfer.at,
        from: transfer.from,
        to: transfer.to,
        type: transfer.type,
        value: transfer.value,
      })),
      success: true,
      meta,
    });
  }

  return {
    url: `http://127.0.0.1:${server.port}`,
    port: server.port!,
    requests,
    addTransfer(input) {
      const txId = input.txId ?? randomTxId();
      if (transfers.some((transfer) => transfer.txId === txId)) throw new Error(`transaction ${txId} exists`);
      const token = input.token ?? FAKE_USDT;
      transfers.push({
        txId,
        to: input.to,
        from: input.from ?? FAKE_PAYER,
        value: String(input.value),
        at: input.at,
        confirmed: input.confirmed ?? true,
        token: { address: token.address, symbol: token.symbol, name: token.name ?? token.symbol, decimals: token.decimals },
        type: input.type ?? "Transfer",
      });
      return txId;
    },
    confirm(txId) {
      const transfer = transfers.find((candidate) => candidate.txId === txId);
      if (!transfer) throw new Error(`no transaction ${txId}`);
      transfer.confirmed = true;
    },
    failNext(count, kind = "500") {
      for (let i = 0; i < count; i++) failures.push(kind);
    },
    reset() {
      transfers.length = 0;
      requests.length = 0;
      failures = [];
    },
    async stop() {
      server.stop(true);
    },
  };
}

function randomTxId(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");
}
