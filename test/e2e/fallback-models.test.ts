import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * Fallback models (issue 27 item 5): a catalog model's `fallbacks` are tried, in order, only when every deployment
 * of its provider failed retryably before any byte reached the client. The answer, the x-gateway-model header and
 * the generation record show the model that answered, billed at its own prices; a thinking signature bound to the
 * first provider never reaches the second.
 */

const entry = (id: string, provider: string, upstream: string, input: string, output: string, extra = "") => `
  - id: ${id}
    name: ${id}
    family: ${provider}
    kind: chat
    provider: ${provider}
    upstream_model: ${upstream}
    context_length: 200000
    max_output_tokens: 8000
    prices: { input: "${input}", output: "${output}", cache_read: "0.10", cache_write: "1.00" }
    capabilities: { tools: true, vision: false, json_output: true, reasoning: true }
    created: "2026-01-01"${extra}`;

const CATALOG = `models:${[
  entry("primary-claude", "anthropic", "claude-sonnet-5-5", "1.00", "1.00", "\n    fallbacks: [backup-gpt]"),
  entry("lonely-claude", "anthropic", "claude-opus-5-5", "1.00", "1.00"),
  entry("backup-gpt", "openai", "gpt-6-luna", "3.00", "7.00"),
].join("\n")}
`;

/** An Anthropic deployment that answers every request with `status` (an Anthropic error body), counting them. */
function failingAnthropic(status: number) {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch() {
      self.count++;
      return Response.json({ type: "error", error: { type: status === 400 ? "invalid_request_error" : "api_error", message: `primary says ${status}` } }, { status });
    },
  });
  const self = { url: `http://127.0.0.1:${server.port}`, count: 0, stop: () => server.stop(true) };
  return self;
}

async function generation(t: TestGateway, key: string, id: string): Promise<any> {
  for (let i = 0; i < 100; i++) {
    const response = await fetch(`${t.url}/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${key}` } });
    if (response.status === 200) return ((await response.json()) as any).data;
    await Bun.sleep(50);
  }
  throw new Error(`no generation record for ${id}`);
}

const messages = (t: TestGateway, key: string, body: Record<string, unknown>) =>
  fetch(`${t.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ max_tokens: 100, ...body }),
  });

describe("fallback models", () => {
  let fake: FakeUpstream;
  let down: ReturnType<typeof failingAnthropic>;
  let picky: ReturnType<typeof failingAnthropic>;
  let t: TestGateway;
  let tPicky: TestGateway;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    down = failingAnthropic(500);
    picky = failingAnthropic(400);
    const dir = mkdtempSync(join(tmpdir(), "fallback-models-"));
    const catalog = join(dir, "catalog.yaml");
    writeFileSync(catalog, CATALOG);
    const own = () => ({ UPSTREAM_HEALTH_REDIS_PREFIX: `fallback-test-${crypto.randomUUID()}:`, GATEWAY_CATALOG: catalog });
    t = await startTestGateway({ fake, env: { ...own(), ANTHROPIC_BASE_URL: `${down.url},${down.url}`, ANTHROPIC_API_KEY: "ka,kb" } });
    tPicky = await startTestGateway({ fake, env: { ...own(), ANTHROPIC_BASE_URL: picky.url, ANTHROPIC_API_KEY: "kp" } });
  });

  afterAll(async () => {
    await t?.stop();
    await tPicky?.stop();
    down?.stop();
    picky?.stop();
    await fake?.stop();
  });

  it("answers from the fallback model when every deployment of the primary's provider fails: model, header, record, price, attempts", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const before = down.count;
    const raw = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "primary-claude", messages: [{ role: "user", content: "hello fallback" }], max_tokens: 50 }),
    });
    expect(raw.status).toBe(200);
    const answer = (await raw.json()) as any;
    expect(answer.model).toBe("backup-gpt");
    expect(raw.headers.get("x-gateway-model")).toBe("backup-gpt");
    expect(down.count - before).toBe(2);
    const sent = fake.requests.filter((r) => r.path.endsWith("/chat/completions"));
    expect(sent.map((r) => r.body.model)).toEqual(["gpt-6-luna"]);

    const record = await generation(t, key, raw.headers.get("x-gateway-request-id")!);
    expect(record.model).toBe("backup-gpt");
    expect(record.requested_model).toBe("primary-claude"); // what the client asked for
    expect(record.status).toBe("success");
    // The fallback's own prices: $3 / $7 per 1M tokens.
    const expected = (answer.usage.prompt_tokens * 3_000 + answer.usage.completion_tokens * 7_000) / 1e9;
    expect(record.total_cost).toBeCloseTo(expected, 9);
    expect(Number(raw.headers.get("x-gateway-cost"))).toBeCloseTo(expected, 9);
    const attempts = (record.attempts as any[]).map((a) => [a.status, a.error_class]);
    expect(attempts).toEqual([
      [500, "server_error"],
      [500, "server_error"],
      [200, null],
    ]);
    expect(record.attempts[0].deployment).not.toBe(record.attempts[2].deployment);
  });

  it("records requested_model equal to model when no fallback was taken", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const raw = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "backup-gpt", messages: [{ role: "user", content: "hello directly" }], max_tokens: 50 }),
    });
    expect(raw.status).toBe(200);
    const record = await generation(t, key, raw.headers.get("x-gateway-request-id")!);
    expect(record.model).toBe("backup-gpt");
    expect(record.requested_model).toBe("backup-gpt");
  });

  it("answers 503 as before when the model lists no fallbacks", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const raw = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "lonely-claude", messages: [{ role: "user", content: "hello" }], max_tokens: 50 }),
    });
    expect(raw.status).toBe(503);
    expect(((await raw.json()) as any).error.code).toBe("provider_unavailable");
    expect(raw.headers.get("x-gateway-model")).toBe("lonely-claude");
    expect(fake.requests).toHaveLength(0);
  });

  it("passes a 400 from the primary on without trying the fallback", async () => {
    const { key } = await tPicky.newAccountWithKey({ credit: 10 });
    fake.reset();
    const response = await messages(tPicky, key, { model: "primary-claude", messages: [{ role: "user", content: "hello" }] });
    expect(response.status).toBe(400);
    expect(await response.text()).toContain("primary says 400");
    expect(picky.count).toBe(1);
    expect(fake.requests).toHaveLength(0);
  });

  it("sends no thinking signature of the first provider to the fallback's provider", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const response = await messages(t, key, {
      model: "primary-claude",
      messages: [
        { role: "user", content: "think first" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "secret reasoning of claude", signature: "EqSIGNATURE-bound-to-anthropic" },
            { type: "text", text: "an answer" },
          ],
        },
        { role: "user", content: "and now?" },
      ],
    });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as any;
    expect(answer.model).toBe("backup-gpt");
    expect(response.headers.get("x-gateway-model")).toBe("backup-gpt");
    const sent = fake.requests.filter((r) => r.path.endsWith("/chat/completions"));
    expect(sent).toHaveLength(1);
    const text = JSON.stringify(sent[0]!.body);
    expect(text).not.toContain("EqSIGNATURE");
    expect(text).not.toContain("signature");
    expect(text).not.toContain("secret reasoning of claude");
  });
});
