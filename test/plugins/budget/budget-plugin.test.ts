import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import budgetPlugin from "../../../src/plugins/budget/index.ts";
import { loadCatalog } from "../../../src/plugins/catalog/catalog.ts";
import { createLogger } from "../../../src/core/log.ts";
import type { PluginHost, PluginInstance } from "../../../src/core/plugin.ts";
import type { GatewayContext } from "../../../src/core/context.ts";
import { createSqliteRepository } from "../../../src/plugins/storage/sqlite/repository.ts";
import type { ApiKey, Generation, Repository } from "../../../src/plugins/storage/repository.ts";

/**
 * The budget plugin against a real SQLite file, without HTTP: what another process on the same file
 * sees when this one stops, and when it dies without stopping.
 */

const catalog = loadCatalog("catalog.yaml");
const MODEL = catalog.get("gpt-6-luna")!; // $0.10 / $0.50 per million tokens, 128K output max
const dirs: string[] = [];
const open: { close(): unknown }[] = [];

afterEach(async () => {
  for (const resource of open.splice(0).reverse()) await resource.close();
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), "gw-budget-"));
  dirs.push(dir);
  return join(dir, "gateway.db");
}

function repository(path: string, flushIntervalMs = 5): Repository {
  const store = createSqliteRepository(path, { flushIntervalMs, log: createLogger("test", { silent: true }) });
  open.push(store);
  return store;
}

async function budget(store: Repository, now: () => number, config: Record<string, unknown> = {}): Promise<PluginInstance> {
  const services: Record<string, unknown> = { storage: store, catalog };
  const host = {
    configFile: "test",
    env: {},
    log: createLogger("test", { silent: true }),
    now,
    service: (name: string) => services[name],
    has: (name: string) => name in services,
  } as unknown as PluginHost;
  const instance = await budgetPlugin.setup({ heartbeat_ms: 5_000, stale_after_ms: 30_000, plans: {}, ...config } as never, host);
  // Closed once, by the test or after it (the gateway closes each plugin once).
  const close = instance.close!.bind(instance);
  let closing: Promise<void> | undefined;
  instance.close = () => (closing ??= Promise.resolve(close()));
  open.push({ close: () => instance.close!() });
  return instance;
}

async function fundedKey(store: Repository, usd: number, limit: number | null = null): Promise<ApiKey> {
  const account = await store.createAccount("budget unit");
  await store.addCredit({ accountId: account.id, amount: usd * 1e9, kind: "card", reference: crypto.randomUUID() });
  return store.createKey({
    id: "",
    accountId: account.id,
    name: "k",
    keyHash: crypto.randomUUID(),
    label: "sk-…",
    limit,
    models: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAt: null,
  });
}

function context(key: ApiKey, maxOutputTokens?: number): GatewayContext {
  return {
    requestId: "gen-" + crypto.randomUUID().replaceAll("-", ""),
    startedAt: Date.now(),
    startedMono: performance.now(),
    signal: new AbortController().signal,
    headers: new Headers(),
    body: {},
    request: { model: MODEL.id, stream: false, clientWantsStreamUsage: false, maxOutputTokens },
    responseHeaders: {},
    log: {},
    model: MODEL,
    principal: { accountId: key.accountId, key },
    promptTokenBound: 20,
  } as unknown as GatewayContext;
}

function generation(ctx: GatewayContext, key: ApiKey, totalCost: number): Generation {
  return {
    id: ctx.requestId,
    responseId: null,
    accountId: key.accountId,
    keyId: key.id,
    model: MODEL.id,
    provider: "openai",
    ingress: "openai-chat",
    stream: false,
    status: "success",
    errorCode: null,
    createdAt: ctx.startedAt,
    latencyMs: 1,
    timeToFirstTokenMs: 1,
    promptTokens: 20,
    completionTokens: 10,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    inputCost: totalCost,
    cacheReadCost: 0,
    cacheWriteCost: 0,
    outputCost: 0,
    totalCost,
    unbilledCost: 0,
    usageEstimated: false,
  };
}

/** What another process on the file can spend: credits − committed debits − every hold. */
function availableSeenByAnotherProcess(path: string, accountId: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db
      .query<{ available: number }, [string]>(
        `select a.total_credits_nano - a.total_debits_nano
                - coalesce((select sum(amount_nano) from reservations where account_id = a.id), 0) as available
           from accounts a where a.id = ?`,
      )
      .get(accountId)!.available;
  } finally {
    db.close();
  }
}

function reservations(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.query<{ n: number }, []>("select count(*) as n from reservations").get()!.n;
  } finally {
    db.close();
  }
}

describe("budget plugin on SQLite", () => {
  it("holds prompt bound × dearest prompt price + max_tokens × output price, and onComplete releases an unmetered hold", async () => {
    const path = tempDb();
    const store = repository(path);
    const plugin = await budget(store, Date.now);
    const key = await fundedKey(store, 5);
    const ctx = context(key, 1000);
    await plugin.onRequest!(ctx);
    expect(ctx.log.reserved_nano).toBe(20 * 125 + 1000 * 500);
    expect(ctx.upstreamOutputCap).toBe(1000); // the cap the hold assumed is always sent upstream
    expect(ctx.heldNano).toBe(20 * 125 + 1000 * 500);
    expect(availableSeenByAnotherProcess(path, key.accountId)).toBe(5e9 - (20 * 125 + 1000 * 500));
    await plugin.onComplete!(ctx, { status: "failed", error: { status: 502, code: "upstream_error", message: "x" } });
    expect(reservations(path)).toBe(0);
    expect(availableSeenByAnotherProcess(path, key.accountId)).toBe(5e9);
  });

  it("a clean stop never frees a hold before the debit replacing it is committed", async () => {
    const path = tempDb();
    // A long group-commit period: the debit is still queued when the plugin closes.
    const store = repository(path, 60_000);
    const plugin = await budget(store, Date.now);
    const key = await fundedKey(store, 5);
    const ctx = context(key, 1000);
    await plugin.onRequest!(ctx);
    const cost = 20 * 100 + 10 * 500;
    store.recordGeneration(generation(ctx, key, cost));
    (ctx as { metered?: boolean }).metered = true;
    await plugin.onComplete!(ctx, { status: "success" });
    expect(reservations(path)).toBe(1); // released only with its debit

    await plugin.close!();
    // Between the budget plugin's close and the storage's final flush, another process must not see
    // the request's cost as free.
    expect(availableSeenByAnotherProcess(path, key.accountId)).toBeLessThanOrEqual(5e9 - cost);
    await store.close();
    expect(availableSeenByAnotherProcess(path, key.accountId)).toBe(5e9 - cost);
    expect(reservations(path)).toBe(0);
  });

  it("a process that stops heartbeating loses its holds to a live one; a live one keeps them", async () => {
    const path = tempDb();
    let clock = 1_000_000;
    const now = () => clock;
    const a = repository(path);
    const dead = await budget(a, now, { heartbeat_ms: 400, stale_after_ms: 1_000 });
    a.heartbeat = async () => {}; // it dies here: no heartbeat from now on
    const key = await fundedKey(a, 5);
    await dead.onRequest!(context(key, 1000));
    await dead.onRequest!(context(key, 1000));
    expect(reservations(path)).toBe(2);

    // Another process starting 500 ms later: the first is still alive by its last heartbeat.
    clock += 500;
    const b = repository(path);
    await budget(b, now, { heartbeat_ms: 400, stale_after_ms: 1_000 });
    expect(reservations(path)).toBe(2);

    // Silent for more than stale_after_ms: the next process to check releases its holds.
    clock += 1_000;
    const c = repository(path);
    await budget(c, now, { heartbeat_ms: 400, stale_after_ms: 1_000 });
    expect(reservations(path)).toBe(0);
    expect(availableSeenByAnotherProcess(path, key.accountId)).toBe(5e9);
  });

  it("refuses a hold with the key's 429 when the key budget binds, the account's 400 otherwise", async () => {
    const store = repository(tempDb());
    const plugin = await budget(store, Date.now);
    const keyed = await fundedKey(store, 5, 1_000_000); // $0.001 key budget
    const refusal = await Promise.resolve(plugin.onRequest!(context(keyed, 10_000))).then(
      () => null,
      (error) => error,
    );
    expect(refusal).toMatchObject({ status: 429, code: "key_budget_exceeded" });
    // (1_000_000 − 20 × 125) / 500 = 1995 output tokens fit.
    expect(refusal.message).toContain("affords at most 1995 output tokens");

    const capped = context(keyed);
    await plugin.onRequest!(capped);
    expect(capped.upstreamOutputCap).toBe(1995);

    const poor = await fundedKey(store, 0.000001 * 1e3); // $0.001 balance, no key budget
    const refused = await Promise.resolve(plugin.onRequest!(context(poor, 10_000))).then(
      () => null,
      (error) => error,
    );
    expect(refused).toMatchObject({ status: 400, code: "insufficient_balance", type: "invalid_request_error" });
  });

  it("refuses a stale_after_ms that a live process one heartbeat late would already exceed", async () => {
    const store = repository(tempDb());
    const failure = await budget(store, Date.now, { heartbeat_ms: 1_000, stale_after_ms: 1_500 }).then(
      () => null,
      (error) => String(error),
    );
    expect(failure).toContain("stale_after_ms (1500) must be at least twice heartbeat_ms (1000)");
  });
});
