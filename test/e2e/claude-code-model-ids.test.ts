/**
 * Claude Code asks for its own default ids (claude-opus-4-8 for the main model, claude-haiku-4-5-20251001 for
 * Explore subagents and the haiku alias, claude-sonnet-5, claude-fable-5) unless its environment names catalog
 * ids. The 400 for such an id names the variable to set and a real catalog id to set it to.
 */
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

let t: TestGateway;
let key: string;
let catalogIds: string[];
beforeAll(async () => {
  t = await startTestGateway({ env: { GATEWAY_SANDBOX: "true" } });
  ({ key } = await t.newAccountWithKey());
  const models = await fetch(`${t.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((response) => response.json() as any);
  catalogIds = models.data.map((model: { id: string }) => model.id);
});
afterAll(async () => {
  await t?.stop();
});

const headers = () => ({ "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01" });
const messages = (model: string) =>
  fetch(`${t.url}/v1/messages?beta=true`, { method: "POST", headers: headers(), body: JSON.stringify({ model, max_tokens: 64, messages: [{ role: "user", content: "say hi" }] }) });

/** The error message, checked for the Anthropic error shape and status 400. */
async function refusal(response: Response): Promise<string> {
  expect(response.status).toBe(400);
  const body = (await response.json()) as any;
  expect(body.type).toBe("error");
  expect(body.error.type).toBe("invalid_request_error");
  return body.error.message;
}

/** The catalog id the message proposes (`such as <id>`), which must be a real one. */
function proposed(message: string): string {
  const id = /such as ([\w.-]+)/.exec(message)?.[1];
  expect(catalogIds).toContain(id!);
  return id!;
}

describe("an unknown claude-... model id (Claude Code's own defaults)", () => {
  it("claude-opus-4-8 (the default main model) names ANTHROPIC_DEFAULT_OPUS_MODEL and ANTHROPIC_MODEL and an opus catalog id", async () => {
    const message = await refusal(await messages("claude-opus-4-8"));
    expect(message).toStartWith("The model `claude-opus-4-8` does not exist.");
    expect(message).toContain("when ANTHROPIC_DEFAULT_OPUS_MODEL is not set");
    expect(message).toContain("set it (and ANTHROPIC_MODEL) to a catalog id");
    expect(proposed(message)).toContain("opus");
    expect(message).toContain("docs/coding-agents.md");
  });

  it("names the variable of each alias: haiku (background calls, Explore subagents), sonnet, fable", async () => {
    for (const [id, variable, family] of [
      ["claude-haiku-4-5-20251001", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "haiku"],
      ["claude-sonnet-5", "ANTHROPIC_DEFAULT_SONNET_MODEL", "sonnet"],
      ["claude-fable-5", "ANTHROPIC_DEFAULT_FABLE_MODEL", "fable"],
    ]) {
      const message = await refusal(await messages(id!));
      expect(message).toContain(`when ${variable} is not set`);
      expect(message).not.toContain("ANTHROPIC_MODEL)");
      expect(proposed(message)).toContain(family!);
    }
  });

  it("says the same on count_tokens and on the other ingresses", async () => {
    const counted = await fetch(`${t.url}/v1/messages/count_tokens?beta=true`, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ model: "claude-opus-4-8", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(await refusal(counted)).toContain("ANTHROPIC_DEFAULT_OPUS_MODEL");
    const chat = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "claude-haiku-4-5-20251001", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(chat.status).toBe(400);
    expect(((await chat.json()) as any).error.message).toContain("ANTHROPIC_DEFAULT_HAIKU_MODEL");
  });

  it("a claude- id with no alias in it points to ANTHROPIC_MODEL; other families get no Claude Code hint", async () => {
    const message = await refusal(await messages("claude-instant-1"));
    expect(message).toContain("Claude Code: set ANTHROPIC_MODEL to a catalog id");
    proposed(message);
    const other = await refusal(await messages("gpt-nope"));
    expect(other).not.toContain("Claude Code");
    expect(other).toContain("see GET /v1/models");
  });
});
