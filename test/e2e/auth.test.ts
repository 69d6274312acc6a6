import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { Database } from "bun:sqlite";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.stop();
});

const CHAT = { model: "gpt-6-luna", messages: [{ role: "user" as const, content: "hi" }] };

function sha256(text: string): string {
  return new Bun.CryptoHasher("sha256").update(text).digest("hex");
}

/** A raw chat-completions call with the given headers. */
function rawChat(headers: Record<string, string>): Promise<Response> {
  return fetch(`${t.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(CHAT),
  });
}

async function expectUnauthorized(response: Response, message?: RegExp) {
  expect(response.status).toBe(401);
  const body = (await response.json()) as any;
  expect(body.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
  expect(typeof body.error.message).toBe("string");
  if (message) expect(body.error.message).toMatch(message);
}

/** Runs a chat completion through the SDK and returns the error it throws (or fails if it succeeds). */
async function sdkError(key: string): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await t.client(key).chat.completions.create(CHAT);
  } catch (error) {
    return error as InstanceType<typeof OpenAI.APIError>;
  }
  throw new Error("the request unexpectedly succeeded");
}

describe("accepted key headers", () => {
  it("accepts Authorization: Bearer through the OpenAI SDK", async () => {
    const { key } = await t.newAccountWithKey();
    const completion = await t.client(key).chat.completions.create(CHAT);
    expect(completion.choices[0]!.message.content).toBe("Hello from gpt-6-luna.");
  });

  it("accepts the bearer scheme case-insensitively", async () => {
    const { key } = await t.newAccountWithKey();
    const response = await rawChat({ authorization: `bearer ${key}` });
    expect(response.status).toBe(200);
  });

  it("accepts x-api-key on /v1/chat/completions", async () => {
    const { key } = await t.newAccountWithKey();
    const response = await rawChat({ "x-api-key": key });
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).choices[0].message.content).toBe("Hello from gpt-6-luna.");
  });

  it("accepts x-api-key on /v1/models", async () => {
    const { key } = await t.newAccountWithKey();
    const response = await fetch(`${t.url}/v1/models`, { headers: { "x-api-key": key } });
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).data.length).toBe(40);
  });

  it("accepts x-api-key through the SDK when no bearer is sent", async () => {
    const { key } = await t.newAccountWithKey();
    const client = new OpenAI({ apiKey: "unused", baseURL: `${t.url}/v1`, maxRetries: 0, defaultHeaders: { authorization: null, "x-api-key": key } });
    const page = await client.models.list();
    expect(page.data.length).toBe(40);
  });
});

describe("refused keys", () => {
  it("refuses a missing key with 401 invalid_api_key", async () => {
    await expectUnauthorized(await rawChat({}), /missing API key/);
    await expectUnauthorized(await fetch(`${t.url}/v1/models`));
  });

  it("refuses an unknown key with 401 through the SDK", async () => {
    const error = await sdkError("sk-gw-" + "x".repeat(40));
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error.status).toBe(401);
    expect(error.code).toBe("invalid_api_key");
    expect(error.type).toBe("authentication_error");
  });

  it("refuses an unknown key sent as x-api-key", async () => {
    await expectUnauthorized(await rawChat({ "x-api-key": "sk-gw-unknown" }), /invalid API key/);
  });

  it("refuses malformed Authorization headers", async () => {
    const { key } = await t.newAccountWithKey();
    for (const authorization of [key, `Basic ${btoa("user:" + key)}`, "Bearer", "Bearer ", `Token ${key}`, `Bearer ${key} extra`]) {
      await expectUnauthorized(await rawChat({ authorization }));
    }
  });

  it("refuses an empty x-api-key", async () => {
    await expectUnauthorized(await rawChat({ "x-api-key": "   " }));
  });

  it("does not forward the refused request upstream", async () => {
    t.fake.reset();
    await expectUnauthorized(await rawChat({ authorization: "Bearer sk-gw-nope" }));
    expect(t.fake.requests.length).toBe(0);
  });
});

describe("key deletion", () => {
  it("refuses a deleted key on its very next request", async () => {
    const { key, keyId } = await t.newAccountWithKey();
    const deleted = await t.admin("DELETE", `/admin/v1/keys/${keyId}`);
    expect(deleted.status).toBe(200);
    const error = await sdkError(key);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error.code).toBe("invalid_api_key");
  });

  it("refuses a key that worked and was cached, right after its deletion", async () => {
    const { key, keyId } = await t.newAccountWithKey();
    const client = t.client(key);
    await client.chat.completions.create(CHAT);
    await client.models.list();
    expect((await t.admin("DELETE", `/admin/v1/keys/${keyId}`)).status).toBe(200);
    expect(await sdkError(key)).toBeInstanceOf(OpenAI.AuthenticationError);
    await expectUnauthorized(await fetch(`${t.url}/v1/models`, { headers: { "x-api-key": key } }));
  });

  it("leaves the account's other keys working", async () => {
    const { accountId, key, keyId } = await t.newAccountWithKey();
    const other = await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "other" });
    expect(other.status).toBe(201);
    await t.admin("DELETE", `/admin/v1/keys/${keyId}`);
    expect(await sdkError(key)).toBeInstanceOf(OpenAI.AuthenticationError);
    const completion = await t.client(other.body.data.key).chat.completions.create(CHAT);
    expect(completion.choices[0]!.message.content).toBe("Hello from gpt-6-luna.");
  });
});

describe("key expiry", () => {
  it("refuses a key once its expires_at has passed, even when cached", async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const { key } = await t.newAccountWithKey({ key: { expires_at: expiresAt } });
    const client = t.client(key);
    await client.chat.completions.create(CHAT);
    const wait = Date.parse(expiresAt) - Date.now() + 50;
    if (wait > 0) await Bun.sleep(wait);
    const error = await sdkError(key);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error.message).toMatch(/expired/);
    await expectUnauthorized(await fetch(`${t.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }), /expired/);
  });

  it("refuses to create a key that expires in the past", async () => {
    const { accountId } = await t.newAccountWithKey();
    const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, {
      name: "stale",
      expires_at: new Date(Date.now() - 60_000).toISOString(),
    });
    expect(created.status).toBe(400);
    expect(created.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request" });
    expect(created.body.error.message).toMatch(/expires_at/);
  });
});

describe("key storage", () => {
  it("keeps only the sha256 of the key and a masked label", async () => {
    const { key, keyId } = await t.newAccountWithKey();
    expect(key).toMatch(/^sk-gw-[A-Za-z0-9]{40}$/);

    const db = new Database(`${t.dataDir}/gateway.db`, { readonly: true });
    try {
      const row = db.query("SELECT * FROM api_keys WHERE id = ?").get(keyId) as Record<string, unknown> | null;
      expect(row).not.toBeNull();
      expect(row!.key_hash).toBe(sha256(key));
      for (const [column, value] of Object.entries(row!)) {
        if (typeof value === "string") expect({ column, leaks: value.includes(key) }).toEqual({ column, leaks: false });
      }
      // No other column anywhere in the row, nor in any other key row, holds the key body either.
      const body = key.slice("sk-gw-".length);
      const all = db.query("SELECT * FROM api_keys").all() as Record<string, unknown>[];
      for (const other of all) {
        for (const value of Object.values(other)) if (typeof value === "string") expect(value.includes(body)).toBe(false);
      }
      const label = String(row!.label);
      expect(label.startsWith("sk-gw-")).toBe(true);
      expect(label).not.toContain(key);
      expect(label.length).toBeLessThan(key.length);
    } finally {
      db.close();
    }
  });

  it("returns a masked label next to the full key at creation", async () => {
    const { accountId } = await t.newAccountWithKey();
    const created = await t.admin("POST", `/admin/v1/accounts/${accountId}/keys`, { name: "labelled" });
    const { key, label } = created.body.data;
    expect(label.startsWith("sk-gw-")).toBe(true);
    expect(label).not.toContain(key);
    expect(label.endsWith(key.slice(-4))).toBe(true);
  });
});
