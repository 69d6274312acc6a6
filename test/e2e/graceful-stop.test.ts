import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { usdToNano } from "../../src/core/money.ts";
import { spawnGatewayChild, untilReady, waitFor, type GatewayChild } from "../helpers/processes.ts";

// Normally a few seconds; the margin is for a loaded machine (bun's default per-test limit is 5 s).
setDefaultTimeout(20_000);

const ADMIN_TOKEN = "graceful-stop-admin-token";
const MODEL = "gpt-6-luna";
const REQUESTS = 60;
const CREDIT_USD = 10;



interface Outcome {
  index: number;
  stream: boolean;
  status: number;
  requestId: string | null;
  /** Non-streaming: the x-gateway-cost header in nano-USD. */
  headerCost: number | null;
  complete: boolean;
  error?: string;
}

let dir: string;
let fake: FakeUpstream;
let child: Subprocess<"ignore", "pipe", "pipe"> | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gateway-graceful-"));
  fake = await startFakeUpstream();
});

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await child?.exited;
  await fake?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** `bun src/index.ts` on its own SQLite file, pointed at the fake upstream. */
function spawnGateway(dbFile: string, env: Record<string, string> = {}): GatewayChild {
  return spawnGatewayChild({
    DATABASE_URL: `sqlite:${dbFile}`,
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    OPENAI_BASE_URL: `${fake.url}/v1`,
    OPENAI_API_KEY: "x",
    ...env,
  });
}

describe("graceful stop of the real process", () => {
  it("SIGTERM drains every accepted request, exits 0 and leaves generations and ledger consistent", async () => {
    const dbFile = join(dir, "gw.db");
    const gateway = spawnGateway(dbFile, { GATEWAY_LOG: "silent" });
    child = gateway.child;
    const url = gateway.url;
    await untilReady(gateway, 15_000);

    const admin = async (path: string, body: unknown) => {
      const response = await fetch(url + path, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const json = (await response.json()) as any;
      if (response.status !== 201) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
      return json.data;
    };
    const account = await admin("/admin/v1/accounts", { name: "graceful" });
    await admin(`/admin/v1/accounts/${account.id}/credits`, { amount: CREDIT_USD, kind: "card", reference: "graceful-credit" });
    const { key } = await admin(`/admin/v1/accounts/${account.id}/keys`, { name: "graceful key" });

    fake.reset();
    let answered = 0;
    const inFlight: Promise<Outcome>[] = [];
    for (let index = 0; index < REQUESTS; index++) {
      const stream = index % 2 === 1;
      // Non-streaming: the upstream waits 300-460 ms. Streaming: 7 events 50-70 ms apart (~300-420 ms).
      const directive = stream ? { chunk_delay_ms: 50 + (index % 3) * 10 } : { delay_ms: 300 + (index % 5) * 40 };
      const body = {
        model: MODEL,
        messages: [{ role: "user", content: `request ${index} [[fake ${JSON.stringify(directive)}]]` }],
        ...(stream ? { stream: true, ...(index % 4 === 1 ? { stream_options: { include_usage: true } } : {}) } : {}),
      };
      inFlight.push(
        send(url, key, index, stream, body).finally(() => {
          answered++;
        }),
      );
    }

    // Every request has reached the upstream: it was accepted and is now in flight.
    await waitFor(() => fake.requests.length === REQUESTS, 10_000, "all requests at the upstream");
    child.kill("SIGTERM");
    const signalledAt = performance.now();
    const answeredBeforeSignal = answered;
    // Once the signal is handled, new connections are refused while the accepted requests drain.
    await Bun.sleep(50);
    const late = await fetch(`${url}/health`, { keepalive: false }).then(
      (response) => `answered ${response.status}`,
      (error) => String(error),
    );
    expect(late).toContain("ECONNREFUSED");

    const outcomes = await Promise.all(inFlight);
    const exitCode = await Promise.race([child.exited, Bun.sleep(15_000).then(() => "timeout" as const)]);
    const stoppedAt = performance.now();

    const failures = outcomes.filter((outcome) => outcome.status !== 200 || !outcome.complete);
    expect(failures).toEqual([]);
    expect(exitCode).toBe(0);
    expect(await gateway.stderr.all).toBe("");
    expect(await gateway.stdout.all).toBe("");
    // The requests were really in flight when the signal came (all of them, unless the machine is
    // very slow), and the stop waited for them.
    expect(answeredBeforeSignal).toBeLessThan(REQUESTS / 2);
    expect(stoppedAt - signalledAt).toBeGreaterThan(100);

    const successful = outcomes.length;
    const db = new Database(dbFile, { readonly: true });
    try {
      const generations = db
        .query<{ id: string; stream: number; status: string; total_cost_nano: number; prompt_tokens: number; completion_tokens: number }, []>(
          "SELECT id, stream, status, total_cost_nano, prompt_tokens, completion_tokens FROM generations",
        )
        .all();
      expect(generations).toHaveLength(successful);
      const byId = new Map(generations.map((row) => [row.id, row]));
      for (const outcome of outcomes) {
        const row = byId.get(outcome.requestId!);
        expect(row).toBeDefined();
        expect(row!.status).toBe("success");
        expect(row!.stream).toBe(outcome.stream ? 1 : 0);
        expect(row!.prompt_tokens).toBeGreaterThan(0);
        if (!outcome.stream) expect(row!.total_cost_nano).toBe(outcome.headerCost!);
      }

      // A usage debit is its generation (the ledger view): one per successful request, nothing written besides.
      const usageDebits = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM ledger WHERE kind = 'usage'").get()!;
      expect(usageDebits.n).toBe(successful);
      expect(db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM ledger_entries WHERE kind = 'usage'").get()!.n).toBe(0);

      // The balance from the ledger alone: credits minus debits.
      const ledger = db
        .query<{ credits: number; debits: number }, [string]>(
          `SELECT COALESCE(SUM(CASE WHEN amount_nano > 0 THEN amount_nano END), 0) AS credits,
                  COALESCE(SUM(CASE WHEN amount_nano < 0 THEN -amount_nano END), 0) AS debits
             FROM ledger WHERE account_id = ?`,
        )
        .get(account.id)!;
      const headerCosts = outcomes.filter((outcome) => !outcome.stream).reduce((sum, outcome) => sum + outcome.headerCost!, 0);
      const streamCosts = outcomes.filter((outcome) => outcome.stream).reduce((sum, outcome) => sum + byId.get(outcome.requestId!)!.total_cost_nano, 0);
      expect(ledger.credits).toBe(usdToNano(CREDIT_USD));
      expect(ledger.credits - ledger.debits).toBe(usdToNano(CREDIT_USD) - headerCosts - streamCosts);

      // The maintained totals agree with the ledger.
      const totals = db
        .query<{ total_credits_nano: number; total_debits_nano: number }, [string]>(
          "SELECT total_credits_nano, total_debits_nano FROM accounts WHERE id = ?",
        )
        .get(account.id)!;
      expect(totals).toEqual({ total_credits_nano: ledger.credits, total_debits_nano: ledger.debits });
    } finally {
      db.close();
    }
  });
});

async function send(url: string, key: string, index: number, stream: boolean, body: unknown): Promise<Outcome> {
  const outcome: Outcome = { index, stream, status: 0, requestId: null, headerCost: null, complete: false };
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    outcome.status = response.status;
    outcome.requestId = response.headers.get("x-gateway-request-id");
    const text = await response.text();
    if (response.status !== 200) {
      outcome.error = text;
      return outcome;
    }
    if (!stream) {
      const cost = response.headers.get("x-gateway-cost");
      outcome.headerCost = cost === null ? null : usdToNano(cost);
      const json = JSON.parse(text);
      outcome.complete = json.choices?.[0]?.message?.content === `Hello from ${MODEL}.` && json.usage?.total_tokens > 0 && cost !== null;
    } else {
      const data = text
        .split("\n\n")
        .filter((frame) => frame.startsWith("data: "))
        .map((frame) => frame.slice(6));
      const chunks = data.filter((payload) => payload !== "[DONE]").map((payload) => JSON.parse(payload));
      const content = chunks.map((chunk) => chunk.choices?.[0]?.delta?.content ?? "").join("");
      const finished = chunks.some((chunk) => chunk.choices?.[0]?.finish_reason === "stop");
      const usageWanted = index % 4 === 1;
      const usageSeen = chunks.some((chunk) => chunk.usage);
      outcome.complete = data[data.length - 1] === "[DONE]" && content === `Hello from ${MODEL}.` && finished && usageSeen === usageWanted;
    }
    if (!outcome.complete) outcome.error = text.slice(0, 500);
  } catch (error) {
    outcome.error = String(error);
  }
  return outcome;
}

describe("graceful stop of an idle process", () => {
  it("SIGTERM closes every plugin before the process ends: the last log lines are `stopping`, `stopped`", async () => {
    const idle = spawnGateway(join(dir, "idle.db"));
    await untilReady(idle, 15_000);
    idle.child.kill("SIGTERM");
    expect(await Promise.race([idle.child.exited, Bun.sleep(15_000).then(() => "timeout" as const)])).toBe(0);
    // An unreferenced worker thread (the WAL checkpointer) once let the process end half-way through its close.
    const messages = (await idle.stdout.all).trim().split("\n").map((line) => JSON.parse(line).message);
    expect(messages.slice(-2)).toEqual(["stopping", "stopped"]);
  });
});
