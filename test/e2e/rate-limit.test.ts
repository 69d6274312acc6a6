import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { join } from "node:path";
import Redis from "ioredis";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { countPromptTokens } from "../../src/plugins/token-count/count.ts";

/**
 * Requests and tokens per minute through the OpenAI SDK. The gateway's clock is injected: windows
 * move by advancing `clock`, never by sleeping. Runs on the in-memory windows, or on Redis when
 * REDIS_URL is set (then also: two instances share one count).
 */

const REDIS_URL = process.env.REDIS_URL;
const MODEL = "gpt-6-luna"; // family openai: the prompt bound is the exact o200k count
const prefix = `gateway-test:rate-limit-e2e:${crypto.randomUUID()}:`;

let clock = Date.now();
const now = () => clock;
/** Moves every test gateway's clock forward. */
const advance = (ms: number) => (clock += ms);

let t: TestGateway;
beforeAll(async () => {
  // Shared holds: the two-instance test below opens a second gateway on this gateway's SQLite file.
  t = await startTestGateway({ now, env: { RATE_LIMIT_REDIS_PREFIX: prefix, SQLITE_HOLDS: "shared" } });
});
afterAll(async () => {
  await t.stop();
  if (REDIS_URL) {
    const raw = new Redis(REDIS_URL);
    const keys = await raw.keys(`${prefix}*`);
    if (keys.length > 0) await raw.del(...keys);
    await raw.quit();
  }
});

type Message = { role: "user"; content: string };
const user = (content: string): Message[] => [{ role: "user", content }];
const directive = (fake: Record<string, unknown>) => `[[fake ${JSON.stringify(fake)}]]`;
/** The prompt bound the gateway charges at admission for these messages. */
const promptBound = (messages: Message[]) => countPromptTokens({ messages }, true);
/** A prompt of about n tokens (" word" is one o200k token). */
const longText = (tokens: number) => "word".concat(" word".repeat(tokens - 1));

function chat(client: OpenAI, messages: Message[]) {
  return client.chat.completions.create({ model: MODEL, messages });
}

/** The SDK's error for a refused call (fails the test when the call succeeds). */
async function refused(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const outcome = await call.then(
    () => undefined,
    (error) => error,
  );
  if (!(outcome instanceof OpenAI.APIError)) throw new Error(`expected an API error, got ${outcome === undefined ? "a success" : String(outcome)}`);
  return outcome;
}

async function expectRateLimited(call: Promise<unknown>, retryAfter: number | null) {
  const error = await refused(call);
  expect(error.status).toBe(429);
  expect(error.code).toBe("rate_limit_exceeded");
  expect((error.error as any)?.type).toBe("rate_limit_error");
  expect(error.headers?.get("retry-after") ?? null).toBe(retryAfter === null ? null : String(retryAfter));
  return error;
}

async function keyInfo(gateway: TestGateway, key: string) {
  const response = await fetch(`${gateway.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as any).data;
}

describe("rate limit: requests per minute", () => {
  it("refuses the request past the key's RPM with 429, retry-after and the limit, and admits again as the window moves", async () => {
    const { key } = await t.newAccountWithKey({ key: { rate_limit: { requests_per_minute: 3 } } });
    const client = t.client(key);
    for (let i = 0; i < 3; i++) await chat(client, user("hi"));
    const error = await expectRateLimited(chat(client, user("hi")), 20);
    expect(error.message).toContain("3 requests per minute (RPM)");
    expect(error.message).toContain("retry after 20 s");

    advance(19_000);
    await expectRateLimited(chat(client, user("hi")), 1);
    advance(1_000);
    await chat(client, user("hi"));
    await expectRateLimited(chat(client, user("hi")), 20);

    advance(60_000);
    for (let i = 0; i < 3; i++) await chat(client, user("hi"));
    await expectRateLimited(chat(client, user("hi")), 20);
  });

  it("counts failed requests (their tokens only as far as usage reports)", async () => {
    const { key } = await t.newAccountWithKey({ key: { rate_limit: { requests_per_minute: 3, tokens_per_minute: 1000 } } });
    const client = t.client(key);
    const big = user(`${longText(550)} ${directive({ status: 500 })}`);
    expect(promptBound(big)).toBeGreaterThan(500);
    expect((await refused(chat(client, big))).status).toBe(502);
    // The failed request reported no usage: its prompt charge was given back, so 550 more tokens fit.
    await chat(client, user(`${longText(550)} ${directive({ usage: { prompt_tokens: 10, completion_tokens: 0 } })}`));
    await chat(client, user("hi"));
    const error = await expectRateLimited(chat(client, user("hi")), 20);
    expect(error.message).toContain("RPM");
  });
});

describe("rate limit: tokens per minute", () => {
  it("charges the prompt at admission, corrects it to the reported prompt and adds the completion at settle", async () => {
    const { key } = await t.newAccountWithKey({ key: { rate_limit: { tokens_per_minute: 1000 } } });
    const client = t.client(key);
    t.fake.reset();

    // Admission: while a 550-token prompt is in flight, another one does not fit (550 + 550 > 1000).
    const slow = user(`${longText(550)} ${directive({ delay_ms: 300, usage: { prompt_tokens: 20, completion_tokens: 0 } })}`);
    const inFlight = chat(client, slow);
    while (t.fake.requests.length === 0) await Bun.sleep(5);
    const second = user(longText(550));
    const error = await expectRateLimited(chat(client, second), Math.ceil(((promptBound(slow) + promptBound(second) - 1000) * 60) / 1000));
    expect(error.message).toContain("1000 tokens per minute (TPM)");

    // Settle: the upstream reported 20 prompt tokens, not the bound: the window holds 20 now.
    await inFlight;
    const big = user(`${longText(550)} ${directive({ usage: { prompt_tokens: 500, completion_tokens: 480 } })}`);
    await chat(client, big);
    // 20 + 500 + 480 = 1000 tokens: the next prompt waits until its own size has drained.
    const tiny = user("hi");
    await expectRateLimited(chat(client, tiny), Math.ceil((promptBound(tiny) * 60) / 1000));
    advance(Math.ceil((promptBound(tiny) * 60) / 1000) * 1000);
    await chat(client, tiny);
  });

  it("counts a stream's completion from its usage report at the end", async () => {
    const { key } = await t.newAccountWithKey({ key: { rate_limit: { tokens_per_minute: 1000 } } });
    const client = t.client(key);
    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      messages: user(directive({ usage: { prompt_tokens: 10, completion_tokens: 1990 } })),
    });
    for await (const _chunk of stream);
    // 2000 tokens in a 1000-per-minute window: 1000 + the next prompt must drain first.
    const tiny = user("hi");
    await expectRateLimited(chat(client, tiny), Math.ceil(((1000 + promptBound(tiny)) * 60) / 1000));
    advance(60_000);
    await expectRateLimited(chat(client, tiny), Math.ceil((promptBound(tiny) * 60) / 1000));
  });

  it("refuses a prompt larger than the whole TPM limit and says no retry helps", async () => {
    const { key } = await t.newAccountWithKey({ key: { rate_limit: { tokens_per_minute: 100 } } });
    const client = t.client(key);
    t.fake.reset();
    const error = await expectRateLimited(chat(client, user(longText(300))), null);
    expect(error.message).toContain("more than this key's whole limit of 100 tokens per minute (TPM)");
    expect(error.message).toContain("no retry can succeed");
    expect(error.headers?.get("x-should-retry")).toBe("false");
    expect(t.fake.requests.length).toBe(0);
    await chat(client, user("hi")); // nothing was charged
  });
});

describe("rate limit: promotional accounts", () => {
  it("caps an account without a paid top-up at 10 RPM, shows it in /v1/key, and lifts it at the first card top-up", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 5, kind: "promotional" });
    const client = t.client(key);
    expect((await keyInfo(t, key)).rate_limit).toEqual({ requests_per_minute: 10, tokens_per_minute: 50_000 });

    for (let i = 0; i < 10; i++) await chat(client, user("hi"));
    const error = await expectRateLimited(chat(client, user("hi")), 6);
    expect(error.message).toContain("10 requests per minute (RPM)");
    expect(error.message).toContain("without a paid top-up");

    const topUp = await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 5, kind: "card", reference: crypto.randomUUID() });
    expect(topUp.status).toBe(201);
    advance(1_000); // the promotional status is cached at most 1 s
    for (let i = 0; i < 30; i++) await chat(client, user("hi"));
    expect((await keyInfo(t, key)).rate_limit).toEqual({ requests_per_minute: null, tokens_per_minute: null });
  });

  it("shows the lifted caps in /v1/key at once after a top-up", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 1, kind: "bonus" });
    expect((await keyInfo(t, key)).rate_limit).toEqual({ requests_per_minute: 10, tokens_per_minute: 50_000 });
    await t.admin("POST", `/admin/v1/accounts/${accountId}/credits`, { amount: 12, kind: "usdt", reference: crypto.randomUUID() });
    expect((await keyInfo(t, key)).rate_limit).toEqual({ requests_per_minute: null, tokens_per_minute: null });
  });

  it("combines the caps with the key's own limits: the stricter wins", async () => {
    const { key } = await t.newAccountWithKey({ credit: 5, kind: "promotional", key: { rate_limit: { requests_per_minute: 2, tokens_per_minute: 1_000_000 } } });
    expect((await keyInfo(t, key)).rate_limit).toEqual({ requests_per_minute: 2, tokens_per_minute: 50_000 });
    const client = t.client(key);
    await chat(client, user("hi"));
    await chat(client, user("hi"));
    await expectRateLimited(chat(client, user("hi")), 30);
  });

  it("refuses a prompt over the promotional 50,000 TPM cap, naming the top-up as the remedy", async () => {
    const { key } = await t.newAccountWithKey({ credit: 5, kind: "promotional" });
    const error = await expectRateLimited(chat(t.client(key), user(longText(50_100))), null);
    expect(error.message).toContain("50000 tokens per minute (TPM)");
    expect(error.message).toContain("paid top-up");
  });
});

describe("rate limit: funded keys without limits", () => {
  it("serves 200 requests in a minute", async () => {
    const { key, keyId } = await t.newAccountWithKey({ credit: 10 });
    const client = t.client(key);
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 20 }, () => chat(client, user("hi"))));
    }
    expect((await keyInfo(t, key)).rate_limit).toEqual({ requests_per_minute: null, tokens_per_minute: null });
    if (REDIS_URL) {
      // Nothing was counted: no Redis round trip for a key without limits.
      const raw = new Redis(REDIS_URL);
      expect(await raw.exists(`${prefix}${keyId}`)).toBe(0);
      await raw.quit();
    }
  });
});

describe("rate limit: Redis unreachable", () => {
  it("answers 503 unavailable to limited keys (never serves them unlimited) and still serves keys without limits", async () => {
    const down = await startTestGateway({ now, env: { REDIS_URL: "redis://127.0.0.1:6390", RATE_LIMIT_REDIS_PREFIX: prefix } });
    try {
      const limited = await down.newAccountWithKey({ key: { rate_limit: { requests_per_minute: 100 } } });
      const started = performance.now();
      const error = await refused(chat(down.client(limited.key), user("hi")));
      expect(error.status).toBe(503);
      expect(error.code).toBe("unavailable");
      expect(error.headers?.get("retry-after")).toBe("2");
      expect(performance.now() - started).toBeLessThan(1_000);
      const promotional = await down.newAccountWithKey({ credit: 5, kind: "promotional" });
      expect((await refused(chat(down.client(promotional.key), user("hi")))).code).toBe("unavailable");
      expect(down.fake.requests.length).toBe(0);

      const funded = await down.newAccountWithKey({ credit: 10 });
      await chat(down.client(funded.key), user("hi"));
    } finally {
      await down.stop();
    }
  });
});

describe.skipIf(!REDIS_URL)(`rate limit: two gateway instances on one Redis${REDIS_URL ? "" : " (skipped because REDIS_URL is unset)"}`, () => {
  it("enforce one RPM count across both instances", async () => {
    // The second instance opens the first one's SQLite file, so the key is the same on both.
    const second = await startTestGateway({
      now,
      fake: t.fake,
      env: { DATABASE_URL: `sqlite:${join(t.dataDir, "gateway.db")}`, RATE_LIMIT_REDIS_PREFIX: prefix, SQLITE_HOLDS: "shared" },
    });
    try {
      const { key } = await t.newAccountWithKey({ key: { rate_limit: { requests_per_minute: 4 } } });
      const [a, b] = [t.client(key), second.client(key)];
      await chat(a, user("hi"));
      await chat(b, user("hi"));
      await chat(a, user("hi"));
      await chat(b, user("hi"));
      await expectRateLimited(chat(a, user("hi")), 15);
      await expectRateLimited(chat(b, user("hi")), 15);
      advance(15_000);
      await chat(b, user("hi"));
      await expectRateLimited(chat(a, user("hi")), 15);
    } finally {
      await second.stop();
    }
  });

  it("with local leases (RATE_LIMIT_LEASE_MS), never admit more than the limit together, and refuse with Redis' retry-after", async () => {
    // 60 RPM with 6 s leases: each instance takes 6 requests per Redis admission and admits them itself.
    const env = { DATABASE_URL: `sqlite:${join(t.dataDir, "gateway.db")}`, RATE_LIMIT_REDIS_PREFIX: prefix, SQLITE_HOLDS: "shared", RATE_LIMIT_LEASE_MS: "6000" };
    const a = await startTestGateway({ now, fake: t.fake, env });
    const b = await startTestGateway({ now, fake: t.fake, env });
    try {
      const { key, keyId } = await t.newAccountWithKey({ key: { rate_limit: { requests_per_minute: 60 } } });
      const clients = [a.client(key), b.client(key)];
      for (let i = 0; i < 60; i++) await chat(clients[i % 2]!, user("hi"));
      const raw = new Redis(REDIS_URL!);
      expect(Number(await raw.hget(`${prefix}${keyId}`, "r"))).toBe(60 * 60_000); // all 60 taken from Redis, no more
      await raw.quit();
      await expectRateLimited(chat(clients[0]!, user("hi")), 1);
      await expectRateLimited(chat(clients[1]!, user("hi")), 1);
      advance(1_000);
      await chat(clients[1]!, user("hi"));
      await expectRateLimited(chat(clients[0]!, user("hi")), 1);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});
