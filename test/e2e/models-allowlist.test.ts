import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * Issue 25, item 11: what GET /v1/models and GET /v1/models/{id} show a key with a `models` list follows
 * the rule its requests follow. The allowlist plugin enabled: that list, for calls and listings alike.
 * Disabled: every model, for calls and listings alike.
 */
const CATALOG_SIZE = loadCatalog("catalog.yaml").all().length;
const ALLOWED = "gpt-6-luna";
const OTHER = "gpt-6.2-sol";

/** plugins-config.yaml with the allowlist plugin's `enabled: true` turned off. */
function configWithoutAllowlist(dir: string): string {
  const shipped = readFileSync("plugins-config.yaml", "utf8");
  const edited = shipped.replace(/^(  allowlist:\s*\n    enabled: )true$/m, "$1false");
  if (edited === shipped) throw new Error("plugins-config.yaml: no `allowlist: enabled: true` block to turn off");
  const file = join(dir, "plugins-config.yaml");
  writeFileSync(file, edited);
  return file;
}

interface Seen {
  listed: string[];
  oneStatus: (id: string) => Promise<number>;
  chatStatus: (model: string) => Promise<number>;
  countTokensStatus: (model: string) => Promise<number>;
}

/** A key limited to ALLOWED: what the listings show it and what its calls answer. */
async function limitedKey(t: TestGateway): Promise<Seen> {
  const { key } = await t.newAccountWithKey({ key: { models: [ALLOWED] } });
  const headers = { authorization: `Bearer ${key}` };
  const listing = await fetch(`${t.url}/v1/models`, { headers });
  expect(listing.status).toBe(200);
  const listed = ((await listing.json()) as { data: { id: string }[] }).data.map((model) => model.id);
  return {
    listed,
    oneStatus: async (id) => (await fetch(`${t.url}/v1/models/${id}`, { headers })).status,
    async chatStatus(model) {
      const response = await fetch(`${t.url}/v1/chat/completions`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
      });
      await response.text();
      return response.status;
    },
    async countTokensStatus(model) {
      const response = await fetch(`${t.url}/v1/messages/count_tokens`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
      });
      await response.text();
      return response.status;
    },
  };
}

describe("model listings follow the allowlist plugin", () => {
  describe("allowlist enabled (the shipped configuration)", () => {
    let t: TestGateway;
    beforeAll(async () => {
      t = await startTestGateway();
    });
    afterAll(() => t.stop());

    it("lists, shows, counts and serves a limited key only its models", async () => {
      const seen = await limitedKey(t);
      expect(seen.listed).toEqual([ALLOWED]);
      expect(await seen.oneStatus(ALLOWED)).toBe(200);
      expect(await seen.oneStatus(OTHER)).toBe(404);
      expect(await seen.chatStatus(ALLOWED)).toBe(200);
      expect(await seen.chatStatus(OTHER)).toBe(403);
      expect(await seen.countTokensStatus(ALLOWED)).toBe(200);
      expect(await seen.countTokensStatus(OTHER)).toBe(403);
    });
  });

  describe("allowlist disabled", () => {
    let t: TestGateway;
    let dir: string;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "gateway-no-allowlist-"));
      t = await startTestGateway({ config: configWithoutAllowlist(dir) });
    });
    afterAll(async () => {
      await t.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it("lists, shows, counts and serves a limited key every model, as its calls are not limited", async () => {
      const seen = await limitedKey(t);
      expect(seen.listed).toHaveLength(CATALOG_SIZE);
      expect(seen.listed).toContain(OTHER);
      expect(await seen.oneStatus(OTHER)).toBe(200);
      expect(await seen.chatStatus(OTHER)).toBe(200);
      expect(await seen.chatStatus(ALLOWED)).toBe(200);
      expect(await seen.countTokensStatus(OTHER)).toBe(200);
    });
  });
});
