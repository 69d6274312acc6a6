import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";

// Normally a few seconds; the margin is for a loaded machine.
setDefaultTimeout(20_000);

/**
 * Issue 25, item 6: every request's line says who asked what and how it ended: method, path (no query
 * string), client address, status, and for a failure its error code and message. Lines of the real gateway,
 * through real HTTP, read from its logger's output.
 */
const ADMIN_TOKEN = "operations-logs-admin-token";

interface Line {
  message: string;
  [field: string]: any;
}

let gateway: RunningGateway;
let fake: FakeUpstream;
let dataDir: string;
const written: string[] = [];

beforeAll(async () => {
  fake = await startFakeUpstream();
  dataDir = mkdtempSync(join(tmpdir(), "operations-logs-"));
  gateway = await startGateway({
    port: 0,
    env: {
      HOST: "127.0.0.1",
      DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
      GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
      EDGE_RATE_LIMIT_RPS: "0",
      OPENAI_BASE_URL: `${fake.url}/v1`,
      OPENAI_API_KEY: "sk-upstream-operations-logs",
    },
    log: createLogger("core", { silent: false, sink: (line) => void written.push(line) }),
  });
});

afterAll(async () => {
  await gateway?.stop();
  await fake?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The request lines written since `from` (lines are written at the end of the turn, or of the stream). */
async function requestLinesSince(from: number, count: number): Promise<Line[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const lines = written.slice(from).map((line) => JSON.parse(line) as Line).filter((line) => line.message === "request");
    if (lines.length >= count || Date.now() > deadline) return lines;
    await Bun.sleep(10);
  }
}

/** Sends one request and returns its status and its request line (exactly one). */
async function lineOf(path: string, init: RequestInit = {}): Promise<{ status: number; line: Line }> {
  const from = written.length;
  const response = await fetch(gateway.url + path, init);
  await response.arrayBuffer();
  const lines = await requestLinesSince(from, 1);
  expect(lines).toHaveLength(1);
  return { status: response.status, line: lines[0]! };
}

async function admin(method: string, path: string, body?: unknown) {
  const response = await fetch(gateway.url + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await response.json()) as any;
}

/** A key on a new account with `credit` USD. */
async function keyWithCredit(credit: number): Promise<string> {
  const account = await admin("POST", "/admin/v1/accounts", { name: "logs" });
  if (credit > 0) await admin("POST", `/admin/v1/accounts/${account.data.id}/credits`, { amount: credit, kind: "card", reference: crypto.randomUUID() });
  return (await admin("POST", `/admin/v1/accounts/${account.data.id}/keys`, { name: "logs" })).data.key;
}

const chat = (key: string, body: string) => ({
  method: "POST",
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  body,
});

describe("request lines of inference requests", () => {
  it("tell a 400 for no balance from a 400 for bad JSON by error code and message", async () => {
    const broke = await keyWithCredit(0);
    const funded = await keyWithCredit(5);
    const noBalance = await lineOf("/v1/chat/completions", chat(broke, JSON.stringify({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] })));
    const badJson = await lineOf("/v1/chat/completions", chat(funded, "{not json"));
    expect([noBalance.status, badJson.status]).toEqual([400, 400]);
    expect(noBalance.line).toMatchObject({ method: "POST", path: "/v1/chat/completions", client_ip: "127.0.0.1", status: 400, outcome: "failed", error_code: "insufficient_balance" });
    expect(badJson.line).toMatchObject({ method: "POST", path: "/v1/chat/completions", client_ip: "127.0.0.1", status: 400, outcome: "failed", error_code: "invalid_request" });
    expect(noBalance.line.error_message).toContain("balance");
    expect(badJson.line.error_message).toContain("JSON");
    expect(typeof noBalance.line.request_id).toBe("string");
  });

  it("a success has the same fields, with null error code and message", async () => {
    const key = await keyWithCredit(5);
    const { status, line } = await lineOf("/v1/chat/completions", chat(key, JSON.stringify({ model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] })));
    expect(status).toBe(200);
    expect(line).toMatchObject({ method: "POST", path: "/v1/chat/completions", client_ip: "127.0.0.1", status: 200, outcome: "success", error_code: null, error_message: null, model: "gpt-6-luna" });
  });

  it("an auth failure before the body is read has its line too", async () => {
    const { status, line } = await lineOf("/v1/chat/completions", chat("sk-gw-" + "n".repeat(40), "{}"));
    expect(status).toBe(401);
    expect(line).toMatchObject({ method: "POST", path: "/v1/chat/completions", status: 401, error_code: "invalid_api_key" });
  });

  it("clips a long error message", async () => {
    const key = await keyWithCredit(5);
    const { status, line } = await lineOf("/v1/chat/completions", chat(key, JSON.stringify({ model: "m".repeat(2_000), messages: [{ role: "user", content: "hi" }] })));
    expect(status).toBe(400);
    expect(line.error_code).toBe("model_not_found");
    expect(line.error_message.length).toBeLessThanOrEqual(300);
  });
});

describe("request lines of routes outside the pipeline", () => {
  it("an unknown path: 404 with its code, method and path", async () => {
    const { status, line } = await lineOf("/v1/nothing-here", { method: "DELETE" });
    expect(status).toBe(404);
    expect(line).toMatchObject({ method: "DELETE", path: "/v1/nothing-here", client_ip: "127.0.0.1", status: 404, error_code: "not_found", error_message: "no such endpoint" });
    expect(typeof line.latency_ms).toBe("number");
  });

  it("leaves the query string out of the path: its values may be secrets", async () => {
    const from = written.length;
    const { line } = await lineOf("/v1/models?api_key=query-secret-value-42&x=1", { headers: { authorization: "Bearer nope" } });
    expect(line).toMatchObject({ method: "GET", path: "/v1/models", status: 401, error_code: "invalid_api_key" });
    expect(written.slice(from).join("")).not.toContain("query-secret-value-42");
  });

  it("an admin call: its status, no error", async () => {
    const from = written.length;
    const response = await fetch(`${gateway.url}/admin/v1/accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "line" }),
    });
    expect(response.status).toBe(201);
    const lines = await requestLinesSince(from, 1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ method: "POST", path: "/admin/v1/accounts", client_ip: "127.0.0.1", status: 201, error_code: null });
    expect(written.slice(from).join("")).not.toContain(ADMIN_TOKEN);
  });

  it("an admin call with a wrong token: its 401 line beside its audit line, the token in neither", async () => {
    const from = written.length;
    const { status, line } = await lineOf("/admin/v1/accounts", { headers: { authorization: "Bearer wrong-admin-token-0123456789" } });
    expect(status).toBe(401);
    expect(line).toMatchObject({ method: "GET", path: "/admin/v1/accounts", client_ip: "127.0.0.1", status: 401, error_code: expect.any(String) });
    const audit = written.slice(from).map((entry) => JSON.parse(entry)).filter((entry) => entry.message === "audit");
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ status: 401 });
    expect(written.slice(from).join("")).not.toContain("wrong-admin-token-0123456789");
  });

  it("an admin body that fails validation: 400 invalid_request", async () => {
    const { status, line } = await lineOf("/admin/v1/accounts", {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ name: 42 }),
    });
    expect(status).toBe(400);
    expect(line).toMatchObject({ method: "POST", path: "/admin/v1/accounts", status: 400, error_code: "invalid_request" });
  });

  it("count_tokens, answered by the pipeline with no upstream: its refusal's line has the code and the message", async () => {
    const key = await keyWithCredit(5);
    const { status, line } = await lineOf("/v1/messages/count_tokens", {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-sonnet-5-5" }),
    });
    expect(status).toBe(400);
    expect(line).toMatchObject({ method: "POST", path: "/v1/messages/count_tokens", client_ip: "127.0.0.1", status: 400, error_code: "invalid_request" });
    expect(typeof line.latency_ms).toBe("number");
    expect(line.error_message).toContain("messages");
  });

  it("a successful /health or /ready probe writes no line; a 404 next to it does", async () => {
    const from = written.length;
    for (const path of ["/health", "/ready", "/health"]) expect((await fetch(gateway.url + path).then((r) => (r.body?.cancel(), r))).status).toBe(200);
    await (await fetch(`${gateway.url}/nope`)).arrayBuffer();
    const lines = await requestLinesSince(from, 1);
    await Bun.sleep(30);
    expect((await requestLinesSince(from, 1)).map((line) => line.path)).toEqual(["/nope"]);
    expect(lines.length).toBe(1);
  });
});
