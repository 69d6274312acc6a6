/**
 * Seeds a SQLite store for the /v1/usage case: one account, 3 keys, `rows` generations over the last `days`
 * UTC days across ~40 models, written through the repository (so the daily roll-up is what the gateway keeps).
 *
 * Standalone: bun bench/seed-usage.ts --db /tmp/usage.db --rows 1000000
 */
import { statSync } from "node:fs";
import { createSqliteRepository } from "../src/plugins/storage/sqlite/repository.ts";
import type { Generation } from "../src/plugins/storage/repository.ts";
import { hashApiKey, maskApiKey } from "../src/plugins/auth/keys.ts";
import { createLogger } from "../src/core/log.ts";

const DAY_MS = 86_400_000;
const MODELS = Array.from({ length: 40 }, (_, i) => `bench-model-${String(i).padStart(2, "0")}`);
const FLUSH_EVERY = 10_000;

export interface SeededUsage {
  dbPath: string;
  rows: number;
  days: number;
  seedMs: number;
  dbBytes: number;
  accountId: string;
  /** Full key values (the store keeps only their hashes). */
  keys: { id: string; key: string }[];
  startDay: string;
  endDay: string;
  /** Store-only latency of usageByDay over the whole window, ms (the HTTP layer excluded). */
  storeOnly: { account: number[]; key: number[] };
}

function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export async function seedUsage(options: { dbPath: string; rows: number; days?: number; onProgress?: (done: number) => void }): Promise<SeededUsage> {
  const days = options.days ?? 92;
  const repo = createSqliteRepository(options.dbPath, { flushIntervalMs: 1000, maxBatch: 5000, log: createLogger("seed", { silent: true }) });
  const started = performance.now();
  const account = await repo.createAccount("usage bench");
  await repo.addCredit({ accountId: account.id, amount: 1_000_000 * 1e9, kind: "card", reference: `bench-${crypto.randomUUID()}` });
  const keys: { id: string; key: string }[] = [];
  for (let k = 0; k < 3; k++) {
    const key = `sk-gw-bench${String(k).padStart(2, "0")}${crypto.randomUUID().replaceAll("-", "").slice(0, 27)}`;
    const created = await repo.createKey({
      id: "",
      accountId: account.id,
      name: `usage bench ${k}`,
      keyHash: hashApiKey(key),
      label: maskApiKey(key),
      limit: null,
      models: null,
      requestsPerMinute: null,
      tokensPerMinute: null,
      expiresAt: null,
    });
    keys.push({ id: created.id, key });
  }

  const now = Date.now();
  const todayStart = Math.floor(now / DAY_MS) * DAY_MS;
  const windowStart = todayStart - (days - 1) * DAY_MS; // `days` whole UTC days, today included
  const step = (now - windowStart) / options.rows;
  for (let i = 0; i < options.rows; i++) {
    // In arrival order, as the gateway writes them: time-ordered createdAt and UUIDv7 request ids.
    const createdAt = windowStart + Math.floor(i * step + Math.random() * step);
    const failed = i % 50 === 0;
    const promptTokens = 50 + (i % 1900);
    const completionTokens = failed ? 0 : 10 + (i % 700);
    const cachedTokens = i % 3 === 0 ? Math.floor(promptTokens / 2) : 0;
    const inputCost = (promptTokens - cachedTokens) * 100;
    const cacheReadCost = cachedTokens * 10;
    const outputCost = completionTokens * 500;
    const generation: Generation = {
      id: "gen-" + Bun.randomUUIDv7("hex", createdAt).replaceAll("-", ""),
      responseId: failed ? null : `chatcmpl-bench${i.toString(36).padStart(8, "0")}`,
      accountId: account.id,
      keyId: keys[i % 3]!.id,
      model: MODELS[(i * 7919) % MODELS.length]!,
      provider: "openai",
      ingress: "openai-chat",
      stream: i % 2 === 0,
      status: failed ? "failed" : "success",
      errorCode: failed ? "upstream_error" : null,
      createdAt,
      latencyMs: 200 + (i % 3000),
      timeToFirstTokenMs: failed ? null : 100 + (i % 900),
      promptTokens,
      completionTokens,
      cachedTokens,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      inputCost,
      cacheReadCost,
      cacheWriteCost: 0,
      outputCost,
      totalCost: inputCost + cacheReadCost + outputCost,
    };
    repo.recordGeneration(generation);
    if ((i + 1) % FLUSH_EVERY === 0) {
      await repo.flush();
      options.onProgress?.(i + 1);
    }
  }
  await repo.flush();
  const seedMs = performance.now() - started;

  const startDay = utcDay(windowStart);
  const endDay = utcDay(todayStart);
  const storeOnly = { account: [] as number[], key: [] as number[] };
  for (let i = 0; i < 25; i++) {
    let t = performance.now();
    await repo.usageByDay({ accountId: account.id, startDay, endDay });
    storeOnly.account.push(performance.now() - t);
    t = performance.now();
    await repo.usageByDay({ accountId: account.id, keyId: keys[0]!.id, startDay, endDay });
    storeOnly.key.push(performance.now() - t);
  }
  await repo.close();
  let dbBytes = 0;
  for (const suffix of ["", "-wal", "-shm"]) {
    try {
      dbBytes += statSync(options.dbPath + suffix).size;
    } catch {}
  }
  return { dbPath: options.dbPath, rows: options.rows, days, seedMs, dbBytes, accountId: account.id, keys, startDay, endDay, storeOnly };
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const dbPath = arg("--db");
  if (!dbPath) {
    console.error("usage: bun bench/seed-usage.ts --db PATH [--rows 1000000]");
    process.exit(2);
  }
  const seeded = await seedUsage({ dbPath, rows: Number(arg("--rows") ?? 1_000_000), onProgress: (n) => n % 100_000 === 0 && console.error(`${n} rows`) });
  console.log(JSON.stringify({ ...seeded, storeOnly: undefined }));
}
