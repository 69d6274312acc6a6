import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { join } from "node:path";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { spawnGatewayChild } from "../helpers/processes.ts";
import { burst, credits, exactCostRequest, topUp } from "../helpers/budget.ts";
import { nanoToUsd, nanoToUsdString } from "../../src/core/money.ts";

/**
 * The default SQLite set-up: budget holds in the gateway process's memory (`storage.sqlite_holds:
 * process`), no write per request. What must still hold: concurrent requests never overspend, every
 * hold is given back whatever way the request ends, and no second process can share the file.
 */

// gpt-6.2-astra: $40 per million output tokens, so 18,000 output tokens ≈ $0.72 per request.
const MODEL = "gpt-6.2-astra";
const MAX_TOKENS = 18_000;

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(); // plugins-config.yaml defaults: sqlite_holds process
});
afterAll(async () => {
  await t?.stop();
});

describe("holds in the gateway's memory", () => {
  it("serve exactly 7 of 100 concurrent requests from a balance that covers 7, and bill exactly those", async () => {
    const { body, reservation } = exactCostRequest(MODEL, MAX_TOKENS, "process race");
    const credit = 7 * reservation + Math.floor(reservation / 2);
    const { accountId, key } = await t.newAccountWithKey({ credit: 0 });
    await topUp(t, accountId, nanoToUsdString(credit));
    t.fake.reset();
    const outcomes = await burst(t.client(key), body, 100);
    expect(outcomes.filter((o) => o.ok)).toHaveLength(7);
    for (const o of outcomes) if (!o.ok) expect(o.error.code).toBe("insufficient_balance");
    expect(t.fake.requests).toHaveLength(7);
    const balance = await credits(t, key);
    expect(balance.total_usage).toBe(nanoToUsd(7 * reservation));
    expect(balance.balance).toBe(nanoToUsd(credit - 7 * reservation));
  });

  it("serve exactly 7 of 100 against a key budget", async () => {
    const { body, reservation } = exactCostRequest(MODEL, MAX_TOKENS, "process key race");
    const { accountId, key } = await t.newAccountWithKey({ credit: 0, key: { limit: nanoToUsd(7 * reservation + Math.floor(reservation / 2)) } });
    await topUp(t, accountId, "100");
    const outcomes = await burst(t.client(key), body, 100);
    expect(outcomes.filter((o) => o.ok)).toHaveLength(7);
    for (const o of outcomes) if (!o.ok) expect(o.error.code).toBe("key_budget_exceeded");
  });

  it("are given back after upstream failures and client disconnects: the balance that covers one request still serves it", async () => {
    // 90,000 output tokens ≈ $3.60: the $5 card minimum covers one such hold, not two.
    const { body, reservation } = exactCostRequest(MODEL, 90_000, "process release");
    const { accountId, key } = await t.newAccountWithKey({ credit: 0 });
    await topUp(t, accountId, "5");
    expect(5e9).toBeGreaterThan(reservation);
    expect(5e9).toBeLessThan(2 * reservation);
    const client = t.client(key);

    // 20 upstream failures in a row: each held the whole balance while it ran.
    const failing = { ...body, messages: [{ role: "user", content: `fail [[fake ${JSON.stringify({ status: 500 })}]]` }] };
    for (let i = 0; i < 20; i++) {
      const error = await client.chat.completions.create(failing as any).catch((e: InstanceType<typeof OpenAI.APIError>) => e);
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    }

    // A stream the client abandons after its first chunk: billed for what was streamed, hold released.
    const slow = { ...body, stream: true, messages: [{ role: "user", content: `stream [[fake ${JSON.stringify({ text: "a b c d e f", chunk_delay_ms: 50 })}]]` }] };
    const controller = new AbortController();
    const stream = await client.chat.completions.create(slow as any, { signal: controller.signal });
    for await (const _chunk of stream as any) {
      controller.abort();
      break;
    }
    await Bun.sleep(200); // the gateway notices the disconnect and settles the request

    // Only the streamed text was billed; the one hold the balance covers is free again.
    const { balance } = await credits(t, key);
    expect(balance).toBeGreaterThan(nanoToUsd(reservation));
    const completion = await client.chat.completions.create(body as any);
    expect(completion.choices[0]!.message.content).toBeTruthy();
  });
});

describe("funds read once and kept until the gateway writes again", () => {
  it("a top-up serves the very next request, right after a refusal for want of funds", async () => {
    const { body, reservation } = exactCostRequest(MODEL, MAX_TOKENS, "process top-up");
    const { accountId, key } = await t.newAccountWithKey({ credit: 0 });
    const client = t.client(key);
    const refused = await client.chat.completions.create(body as any).catch((e: InstanceType<typeof OpenAI.APIError>) => e);
    expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe("insufficient_balance");
    await topUp(t, accountId, nanoToUsdString(Math.max(5e9, reservation)));
    const served = await client.chat.completions.create(body as any);
    expect(served.choices[0]!.message.content).toBeTruthy();
  });
});

describe("one process per SQLite file", () => {
  async function startSecond(env: Record<string, string>) {
    const second = spawnGatewayChild({
      DATABASE_URL: `sqlite:${join(t.dataDir, "gateway.db")}`,
      GATEWAY_ADMIN_TOKEN: "second",
      GATEWAY_LOG: "silent",
      ...env,
    });
    const code = await Promise.race([second.child.exited, Bun.sleep(20_000).then(() => "still running" as const)]);
    if (code === "still running") second.child.kill("SIGKILL");
    return { code, output: (await second.stdout.all) + (await second.stderr.all) };
  }

  it("refuses to start a second gateway process on the file, in either holds mode, naming the way out", async () => {
    for (const holds of ["process", "shared"]) {
      const { code, output } = await startSecond({ SQLITE_HOLDS: holds });
      expect(code).not.toBe(0);
      expect(code).not.toBe("still running");
      expect(output).toContain("gateway.db is in use by");
      expect(output).toContain("sqlite_holds: shared, or use Postgres");
    }
    // The first gateway kept serving.
    const response = await fetch(`${t.url}/health`);
    expect(response.status).toBe(200);
  });
});
