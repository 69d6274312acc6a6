import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

// Normally a few seconds; the margin is for a loaded machine (bun's default per-test limit is 5 s).
setDefaultTimeout(20_000);

/** Sleeps until just after the next wall-clock second starts (the edge limit counts in fixed one-second windows). */
async function nextSecond(): Promise<void> {
  await Bun.sleep(1000 - (Date.now() % 1000) + 15);
}

describe("health, readiness, docs, unknown paths", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("GET /health answers 200 without a key", async () => {
    const response = await fetch(`${t.url}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  });

  it("GET /ready answers 200 once every plugin can serve, naming the models of providers that have no key", async () => {
    const response = await fetch(`${t.url}/ready`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { status: string; unserved: Record<string, string[]> };
    expect(body.status).toBe("ready");
    // This gateway has keys for OpenAI, DeepSeek and xAI only (test/helpers/gateway.ts).
    expect(Object.keys(body.unserved).sort()).toEqual(["anthropic", "gemini", "groq", "mistral", "moonshot", "qwen", "zai"]);
    expect(body.unserved.anthropic).toContain("claude-sonnet-5-5");
    expect(body.unserved.openai).toBeUndefined();
  });

  it("/swagger serves the OpenAPI UI", async () => {
    const response = await fetch(`${t.url}/swagger`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    const html = await response.text();
    expect(html).toContain("<html");
    // The Scalar UI loads the document from "swagger/json", relative to /swagger.
    expect(html).toContain("api-reference");
    expect(html).toMatch(/"url":"\/?swagger\/json"/);
  });

  it("/swagger/json lists the chat endpoint, the models list, health and the admin paths", async () => {
    const response = await fetch(`${t.url}/swagger/json`);
    expect(response.status).toBe(200);
    const document = (await response.json()) as any;
    expect(document.openapi).toMatch(/^3\./);
    const paths = Object.keys(document.paths);
    for (const path of [
      "/v1/chat/completions",
      "/v1/models",
      "/health",
      "/ready",
      "/admin/v1/accounts",
      "/admin/v1/accounts/{id}",
      "/admin/v1/accounts/{id}/credits",
      "/admin/v1/accounts/{id}/keys",
      "/admin/v1/keys/{id}",
      "/admin/v1/accounts/{id}/requests",
    ]) {
      expect(paths).toContain(path);
    }
    expect(document.paths["/v1/chat/completions"].post).toBeDefined();
    expect(document.paths["/admin/v1/accounts"].post).toBeDefined();
  });

  it("an unknown path answers 404 with a JSON error body", async () => {
    for (const [method, path] of [
      ["GET", "/nope"],
      ["POST", "/v1/nothing-here"],
      ["DELETE", "/v1/chat/completions"],
    ] as const) {
      const response = await fetch(`${t.url}${path}`, { method });
      expect(response.status).toBe(404);
      expect(response.headers.get("content-type")).toContain("application/json");
      const body = (await response.json()) as any;
      expect(body.error).toMatchObject({ type: "not_found_error", code: "not_found" });
      expect(typeof body.error.message).toBe("string");
    }
  });
});

describe("edge rate limit", () => {
  it("answers 429 with retry-after past N requests in a second on every endpoint, and recovers the next second", async () => {
    const t = await startTestGateway({ env: { EDGE_RATE_LIMIT_RPS: "5" } });
    try {
      const { key } = await t.newAccountWithKey();
      const models = () => fetch(`${t.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
      const health = () => fetch(`${t.url}/health`);

      // Nine requests inside one one-second window; on a machine so slow that they straddle two, try again.
      let allowed: Response[] = [];
      let refused: Response[] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        await nextSecond();
        const window = Math.floor(Date.now() / 1000);
        allowed = [await health(), await models(), await health(), await models(), await health()];
        refused = [await models(), await health(), await fetch(`${t.url}/nope`), await fetch(`${t.url}/swagger/json`)];
        if (Math.floor(Date.now() / 1000) === window) break;
      }

      expect(allowed.map((response) => response.status)).toEqual([200, 200, 200, 200, 200]);
      for (const response of refused) {
        expect(response.status).toBe(429);
        expect(response.headers.get("retry-after")).toBe("1");
        const body = (await response.json()) as any;
        expect(body.error).toMatchObject({ code: "rate_limit_exceeded", type: "rate_limit_error" });
        expect(body.error.message).toContain("5 requests per second");
      }
      for (const response of allowed) await response.arrayBuffer();

      await nextSecond();
      const recovered = await models();
      expect(recovered.status).toBe(200);
      expect(((await recovered.json()) as any).object).toBe("list");
      expect((await health()).status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  it("with EDGE_RATE_LIMIT_RPS=0 lets 100 fast requests through", async () => {
    const t = await startTestGateway({ env: { EDGE_RATE_LIMIT_RPS: "0" } });
    try {
      const { key } = await t.newAccountWithKey();
      const responses = await Promise.all(
        Array.from({ length: 100 }, (_, index) =>
          index % 2 === 0 ? fetch(`${t.url}/health`) : fetch(`${t.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }),
        ),
      );
      expect(responses.map((response) => response.status)).toEqual(Array(100).fill(200));
      await Promise.all(responses.map((response) => response.arrayBuffer()));
    } finally {
      await t.stop();
    }
  });
});
