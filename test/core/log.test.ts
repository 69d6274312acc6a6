import { describe, expect, it } from "bun:test";
import { createLogger } from "../../src/core/log.ts";
import { registerSecret } from "../../src/core/secrets.ts";

const LOG_MODULE = new URL("../../src/core/log.ts", import.meta.url).pathname;

/** Runs `body` in a child Bun with a logger `log` (JSON lines on stdout); returns its stdout lines. */
async function childLines(body: string): Promise<Record<string, unknown>[]> {
  const script = `import { createLogger } from ${JSON.stringify(LOG_MODULE)};\nconst log = createLogger("test", { silent: false });\n${body}`;
  const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe", env: { ...process.env, GATEWAY_LOG: "" } });
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  expect({ code, err }).toEqual({ code: 0, err: "" });
  return out.trim().split("\n").filter(Boolean).map((line) => JSON.parse(line));
}

describe("log lines", () => {
  it("come out whole and in order, across turns of the event loop", async () => {
    const lines = await childLines(`
      for (let i = 0; i < 3; i++) log.request({ n: i });
      setTimeout(() => { log.info("later", { n: 3 }); setTimeout(() => {}, 20); }, 20);
    `);
    expect(lines.map((l) => [l.message, l.n])).toEqual([["request", 0], ["request", 1], ["request", 2], ["later", 3]]);
    expect(lines.every((l) => l.tag === "test" && typeof l.time === "string")).toBe(true);
  });

  it("gathered but not yet written when the process exits: still written", async () => {
    const lines = await childLines(`
      log.info("stopping");
      log.info("stopped");
      process.exit(0);
    `);
    expect(lines.map((l) => l.message)).toEqual(["stopping", "stopped"]);
  });

  it("more than 64 KB in one turn: nothing lost", async () => {
    const lines = await childLines(`for (let i = 0; i < 2000; i++) log.request({ n: i, pad: "x".repeat(100) });`);
    expect(lines.map((l) => l.n)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });
});

describe("log redaction", () => {
  function captured() {
    const lines: string[] = [];
    return { lines, log: createLogger("test", { silent: false, sink: (line) => void lines.push(line) }) };
  }

  it("masks registered secrets and key shapes in every line, access lines included", () => {
    registerSecret("log-test-provider-key");
    const { lines, log } = captured();
    log.error("upstream said", { error: "Incorrect API key provided: log-test-provider-key" });
    log.request({ note: "Bearer abcdefghijklmnop", key: "sk-gw-" + "x".repeat(40) });
    expect(lines.join("")).not.toContain("log-test-provider-key");
    expect(lines.join("")).not.toContain("abcdefghijklmnop");
    expect(lines.join("")).not.toContain("x".repeat(40));
    expect(lines.every((line) => JSON.parse(line).tag === "test")).toBe(true);
  });

  it("drops a failed query's bound values and any SHA-256 from diagnostic lines", () => {
    const hash = "ab".repeat(32);
    const { lines, log } = captured();
    const error = new Error(`Failed query: select * from api_keys where key_hash = ?\nparams: ${hash},"name"`);
    log.error("store failed", { error: String(error.stack), hash });
    const line = JSON.parse(lines[0]!);
    expect(lines[0]).not.toContain(hash);
    expect(line.error).toContain("Failed query: select * from api_keys where key_hash = ?\nparams: [redacted]\n");
    expect(line.error).toContain("    at ");
  });

  it("writes an audit line as message \"audit\", scrubbed like a diagnostic line", () => {
    registerSecret("log-test-audit-token");
    const { lines, log } = captured();
    log.audit!({ actor: "admin", action: "key.create", key_id: "key_1", note: "log-test-audit-token", hash: "cd".repeat(32) });
    const line = JSON.parse(lines[0]!);
    expect(line).toMatchObject({ level: "info", tag: "test", message: "audit", actor: "admin", action: "key.create", key_id: "key_1" });
    expect(lines[0]).not.toContain("log-test-audit-token");
    expect(lines[0]).not.toContain("cd".repeat(32));
  });

  it("writes a revealed line as it is (the admin token shown once)", () => {
    const token = "gwadm-" + "0123456789abcdef".repeat(3);
    const { lines, log } = captured();
    log.reveal!("generated an admin token", { admin_token: token });
    log.info("again", { admin_token: token });
    expect(JSON.parse(lines[0]!).admin_token).toBe(token);
    expect(lines[1]).not.toContain(token);
  });
});
