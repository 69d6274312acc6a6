import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";

export const ADMIN_TOKEN = "test-admin-token";
export const UPSTREAM_KEYS = { openai: "sk-upstream-openai", deepseek: "sk-upstream-deepseek", xai: "sk-upstream-xai" };

export interface TestGateway {
  gateway: RunningGateway;
  fake: FakeUpstream;
  url: string;
  dataDir: string;
  admin(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; headers: Headers }>;
  /** A funded account and a key on it. */
  newAccountWithKey(options?: { credit?: number; kind?: string; key?: Record<string, unknown> }): Promise<{ accountId: string; keyId: string; key: string }>;
  client(key: string): OpenAI;
  stop(): Promise<void>;
}

/** The admin API of the gateway at `url` (admin token ADMIN_TOKEN), in process or not. */
export function adminOf(url: string): Pick<TestGateway, "admin" | "newAccountWithKey"> {
  async function admin(method: string, path: string, body?: unknown, token = ADMIN_TOKEN) {
    const response = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null, headers: response.headers };
  }
  return {
    admin,
    async newAccountWithKey({ credit = 10, kind = "card", key = {} } = {}) {
      const account = await admin("POST", "/admin/v1/accounts", { name: "test account" });
      if (account.status !== 201) throw new Error(`account: ${JSON.stringify(account.body)}`);
      const accountId = account.body.data.id;
      if (credit > 0) {
        const credited = await admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: credit, kind, reference: crypto.randomUUID() });
        if (credited.status !== 201) throw new Error(`credit: ${JSON.stringify(credited.body)}`);
      }
      const created = await admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "test key", ...key });
      if (created.status !== 201) throw new Error(`key: ${JSON.stringify(created.body)}`);
      return { accountId, keyId: created.body.data.id, key: created.body.data.key };
    },
  };
}

/** A test gateway's admin token, no sandbox, and the fake upstream behind every OpenAI-format provider (Mistral off). */
export function testGatewayEnv(fake: FakeUpstream): Record<string, string> {
  return {
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    GATEWAY_SANDBOX: "false",
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: UPSTREAM_KEYS.openai,
    DEEPSEEK_BASE_URL: `${fake.url}/v1`,
    DEEPSEEK_API_KEY: UPSTREAM_KEYS.deepseek,
    XAI_BASE_URL: `${fake.url}/v1`,
    XAI_API_KEY: UPSTREAM_KEYS.xai,
    MISTRAL_API_KEY: "",
  };
}

/** A gateway on a random port, a temporary SQLite file and the fake upstream behind every OpenAI-format provider. */
export async function startTestGateway(
  options: { env?: Record<string, string>; fake?: FakeUpstream; now?: () => number; config?: string } = {},
): Promise<TestGateway> {
  const fake = options.fake ?? (await startFakeUpstream());
  const dataDir = mkdtempSync(join(tmpdir(), "gateway-test-"));
  const env: Record<string, string | undefined> = {
    ...process.env,
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
    EDGE_RATE_LIMIT_RPS: "0",
    ...testGatewayEnv(fake),
    ...options.env,
  };
  const gateway = await startGateway({ env, port: 0, now: options.now, configFile: options.config, log: createLogger("test", { silent: true }) });
  const url = gateway.url;

  return {
    gateway,
    fake,
    url,
    dataDir,
    ...adminOf(url),
    client: (key: string) => new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 }),
    async stop() {
      await gateway.stop();
      if (!options.fake) await fake.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
