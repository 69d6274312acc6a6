import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import OpenAI from "openai";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { catalog } from "../helpers/budget.ts";
import { expectLedgerExact, fundsOf, settled, startMoneyStore, storeKinds, type MoneyStore, type StoreKind } from "../helpers/money.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";

/**
 * Money invariants as a property test (issue 24): random prompts, usage (honest, lying, absent, absurd),
 * max_tokens, streaming, concurrency, key limits and plan windows, through the real gateway and the
 * official SDK. After every run, read from the database and the reservation machinery: no balance below
 * zero, no key over its limit, no window over its cap, credits − debits = balance, Σ generation costs =
 * debits, no hold left. Seedable: MONEY_SEED=<n> replays a failure (the seed of each run is in its name).
 */

const SEED = Number(process.env.MONEY_SEED ?? 20261126);
/** Runs per store: SQLite process memory (the default) gets the most. */
const RUNS: Record<StoreKind, number> = { "sqlite-process": 40, "sqlite-thread": 20, "sqlite-shared": 20, postgres: 20 };

/** mulberry32: small, fast, good enough to draw test cases. */
function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!;
  /** Log-uniform integer in [lo, hi]: small and large values alike. */
  const logInt = (lo: number, hi: number) => Math.min(hi, Math.max(lo, Math.round(Math.exp(Math.log(lo) + next() * (Math.log(hi) - Math.log(lo))))));
  return { next, int, pick, logInt, chance: (p: number) => next() < p };
}
type Rng = ReturnType<typeof random>;

const MODELS = ["gpt-6-luna", "gpt-6.2-astra", "gpt-5.6-sol", "deepseek-flash"] as const;
const WORDS = "the quick brown fox jumps over lazy dogs while a careful gateway counts every token it holds and bills".split(" ");

/** A random usage report, honest or not, for a request capped at `cap` output tokens (when known). */
function usageDirective(rng: Rng, cap: number | undefined): Record<string, unknown> {
  const limit = cap ?? 2_000;
  switch (rng.pick(["default", "honest", "honest", "liar", "liar", "none", "null", "absurd", "fail"] as const)) {
    case "default":
      return {}; // the fake's own count: "Hello from <model>." is 4 tokens, past a max_tokens below 4
    case "honest":
      return { usage: { completion_tokens: rng.int(0, limit), cached_tokens: rng.chance(0.3) ? rng.int(0, 20) : 0 } };
    case "liar":
      return {
        usage: {
          prompt_tokens: rng.logInt(1, 200_000),
          completion_tokens: rng.chance(0.2) ? 10_000_000 : rng.logInt(limit + 1, limit * 100 + 100),
          cached_tokens: rng.chance(0.3) ? rng.int(-5_000, 5_000) : 0,
          cache_write_tokens: rng.chance(0.3) ? rng.logInt(1, 50_000) : undefined,
        },
      };
    case "none":
      return { no_usage: true, text: rng.pick(WORDS) + " " + rng.pick(WORDS) };
    case "null":
      return { usage_null: true };
    case "absurd":
      return { usage: { prompt_tokens: rng.pick([-5, 12.75, 1e15, 1e308]), completion_tokens: rng.pick([-1, 3.5, 1e15, 1e308]), cached_tokens: rng.pick([-1e6, 1e308, 2.5]) } };
    case "fail":
      return { status: 500 };
  }
}

interface Outcome {
  /** The gateway wrote a generation record for it (served, or failed upstream). */
  recorded: boolean;
  refusal?: string;
}

/** One request, drawn in full before any is sent: a seed replays the same requests whatever the timing. */
interface Planned {
  client: OpenAI;
  model: string;
  content: string;
  cap?: number;
  mode: "chat" | "stream" | "responses";
  includeUsage: boolean;
  tools: boolean;
}

function planRequest(rng: Rng, clients: OpenAI[]): Planned {
  const client = rng.pick(clients);
  const model = rng.pick(MODELS);
  const max = catalog.get(model)!.max_output_tokens;
  // Mostly modest caps (a request without one holds the model's whole maximum: $5 on gpt-6.2-astra).
  const cap = rng.chance(0.15) ? undefined : rng.chance(0.8) ? rng.logInt(1, 20_000) : rng.logInt(1, max);
  const prompt = Array.from({ length: rng.logInt(1, 300) }, () => rng.pick(WORDS)).join(" ");
  const content = `${prompt} [[fake ${JSON.stringify(usageDirective(rng, cap))}]]`;
  const stream = rng.chance(0.35);
  const mode = stream ? "stream" : model === "gpt-6-luna" && rng.chance(0.3) ? "responses" : "chat";
  return { client, model, content, cap, mode, includeUsage: rng.chance(0.5), tools: rng.chance(0.15) };
}

/** Sends one planned request through the official SDK; what the gateway answered. */
async function send(request: Planned): Promise<Outcome> {
  const { client, model, content, cap } = request;
  try {
    if (request.mode === "responses") {
      await client.responses.create({ model, input: content, ...(cap === undefined ? {} : { max_output_tokens: cap }) });
    } else {
      const tools = request.tools ? [{ type: "function" as const, function: { name: "lookup", parameters: { type: "object", properties: { query: { type: "string" } } } } }] : undefined;
      const body: Record<string, unknown> = { model, messages: [{ role: "user", content }], ...(cap === undefined ? {} : { max_tokens: cap }), ...(tools ? { tools } : {}) };
      if (request.mode === "stream") {
        const chunks = await client.chat.completions.create({ ...(body as any), stream: true, stream_options: request.includeUsage ? { include_usage: true } : undefined });
        for await (const _chunk of chunks as any);
      } else {
        await client.chat.completions.create(body as any);
      }
    }
    return { recorded: true };
  } catch (error) {
    if (!(error instanceof OpenAI.APIError)) throw error;
    const code = (error.error as any)?.code ?? (error as any).code;
    if (code === "insufficient_balance" || code === "key_budget_exceeded" || code === "spend_window_exceeded") return { recorded: false, refusal: code };
    // An upstream failure (the fake's 500) is a 502 with its record (cost 0).
    if (error.status === 502) return { recorded: true };
    throw new Error(`unexpected answer ${error.status} ${JSON.stringify(error.error)}`);
  }
}

/** Runs `count` tasks with at most `width` at once. */
async function pool<T>(count: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

let fake: FakeUpstream;
beforeAll(async () => {
  fake = await startFakeUpstream({ record: false });
});
afterAll(async () => {
  await fake.stop();
});

const totals = { runs: 0, requests: 0, served: 0, refused: 0, unbilled: 0, emptied: 0, keysAtLimit: 0, windowsAtCap: 0 };
afterAll(() => {
  console.log(
    `money invariants: seed ${SEED}, ${totals.runs} runs, ${totals.requests} requests (${totals.served} recorded, ${totals.refused} refused by the budget); ` +
      `runs with unbilled cost ${totals.unbilled}, balance spent to zero ${totals.emptied}, a key at its limit ${totals.keysAtLimit}, a window at its cap ${totals.windowsAtCap}`,
  );
});

for (const kind of storeKinds()) {
  describe(`money invariants (${kind})`, () => {
    let store: MoneyStore;
    beforeAll(async () => {
      store = await startMoneyStore(kind, { fake });
    });
    afterAll(async () => {
      await store?.close();
    });

    for (let run = 0; run < RUNS[kind]; run++) {
      const seed = SEED + run * 7919 + kind.length * 104_729;
      it(`run ${run} (seed ${seed}) keeps every balance, key limit and window, and leaves no hold`, async () => {
        const rng = random(seed);
        const { t } = store;
        const withPlan = rng.chance(0.35);
        // A plan adds $5 of bonus and windows of $10 / 4 h, $40 / week, $100 / month: credit past them so they bind.
        const credit = withPlan ? rng.int(5, 40) : rng.pick([5, 5.5, 6, 8, 12, 25, 50]);
        const { accountId, keyId, key } = await t.newAccountWithKey({ credit, key: rng.chance(0.5) ? { limit: rng.pick([0.05, 0.3, 1, 2.5]) } : {} });
        if (withPlan) expect((await t.admin("POST", `/admin/v1/accounts/${accountId}/plan`, { plan: "pro", funding: "card" })).status).toBe(201);
        const keys = [{ keyId, key }];
        for (let i = rng.int(0, 2); i > 0; i--) {
          const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "extra", ...(rng.chance(0.6) ? { limit: rng.pick([0.02, 0.5, 3]) } : {}) });
          expect(created.status).toBe(201);
          keys.push({ keyId: created.body.data.id, key: created.body.data.key });
        }
        const clients = keys.map(({ key }) => t.client(key));

        const planned = Array.from({ length: rng.int(10, 40) }, () => planRequest(rng, clients));
        const count = planned.length;
        const outcomes = await pool(count, rng.pick([1, 4, 16, 40]), (i) => send(planned[i]!));
        const recorded = outcomes.filter((o) => o.recorded).length;
        totals.runs++;
        totals.requests += count;
        totals.served += recorded;
        totals.refused += count - recorded;

        // The stored ledger, once every record is committed (shared and Postgres: no hold row left either).
        const money = await settled(store, accountId, recorded);
        expect(money.generations).toBe(recorded);
        expectLedgerExact(money);
        if (money.unbilled > 0) totals.unbilled++;
        if (money.credits === money.debits) totals.emptied++;
        let keyAtLimit = false;
        for (const { keyId } of keys) {
          const stored = await store.storedKey(keyId);
          if (stored.limit !== null) expect(stored.usage).toBeLessThanOrEqual(stored.limit);
          if (stored.limit !== null && stored.usage === stored.limit) keyAtLimit = true;
          expect(stored.usage).toBe(stored.generationCosts);
        }
        if (keyAtLimit) totals.keysAtLimit++;

        // What a reservation sees now: nothing held, for the account, every key and every window.
        const funds = await fundsOf(t, accountId);
        expect(funds.held).toBe(0);
        expect(funds.balance).toBe(money.credits - money.debits);
        for (const { keyId } of keys) {
          const keyFunds = (await fundsOf(t, accountId, keyId)).key!;
          if (keyFunds.limit !== null) expect(keyFunds.held).toBe(0);
        }
        for (const [name, window] of Object.entries(funds.windows)) {
          // All of this run's spend is inside every window: committed spend, no hold, never past the cap.
          expect({ name, spent: window.spentOrHeld }).toEqual({ name, spent: money.generationCosts });
          expect(money.generationCosts).toBeLessThanOrEqual(window.cap);
          expect(await store.spentSince(accountId, Date.now() - 3_600_000)).toBe(money.generationCosts);
        }
        if (withPlan) expect(Object.keys(funds.windows).sort()).toEqual(["four_hours", "month", "week"]);
        if (withPlan && money.generationCosts === funds.windows.four_hours!.cap) totals.windowsAtCap++;
        expect(nanoToUsd(money.credits)).toBe(credit + (withPlan ? 5 : 0));
        expect(usdToNano(nanoToUsd(money.debits))).toBe(money.debits);
      });
    }
  });
}
