import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../../src/core/log.ts";
import type { Generation, Repository } from "../../../src/plugins/storage/repository.ts";
import type { PrimaryHost, WorkerLink } from "../../../src/core/workers.ts";
import { servePrimaryHolds } from "../../../src/plugins/storage/sqlite/primary-holds.ts";

const tempDirs: string[] = [];

/** A database path in a fresh temp dir, under a directory that does not exist yet. */
export function tempDbPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "gw-storage-"));
  tempDirs.push(dir);
  return join(dir, "nested", "gateway.db");
}

export function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** Raw SQL against the file through a separate connection: what is really committed. */
export function rawAll<T = Record<string, unknown>>(path: string, query: string, ...params: (string | number)[]): T[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.query(query).all(...params) as T[];
  } finally {
    db.close();
  }
}

export function rawGet<T = Record<string, unknown>>(path: string, query: string, ...params: (string | number)[]): T {
  return rawAll<T>(path, query, ...params)[0];
}

export interface CapturedLog extends Logger {
  lines: { level: string; message: string; fields?: Record<string, unknown> }[];
}

export function captureLog(): CapturedLog {
  const lines: CapturedLog["lines"] = [];
  const log: CapturedLog = {
    lines,
    info: (message, fields) => void lines.push({ level: "info", message, fields }),
    warn: (message, fields) => void lines.push({ level: "warn", message, fields }),
    error: (message, fields) => void lines.push({ level: "error", message, fields }),
    request: (fields) => void lines.push({ level: "info", message: "request", fields }),
    child: () => log,
  };
  return log;
}

let sequence = 0;

/** A generation whose cost parts add up; override anything. */
export function makeGeneration(accountId: string, keyId: string, overrides: Partial<Generation> = {}): Generation {
  sequence += 1;
  const inputCost = overrides.inputCost ?? 1_000;
  const outputCost = overrides.outputCost ?? 2_000;
  return {
    id: `gen-${crypto.randomUUID().replaceAll("-", "")}`,
    responseId: `chatcmpl-${sequence}-${crypto.randomUUID()}`,
    accountId,
    keyId,
    model: "gpt-test",
    requestedModel: null,
    provider: "fake",
    ingress: "openai-chat",
    stream: false,
    status: "success",
    errorCode: null,
    createdAt: Date.now(),
    latencyMs: 120,
    timeToFirstTokenMs: 40,
    promptTokens: 10,
    completionTokens: 20,
    cachedTokens: 2,
    cacheWriteTokens: 1,
    cacheWrite1hTokens: 0,
    reasoningTokens: 3,
    inputCost,
    cacheReadCost: 0,
    cacheWriteCost: 0,
    outputCost,
    totalCost: inputCost + outputCost,
    unbilledCost: 0,
    cacheDiscount: 0,
    usageEstimated: false,
    attempts: null,
    ...overrides,
  };
}

/** An account named Acme with one key (no limits unless given): what most store tests start from. */
export async function accountWithKey(repository: Repository, options: { limit?: number | null; keyHash?: string } = {}) {
  const account = await repository.createAccount("Acme");
  const key = await repository.createKey({
    id: "",
    accountId: account.id,
    name: "default",
    keyHash: options.keyHash ?? crypto.randomUUID(),
    label: "sk-gw-Ab3d…x9Yz",
    limit: options.limit ?? null,
    models: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAt: null,
  });
  return { account, key };
}

/**
 * A workers' primary in this process for `primary` holds (src/plugins/storage/sqlite/primary-holds.ts): its part
 * serves the file's holds; `link(i)` is worker i's side of the channel. Messages are structured-cloned both ways and
 * handled in the order sent, as over Bun's IPC channel; `exit(i)` is worker i exiting.
 */
export function inProcessPrimary(path: string) {
  const handlers = new Map<string, (payload: unknown, from: number) => unknown>();
  const exitHandlers: ((worker: number) => void)[] = [];
  const host: PrimaryHost = {
    env: {},
    log: captureLog(),
    now: Date.now,
    workers: 8,
    serve: (topic, handler) => void handlers.set(topic, handler),
    askAll: async () => [],
    onWorkerExit: (handler) => void exitHandlers.push(handler),
  };
  const part = servePrimaryHolds(path, host);
  return {
    link(index: number): WorkerLink {
      return {
        index,
        count: 8,
        call<T>(topic: string, payload: unknown): Promise<T> {
          const handler = handlers.get(topic);
          if (!handler) return Promise.reject(new Error(`no handler for ${topic}`));
          try {
            return Promise.resolve(handler(structuredClone(payload), index)).then((value) => structuredClone(value) as T);
          } catch (error) {
            return Promise.reject(error);
          }
        },
        publish() {},
        subscribe() {},
        answer() {},
      };
    },
    exit(index: number): void {
      for (const handler of exitHandlers) handler(index);
    },
    close: () => part.close?.(),
  };
}
