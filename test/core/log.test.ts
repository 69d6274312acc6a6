import { describe, expect, it } from "bun:test";

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
