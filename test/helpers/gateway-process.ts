import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnGatewayChild, untilReady, type GatewayChild } from "./processes.ts";
import { usdToNano } from "../../src/core/money.ts";

export const PROCESS_ADMIN_TOKEN = "process-admin-token-7c1e";

/**
 * A gateway as its own process (`bun src/index.ts`) on a fresh SQLite file: a crash (an unhandled
 * rejection) ends that process, which the test observes, instead of the test runner.
 */
export interface GatewayProcess extends GatewayChild {
  dataDir: string;
  dbFile: string;
  /** Whether the process is still running. */
  alive(): boolean;
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** A card-funded account (not promotional: no promotional rate caps) and a key on it. */
  newAccountWithKey(creditUsd?: number): Promise<{ accountId: string; key: string }>;
  /** The account's balance in nano-USD. */
  balanceNano(accountId: string): Promise<number>;
  /** GET /v1/generation?id= with the key: the status and the parsed body. */
  generation(id: string, key: string): Promise<{ status: number; body: any }>;
  /** Every row of the admin request log of an account (all pages). */
  requestLog(accountId: string): Promise<any[]>;
  /** Per-token prices of a model from GET /v1/models, in nano-USD. */
  prices(model: string, key: string): Promise<{ prompt: number; completion: number; cacheRead: number; cacheWrite: number }>;
  /** SIGKILL if still running, then removes the data directory. */
  stop(): Promise<void>;
}

/** Starts the gateway process with `env` (added to a fresh SQLite file and the admin token) and waits until ready. */
export async function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-process-"));
  const dbFile = join(dataDir, "gateway.db");
  const child = spawnGatewayChild({ DATABASE_URL: `sqlite:${dbFile}`, GATEWAY_ADMIN_TOKEN: PROCESS_ADMIN_TOKEN, GATEWAY_SANDBOX: "false", ...env });
  try {
    await untilReady(child, 30_000);
  } catch (error) {
    child.child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const url = child.url;

  async function admin(method: string, path: string, body?: unknown) {
    const response = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${PROCESS_ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: any = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    return { status: response.status, body: parsed };
  }

  return {
    ...child,
    dataDir,
    dbFile,
    alive: () => child.child.exitCode === null && child.child.signalCode === null,
    admin,
    async newAccountWithKey(creditUsd = 5) {
      const account = await admin("POST", "/admin/v1/accounts", { name: "fault test" });
      if (account.status !== 201) throw new Error(`account: ${account.status} ${JSON.stringify(account.body)}`);
      const accountId = account.body.data.id;
      const credit = await admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: creditUsd, kind: "card", reference: crypto.randomUUID() });
      if (credit.status !== 201) throw new Error(`credit: ${credit.status} ${JSON.stringify(credit.body)}`);
      const key = await admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "fault key" });
      if (key.status !== 201) throw new Error(`key: ${key.status} ${JSON.stringify(key.body)}`);
      return { accountId, key: key.body.data.key };
    },
    async balanceNano(accountId) {
      const answer = await admin("GET", `/admin/v1/accounts/${accountId}`);
      if (answer.status !== 200) throw new Error(`balance: ${answer.status} ${JSON.stringify(answer.body)}`);
      return usdToNano(String(answer.body.data.balance));
    },
    async generation(id, key) {
      const response = await fetch(`${url}/v1/generation?id=${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${key}` } });
      const text = await response.text();
      let body: any = text;
      try {
        body = JSON.parse(text);
      } catch {}
      return { status: response.status, body };
    },
    async requestLog(accountId) {
      const rows: any[] = [];
      let before = "";
      for (;;) {
        const page = await admin("GET", `/admin/v1/accounts/${accountId}/requests?limit=500${before ? `&before=${encodeURIComponent(before)}` : ""}`);
        if (page.status !== 200) throw new Error(`requests: ${page.status} ${JSON.stringify(page.body)}`);
        rows.push(...page.body.data);
        if (!page.body.next_before) return rows;
        before = page.body.next_before;
      }
    },
    async prices(model, key) {
      const response = await fetch(`${url}/v1/models/${encodeURIComponent(model)}`, { headers: { authorization: `Bearer ${key}` } });
      const body = (await response.json()) as any;
      const pricing = body?.pricing ?? body?.data?.pricing;
      if (!pricing) throw new Error(`no pricing for ${model}: ${JSON.stringify(body)}`);
      return {
        prompt: usdToNano(pricing.prompt),
        completion: usdToNano(pricing.completion),
        cacheRead: usdToNano(pricing.input_cache_read),
        cacheWrite: usdToNano(pricing.input_cache_write),
      };
    },
    async stop() {
      if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill("SIGKILL");
      await child.child.exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
