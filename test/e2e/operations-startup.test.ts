import { afterEach, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, spawnGatewayChild, untilReady, waitFor, type GatewayChild } from "../helpers/processes.ts";

// Gateway processes start in about a second; the margin is for a loaded machine.
setDefaultTimeout(60_000);

/**
 * Issue 25, item 9: start-up checks of the real process (`bun src/index.ts`): a port already taken stops the
 * start; providers without a key are named at start and in GET /ready; the start line says where it listens.
 */
const children: GatewayChild[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const { child } of children.splice(0)) {
    child.kill("SIGKILL");
    await child.exited;
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A gateway process on its own SQLite file, with `env` (no provider key unless given). */
function spawn(env: Record<string, string>): GatewayChild {
  const dir = mkdtempSync(join(tmpdir(), "operations-startup-"));
  dirs.push(dir);
  const started = spawnGatewayChild({ DATABASE_URL: `sqlite:${join(dir, "gateway.db")}`, GATEWAY_ADMIN_TOKEN: "operations-startup-admin", GATEWAY_SANDBOX: "false", ...env });
  children.push(started);
  return started;
}

function jsonLines(child: GatewayChild): any[] {
  return child.stdout
    .text()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));
}

describe("a port already taken", () => {
  it("stops the second gateway with a clear error and a non-zero exit; the first keeps serving alone", async () => {
    const port = String(freePort());
    const first = spawn({ PORT: port });
    await untilReady(first);
    const second = spawn({ PORT: port });
    const code = await Promise.race([second.child.exited, Bun.sleep(20_000).then(() => "still running")]);
    expect(code).not.toBe(0);
    expect(code).not.toBe("still running");
    const stderr = await second.stderr.all;
    expect(stderr).toContain("start error");
    expect(stderr).toContain(`127.0.0.1:${port}`);
    expect(stderr).toContain("port is taken");
    // Every request reaches the first gateway: the second never listened.
    for (let i = 0; i < 20; i++) expect((await fetch(`${first.url}/health`)).status).toBe(200);
    expect(first.child.exitCode).toBeNull();
  });
});

describe("providers without a key", () => {
  it("are named at start (with their unserved models) and in GET /ready's body, which stays 200", async () => {
    const gateway = spawn({ OPENAI_API_KEY: "sk-operations-startup-openai-key" });
    await untilReady(gateway);
    const ready = await fetch(`${gateway.url}/ready`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { status: string; unserved: Record<string, string[]> };
    expect(body.status).toBe("ready");
    expect(Object.keys(body.unserved)).toEqual(expect.arrayContaining(["anthropic", "gemini", "deepseek"]));
    expect(body.unserved.openai).toBeUndefined();
    expect(body.unserved.anthropic).toContain("claude-sonnet-5-5");

    await waitFor(() => jsonLines(gateway).some((line) => line.message === "gateway listening"), 5_000, "the start line");
    const warnings = jsonLines(gateway).filter((line) => line.level === "warn" && line.provider !== undefined);
    const anthropic = warnings.find((line) => line.provider === "anthropic");
    expect(anthropic).toMatchObject({ reason: "no API key: ANTHROPIC_API_KEY is not set", unserved_models: body.unserved.anthropic!.length });
    expect(anthropic.examples.length).toBeGreaterThan(0);
    expect(body.unserved.anthropic).toEqual(expect.arrayContaining(anthropic.examples));
    expect(warnings.map((line) => line.provider)).not.toContain("openai");
    expect(gateway.stdout.text()).not.toContain("sk-operations-startup-openai-key");
  });

  it("with every key set: no warning and the plain ready body", async () => {
    const keys = ["OPENAI", "ANTHROPIC", "GEMINI", "DEEPSEEK", "XAI", "MISTRAL", "QWEN", "MOONSHOT", "ZAI", "GROQ"];
    const gateway = spawn(Object.fromEntries(keys.map((vendor) => [`${vendor}_API_KEY`, `key-for-${vendor.toLowerCase()}-0123456789`])));
    await untilReady(gateway);
    expect(await (await fetch(`${gateway.url}/ready`)).json()).toEqual({ status: "ready" });
    await waitFor(() => jsonLines(gateway).some((line) => line.message === "gateway listening"), 5_000, "the start line");
    expect(jsonLines(gateway).filter((line) => line.level === "warn")).toEqual([]);
  });
  it("in sandbox mode with no key: every model is served, so no warning and the plain ready body", async () => {
    const gateway = spawn({ GATEWAY_SANDBOX: "true" });
    await untilReady(gateway);
    expect(await (await fetch(`${gateway.url}/ready`)).json()).toEqual({ status: "ready" });
    await waitFor(() => jsonLines(gateway).some((line) => line.message === "gateway listening"), 5_000, "the start line");
    expect(jsonLines(gateway).filter((line) => line.level === "warn" && line.provider !== undefined)).toEqual([]);
  });
});

describe("the start line", () => {
  it("on 0.0.0.0 says it listens on every interface, and gives a local URL to try", async () => {
    const port = String(freePort());
    const gateway = spawn({ PORT: port, HOST: "0.0.0.0" });
    await untilReady(gateway);
    await waitFor(() => jsonLines(gateway).some((line) => line.message === "gateway listening"), 5_000, "the start line");
    const line = jsonLines(gateway).find((entry) => entry.message === "gateway listening");
    expect(line).toMatchObject({ bind: `0.0.0.0:${port}`, local_url: `http://127.0.0.1:${port}` });
    expect(line.interfaces).toContain("all");
    expect((await fetch(line.local_url + "/health")).status).toBe(200);
  });

  it("on one address names that address", async () => {
    const port = String(freePort());
    const gateway = spawn({ PORT: port, HOST: "127.0.0.1" });
    await untilReady(gateway);
    await waitFor(() => jsonLines(gateway).some((line) => line.message === "gateway listening"), 5_000, "the start line");
    const line = jsonLines(gateway).find((entry) => entry.message === "gateway listening");
    expect(line).toMatchObject({ bind: `127.0.0.1:${port}`, url: `http://127.0.0.1:${port}` });
    expect(line.interfaces).toBeUndefined();
  });
});
