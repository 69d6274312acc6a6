import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { nanoToUsd, nanoToUsdString, usdToNano } from "../../src/core/money.ts";
import {
  SKIP_REASON,
  admin,
  burst,
  chat,
  cheapRequest,
  createScratchDatabase,
  exactCostRequest,
  getJson,
  newAccountWithKey,
  numbers,
  spawnGateway,
  stopGateway,
  tally,
  waitFor,
  type GatewayProcess,
  type ScratchDatabase,
} from "./harness.ts";

/**
 * Three real gateway processes on one Postgres database and one Redis: the balance, a key budget and
 * an RPM limit hold across all of them together; a key deleted through one instance is refused by every
 * instance within a second; generation records, usage and credits read the same through any instance.
 */

if (SKIP_REASON) {
  describe.skip(`three gateway processes on one Postgres and one Redis (${SKIP_REASON})`, () => {
    it("needs Postgres and Redis", () => {});
  });
} else {
  const INSTANCES = 3;
  let db: ScratchDatabase;
  let fake: FakeUpstream;
  let gateways: GatewayProcess[] = [];
  let urls: string[] = [];

  beforeAll(async () => {
    fake = await startFakeUpstream();
    db = await createScratchDatabase("shared");
    // All three start at once on the brand-new database: the migrations run under an advisory lock,
    // one instance at a time, and the later ones find them applied.
    const redisPrefix = `gw-e2e-scale-${process.pid}-${Date.now().toString(36)}:`;
    gateways = await Promise.all(
      Array.from({ length: INSTANCES }, (_, index) =>
        spawnGateway(`gateway ${index}`, { databaseUrl: db.url, upstreamUrl: fake.url, redisPrefix }),
      ),
    );
    urls = gateways.map((gateway) => gateway.url);
  }, 30_000);

  afterAll(async () => {
    const codes = await Promise.all(gateways.map((gateway) => stopGateway(gateway)));
    await fake?.stop();
    await db?.drop();
    expect(codes).toEqual(gateways.map(() => 0));
    for (const gateway of gateways) expect(gateway.output()).toBe("");
  }, 30_000);

  /** Samples a funds query from the shared database while `work` runs; returns the lowest values seen. */
  async function watch<T>(query: string, id: string, work: Promise<T>): Promise<{ result: T; lowest: Record<string, number>; samples: number }> {
    const lowest: Record<string, number> = {};
    let samples = 0;
    let done = false;
    const sampler = (async () => {
      while (!done) {
        const row = await numbers(db.sql, query, [id]);
        for (const [name, value] of Object.entries(row)) lowest[name] = Math.min(lowest[name] ?? Number.POSITIVE_INFINITY, value);
        samples++;
      }
    })();
    const result = await work.finally(() => (done = true));
    await sampler;
    return { result, lowest, samples };
  }

  const reservationsLeft = async () => (await numbers(db.sql, "select count(*) as n from reservations")).n;

  describe("three gateway processes on one Postgres and one Redis", () => {
    it("started together on an empty database: the migrations ran once", async () => {
      const applied = await numbers(db.sql, "select count(*) as n, count(distinct hash) as distinct_hashes from drizzle.__drizzle_migrations");
      expect(applied.n).toBeGreaterThan(0);
      expect(applied.distinct_hashes).toBe(applied.n);
      const instances = await numbers(db.sql, "select count(*) as n from gateway_instances");
      expect(instances.n).toBe(INSTANCES);
    });

    it("a balance that covers 7 requests: 100 at once over three instances → 7 served, never overspent", async () => {
      const { body, cost } = exactCostRequest("scale balance");
      const credit = 7 * cost + Math.floor(cost / 2);
      const account = await newAccountWithKey(urls[0]!, nanoToUsdString(credit));
      fake.reset();
      const { result: outcomes, lowest, samples } = await watch(
        `select a.total_credits_nano - a.total_debits_nano as balance,
                a.total_credits_nano - a.total_debits_nano
                  - coalesce((select sum(r.amount_nano) from reservations r where r.account_id = a.id), 0) as available
           from accounts a where a.id = $1`,
        account.accountId,
        burst(urls, account.key, body, 100),
      );
      for (let index = 0; index < INSTANCES; index++) expect(outcomes.filter((o) => o.instance === index).length).toBeGreaterThanOrEqual(33);
      expect(tally(outcomes)).toEqual({ "200": 7, "400 insufficient_balance": 93 });
      expect(fake.requests).toHaveLength(7);
      expect(samples).toBeGreaterThan(0);
      expect(lowest.balance).toBeGreaterThanOrEqual(0);
      expect(lowest.available).toBeGreaterThanOrEqual(0);

      await waitFor(async () => (await reservationsLeft()) === 0, 2_000, "the reservations table to empty");
      const expected = { total_credits: nanoToUsd(credit), total_usage: nanoToUsd(7 * cost), balance: nanoToUsd(credit - 7 * cost), currency: "USD" };
      for (const url of urls) {
        const { status, body: credits } = await getJson(url, "/v1/credits", account.key);
        expect(status).toBe(200);
        expect(credits.data).toEqual(expected);
        expect(credits.data.total_usage).toBeLessThanOrEqual(credits.data.total_credits);
      }
    });

    it("a key budget that covers 7 requests: 100 at once over three instances → 7 served, never overspent", async () => {
      const { body, cost } = exactCostRequest("scale key budget");
      const limit = 7 * cost + Math.floor(cost / 2);
      const owner = await newAccountWithKey(urls[1]!, "100", { limit: nanoToUsd(limit) });
      fake.reset();
      const { result: outcomes, lowest } = await watch(
        `select k.limit_nano - k.usage_nano as room,
                k.limit_nano - k.usage_nano
                  - coalesce((select sum(r.amount_nano) from reservations r where r.key_id = k.id), 0) as available
           from api_keys k where k.id = $1`,
        owner.keyId,
        burst(urls, owner.key, body, 100),
      );
      expect(tally(outcomes)).toEqual({ "200": 7, "429 key_budget_exceeded": 93 });
      expect(fake.requests).toHaveLength(7);
      expect(lowest.room).toBeGreaterThanOrEqual(0);
      expect(lowest.available).toBeGreaterThanOrEqual(0);

      await waitFor(async () => (await reservationsLeft()) === 0, 2_000, "the reservations table to empty");
      for (const url of urls) {
        const key = await getJson(url, "/v1/key", owner.key);
        expect(key.status).toBe(200);
        expect(key.body.data.usage).toBe(nanoToUsd(7 * cost));
        expect(key.body.data.usage).toBeLessThanOrEqual(key.body.data.limit);
        const credits = await getJson(url, "/v1/credits", owner.key);
        expect(credits.body.data.balance).toBe(nanoToUsd(usdToNano(100) - 7 * cost));
      }
    });

    it("an RPM limit is global: RPM 10, 30 requests over three instances → exactly 10 served", async () => {
      const limited = await newAccountWithKey(urls[2]!, "50", { rate_limit: { requests_per_minute: 10 } });
      fake.reset();
      const outcomes = await burst(urls, limited.key, cheapRequest("scale rpm"), 30);
      expect(tally(outcomes)).toEqual({ "200": 10, "429 rate_limit_exceeded": 20 });
      expect(fake.requests).toHaveLength(10);
      for (const refused of outcomes.filter((o) => o.status === 429)) {
        expect(refused.message).toContain("10 requests per minute");
        expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      }
      // Counted per instance, each would have served its 10. Still refused a moment later on every instance.
      const again = await Promise.all(urls.map((url, index) => chat(url, index, limited.key, cheapRequest("scale rpm again"))));
      expect(again.map((o) => o.status)).toEqual(urls.map(() => 429));
    });

    it("a key deleted through one instance's admin API is refused by every instance within one second", async () => {
      const owner = await newAccountWithKey(urls[0]!, "20");
      const body = cheapRequest("scale revocation");
      // Every instance has the key in its cache (the cache keeps a key for 1 s).
      const warm = await Promise.all(urls.map((url, index) => chat(url, index, owner.key, body)));
      expect(warm.map((o) => o.status)).toEqual(urls.map(() => 200));

      const deletedAt = performance.now();
      await admin(urls[0]!, "DELETE", `/admin/v1/keys/${owner.keyId}`);
      const refusedAfter = await Promise.all(
        urls.map(async (url, index) => {
          const served: number[] = [];
          for (;;) {
            const outcome = await chat(url, index, owner.key, body);
            if (outcome.status === 401) {
              expect(outcome.code).toBe("invalid_api_key");
              expect(outcome.message).toBe("this API key was deleted");
              return { refusedMs: outcome.answeredAt - deletedAt, servedAfterDelete: served.length, lastServedSentMs: Math.max(-1, ...served) };
            }
            expect(outcome.status).toBe(200);
            served.push(outcome.sentAt - deletedAt);
            expect(performance.now() - deletedAt).toBeLessThan(3_000);
            await Bun.sleep(10);
          }
        }),
      );
      // The instance that deleted it forgets it at once; the others within the cache's 1 s: nothing sent a
      // second or more after the delete was served (strict), and the refusal came in about a second.
      expect(refusedAfter[0]!.servedAfterDelete).toBe(0);
      for (const { refusedMs, lastServedSentMs } of refusedAfter) {
        expect(lastServedSentMs).toBeLessThan(1_000);
        expect(refusedMs).toBeLessThan(1_500);
      }
      // And it stays refused everywhere.
      const later = await Promise.all(urls.map((url, index) => chat(url, index, owner.key, body)));
      expect(later.map((o) => o.status)).toEqual(urls.map(() => 401));
    });

    it("generation records, usage and credits read the same through any instance", async () => {
      const owner = await newAccountWithKey(urls[1]!, "30");
      // Two requests per instance; each record is then read through every instance.
      const made = [] as { instance: number; requestId: string; completionId: string }[];
      for (let round = 0; round < 2; round++) {
        for (let index = 0; index < INSTANCES; index++) {
          const response = await fetch(`${urls[index]}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${owner.key}`, "content-type": "application/json" },
            body: JSON.stringify(cheapRequest(`scale reads ${round}.${index}`)),
          });
          expect(response.status).toBe(200);
          const json = (await response.json()) as any;
          made.push({ instance: index, requestId: response.headers.get("x-gateway-request-id")!, completionId: json.id });
        }
      }

      for (const { instance, requestId, completionId } of made) {
        // The instance that served it answers at once (its queued record is read too); the others once
        // the group commit has landed: within a second.
        const views: unknown[] = [];
        for (let reader = 0; reader < INSTANCES; reader++) {
          const url = urls[(instance + reader) % INSTANCES]!;
          let view: any;
          const waited = await waitFor(
            async () => {
              const answer = await getJson(url, `/v1/generation?id=${encodeURIComponent(requestId)}`, owner.key);
              if (answer.status === 200) view = answer.body.data;
              else expect(answer.status).toBe(404);
              return answer.status === 200;
            },
            1_000,
            `generation ${requestId} through instance ${(instance + reader) % INSTANCES}`,
            20,
          );
          if (reader === 0) expect(waited).toBeLessThan(100);
          expect(view.gateway_request_id).toBe(requestId);
          expect(view.id).toBe(completionId);
          views.push(view);
          // The chat-completion id finds the same record.
          const byCompletion = await getJson(url, `/v1/generation?id=${encodeURIComponent(completionId)}`, owner.key);
          expect(byCompletion.status).toBe(200);
          expect(byCompletion.body.data).toEqual(view);
        }
        expect(views[1]).toEqual(views[0]);
        expect(views[2]).toEqual(views[0]);
      }

      const perRequest = made.length;
      const reads = await Promise.all(
        urls.map(async (url) => ({
          credits: (await getJson(url, "/v1/credits", owner.key)).body.data,
          account: (await getJson(url, "/v1/usage", owner.key)).body.data,
          key: (await getJson(url, "/v1/usage?scope=key", owner.key)).body.data,
        })),
      );
      for (const read of reads.slice(1)) expect(read).toEqual(reads[0]!);
      expect(reads[0]!.account.total.requests).toBe(perRequest);
      expect(reads[0]!.key.total.requests).toBe(perRequest);
      expect(reads[0]!.credits.total_usage).toBeGreaterThan(0);
      expect(reads[0]!.account.total.cost).toBe(reads[0]!.credits.total_usage);
      const stored = await numbers(db.sql, "select coalesce(sum(total_cost_nano), 0) as cost, count(*) as n from generations where account_id = $1", [owner.accountId]);
      expect(stored.n).toBe(perRequest);
      expect(nanoToUsd(stored.cost)).toBe(reads[0]!.credits.total_usage);
    });
  });
}
