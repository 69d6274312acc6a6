/**
 * Claude Code and Codex CLI against a gateway in sandbox mode (GATEWAY_SANDBOX=true): no provider key, no
 * upstream at all. Each agent is set up exactly as docs/coding-agents.md says (its variables and its
 * config.toml are read from that page), and each completes one tool loop: the sandbox calls the agent's shell
 * tool with `echo sandbox-tool-$((6*7))`, the agent runs it (only the shell prints `sandbox-tool-42`) and sends
 * the output back, the sandbox answers text quoting it, and the agent ends with exit code 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { SANDBOX_COMMAND, SANDBOX_MARKER } from "../../src/plugins/sandbox/tool-call.ts";
import { billing, cliBinary, cliEnv, describeRun, ROOT, runCli, runCodexExec, tempDir, type CliRun } from "./cli.ts";

const CLAUDE = cliBinary("claude");
const CODEX = cliBinary("codex");
if (!CLAUDE || !CODEX) console.warn("[e2e-cli] SKIPPED some sandbox agent tests: a CLI is missing (bash test/e2e-cli/install.sh)");

const PROMPT = "Run a command and tell me what it printed.";
/** What an agent prints when the sandbox's arguments fail its own checks. */
const VALIDATION_ERROR = /validation|missing field|invalid.*(argument|input|parameter)|unknown tool/i;
const NO_KEYS = { OPENAI_API_KEY: "", DEEPSEEK_API_KEY: "", XAI_API_KEY: "", MISTRAL_API_KEY: "", ANTHROPIC_API_KEY: "", GEMINI_API_KEY: "" };

const GUIDE = readFileSync(join(ROOT, "docs/coding-agents.md"), "utf8");

/** The fenced blocks of `language` in the guide's section `heading`, in order. */
function guideBlocks(heading: string, language: string): string[] {
  const start = GUIDE.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/coding-agents.md has no section "## ${heading}"`);
  const next = GUIDE.indexOf("\n## ", start + 1);
  const section = GUIDE.slice(start, next < 0 ? undefined : next);
  return [...section.matchAll(new RegExp("```" + language + "\\n([\\s\\S]*?)\\n\\s*```", "g"))].map((match) => match[1]!);
}

/** `export NAME=value  # comment` lines of a shell block. */
function exportsOf(block: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const match of block.matchAll(/^\s*export ([A-Z_]+)=(\S+)/gm)) out[match[1]!] = match[2]!;
  return out;
}

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ env: { GATEWAY_SANDBOX: "true", ...NO_KEYS } });
});
afterAll(async () => {
  await t?.stop();
});

/** Claude Code's variables from the guide: the first block in full, a later block's model variables over it. */
function claudeVariables(block: number, key: string): Record<string, string> {
  const blocks = guideBlocks("Claude Code", "sh").map(exportsOf);
  const variables = { ...blocks[0], ...blocks[block] };
  expect(variables.ANTHROPIC_BASE_URL).toBe("http://localhost:3000");
  return { ...variables, ANTHROPIC_BASE_URL: t.url, ANTHROPIC_API_KEY: key };
}

async function runClaude(prompt: string, variables: Record<string, string>, args: string[] = []): Promise<CliRun> {
  const home = tempDir("claude-home-");
  const work = tempDir("claude-work-");
  try {
    // Nonessential traffic stays on: it includes the background call (the session title, asked as JSON).
    const env = cliEnv(home.path, { ...variables, DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1", DISABLE_ERROR_REPORTING: "1" });
    return await runCli(CLAUDE!, ["-p", prompt, "--output-format", "json", ...args], { cwd: work.path, env });
  } finally {
    home.remove();
    work.remove();
  }
}

/** The `--output-format json` result object (the last JSON line of stdout). */
function resultOf(stdout: string): any {
  try {
    return JSON.parse(stdout.trim().split("\n").filter(Boolean).at(-1) ?? "");
  } catch {
    return null;
  }
}

function runCodex(prompt: string, config: string, key: string, extra: string[] = []): Promise<CliRun & { lastMessage: string | null }> {
  return runCodexExec(CODEX!, config, prompt, key, extra);
}

/** The guide's config.toml, pointed at the test gateway, with `model` replaced when asked. */
function codexConfig(model?: string): string {
  const [toml] = guideBlocks("Codex CLI", "toml");
  expect(toml).toContain('base_url = "http://localhost:3000/v1"');
  const config = toml!.replace("http://localhost:3000", t.url);
  return model ? config.replace(/^model = "[^"]*"/m, `model = "${model}"`) : config;
}

describe.skipIf(!CLAUDE)("Claude Code (claude -p) in sandbox mode, set up as docs/coding-agents.md says", () => {
  const cases = [
    { block: 0, how: "Anthropic models" },
    { block: 1, how: "other families (deepseek-flash, gpt-5.6-luna)" },
  ];
  for (const { block, how } of cases) {
    it(`completes a Bash tool loop on ${how}: the command ran, no validation error, each variable's model was asked`, async () => {
      const { accountId, key } = await t.newAccountWithKey({ credit: 20 });
      const variables = claudeVariables(block, key);
      const run = await runClaude(PROMPT, variables, ["--allowedTools", "Bash", "--max-turns", "4"]);
      console.log(`[e2e-cli] sandbox claude -p (${variables.ANTHROPIC_MODEL}): exit ${run.code} in ${run.ms} ms`);
      const result = resultOf(run.stdout);
      if (run.code !== 0 || !result || result.is_error) throw new Error(`Claude Code failed in sandbox mode:\n${describeRun(run)}`);
      expect(result.subtype).toBe("success");
      expect(SANDBOX_COMMAND).not.toContain(SANDBOX_MARKER);
      // The sandbox quotes the tool's output: only the shell could have printed the marker.
      expect(result.result).toBe(`Sandbox reply from ${variables.ANTHROPIC_MODEL}. The tool returned: ${SANDBOX_MARKER}`);
      expect(run.stdout + run.stderr).not.toMatch(VALIDATION_ERROR);

      // Billed: the main model for the loop (tool call, then text), the haiku variable's model for the title.
      const { rows } = await billing(t, key, accountId, 3);
      const byModel = Map.groupBy(rows, (row) => row.model);
      expect(byModel.get(variables.ANTHROPIC_MODEL!)!.length).toBeGreaterThanOrEqual(2);
      expect(byModel.get(variables.ANTHROPIC_DEFAULT_HAIKU_MODEL!)?.length ?? 0).toBeGreaterThanOrEqual(1);
      for (const row of rows) {
        expect(Object.values(variables)).toContain(row.model);
        expect(row.status).toBe("success");
        expect(row.cost).toBeGreaterThan(0);
      }
    });
  }

  it("with only ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, says which variable to set (claude-opus-4-8 is not a catalog id)", async () => {
    const { key } = await t.newAccountWithKey();
    const run = await runClaude("say hi", { ANTHROPIC_BASE_URL: t.url, ANTHROPIC_API_KEY: key }, ["--max-turns", "1"]);
    const result = resultOf(run.stdout);
    expect(run.code).not.toBe(0);
    expect(result?.is_error).toBe(true);
    expect(result?.api_error_status).toBe(400);
    expect(result?.result).toContain("claude-opus-4-8");
    expect(result?.result).toContain("ANTHROPIC_DEFAULT_OPUS_MODEL");
    expect(result?.result).toContain("ANTHROPIC_MODEL");
  });
});

describe.skipIf(!CODEX)("Codex CLI (codex exec) in sandbox mode, with the config.toml of docs/coding-agents.md", () => {
  const cases = [
    { model: undefined, expected: "gpt-6-luna", how: "its own model, gpt-6-luna (tools in an additional_tools item, code-mode exec)" },
    { model: "deepseek-flash", expected: "deepseek-flash", how: "deepseek-flash (top-level tools, exec_command)" },
  ];
  for (const { model, expected, how } of cases) {
    it(`completes a shell tool loop on ${how}: the command ran, no validation error`, async () => {
      const { accountId, key } = await t.newAccountWithKey({ credit: 20 });
      const run = await runCodex(PROMPT, codexConfig(model), key);
      console.log(`[e2e-cli] sandbox codex exec (${expected}): exit ${run.code} in ${run.ms} ms`);
      if (run.code !== 0 || run.timedOut) throw new Error(`codex exec failed in sandbox mode:\n${describeRun(run)}`);
      expect(run.lastMessage).toStartWith(`Sandbox reply from ${expected}. The tool returned: `);
      expect(run.lastMessage).toContain(SANDBOX_MARKER);
      expect(run.stdout + run.stderr).not.toMatch(VALIDATION_ERROR);

      const { rows } = await billing(t, key, accountId, 2);
      expect(rows.length).toBeGreaterThanOrEqual(2);
      for (const row of rows) {
        expect(row.model).toBe(expected);
        expect(row.status).toBe("success");
        expect(row.cost).toBeGreaterThan(0);
      }
    });
  }
});

describe.skipIf(!CODEX)("Codex CLI (codex exec --output-schema) in sandbox mode", () => {
  it("ends with a final answer valid against the schema (Responses text.format)", async () => {
    const { key } = await t.newAccountWithKey({ credit: 20 });
    const dir = tempDir("codex-schema-");
    try {
      const schema = {
        type: "object",
        properties: { summary: { type: "string", minLength: 1 }, files: { type: "array", items: { type: "string" }, minItems: 1 }, status: { enum: ["ok", "failed"] } },
        required: ["summary", "files", "status"],
        additionalProperties: false,
      };
      const file = join(dir.path, "schema.json");
      writeFileSync(file, JSON.stringify(schema));
      const run = await runCodex("Summarize the work as JSON.", codexConfig(), key, ["--output-schema", file]);
      if (run.code !== 0 || run.timedOut) throw new Error(`codex exec --output-schema failed in sandbox mode:\n${describeRun(run)}`);
      const answer = JSON.parse(run.lastMessage ?? "null");
      expect(Object.keys(answer).sort()).toEqual(["files", "status", "summary"]);
      expect(typeof answer.summary).toBe("string");
      expect(answer.summary.length).toBeGreaterThan(0);
      expect(answer.files.length).toBeGreaterThanOrEqual(1);
      expect(answer.files.every((item: unknown) => typeof item === "string")).toBe(true);
      expect(["ok", "failed"]).toContain(answer.status);
    } finally {
      dir.remove();
    }
  });
});

it("never reached an upstream", () => {
  expect(t.fake.requests).toHaveLength(0);
});
