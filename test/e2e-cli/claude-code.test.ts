/**
 * Claude Code (the official `claude` CLI, @anthropic-ai/claude-code) in print mode against the gateway, offline:
 * ANTHROPIC_BASE_URL = the gateway, ANTHROPIC_API_KEY = a gateway key, a temporary HOME (no user config).
 * Each run is one tool loop: the fake upstream asks for a Bash call, Claude Code runs it and sends the
 * tool_result, the fake answers text. On an Anthropic model the gateway relays; on others it translates.
 */
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import {
  cliBinary,
  cliEnv,
  completionRequests,
  describeRun,
  describeThroughWorkers,
  directive,
  expectBilledExactly,
  runCli,
  startCliGateway,
  tempDir,
  type CliGateway,
} from "./cli.ts";

const CLAUDE = cliBinary("claude");
if (!CLAUDE) console.warn("[e2e-cli] SKIPPED Claude Code tests: test/e2e-cli/node_modules/.bin/claude is missing (bash test/e2e-cli/install.sh)");

const SMALL_MODEL = "claude-haiku-4-5";
/** The shell computes the marker, so finding it in a tool result proves the command ran. */
const COMMAND = "echo gateway-$((6*7))";
const MARKER = "gateway-42";
const FINAL = "Claude Code ran the command through the gateway.";

let g: CliGateway;
beforeAll(async () => {
  g = await startCliGateway();
});
afterAll(async () => {
  await g?.stop();
});

async function runClaude(model: string, prompt: string, key: string, gateway: CliGateway = g) {
  const home = tempDir("claude-home-");
  const work = tempDir("claude-work-");
  try {
    const args = ["-p", prompt, "--model", model, "--output-format", "json", "--allowedTools", "Bash", "--max-turns", "4"];
    const env = cliEnv(home.path, {
      ANTHROPIC_BASE_URL: gateway.t.url,
      ANTHROPIC_API_KEY: key,
      ANTHROPIC_SMALL_FAST_MODEL: SMALL_MODEL,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: SMALL_MODEL,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
    });
    return await runCli(CLAUDE!, args, { cwd: work.path, env });
  } finally {
    home.remove();
    work.remove();
  }
}

/** The `--output-format json` result object (the last JSON line of stdout). */
function resultOf(stdout: string): any {
  const line = stdout.trim().split("\n").filter(Boolean).at(-1) ?? "";
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

/** Tool names an upstream request declares (Messages `tools[].name` or Chat `tools[].function.name`). */
function declaredTools(body: any): string[] {
  return (body?.tools ?? []).map((tool: any) => tool?.function?.name ?? tool?.name);
}

/** The Bash result the client sent back, checked against the call the fake made (ids paired). */
function toolResultIn(body: any): { id: string; output: string; callId: string | undefined } | null {
  const messages: any[] = body?.messages ?? [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    // Chat: {role:"tool", tool_call_id, content} after the assistant's tool_calls.
    if (message.role === "tool") {
      const call = messages
        .slice(0, i)
        .flatMap((earlier) => earlier.tool_calls ?? [])
        .find((c: any) => c.id === message.tool_call_id);
      const output = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
      return { id: message.tool_call_id, output, callId: call?.function?.name === "Bash" && JSON.parse(call.function.arguments).command === COMMAND ? call.id : undefined };
    }
    // Messages: a user turn's tool_result block answering the previous assistant turn's tool_use.
    for (const block of Array.isArray(message.content) ? message.content : []) {
      if (block?.type !== "tool_result") continue;
      const use = (messages[i - 1]?.content ?? []).find((b: any) => b?.type === "tool_use" && b.id === block.tool_use_id);
      const output = typeof block.content === "string" ? block.content : JSON.stringify(block.content);
      return { id: block.tool_use_id, output, callId: use?.name === "Bash" && use.input?.command === COMMAND ? use.id : undefined };
    }
  }
  return null;
}

describe.skipIf(!CLAUDE)("Claude Code CLI (claude -p) through the gateway, one Bash tool loop", () => {
  const cases = [
    { model: "claude-sonnet-5-5", path: "/v1/messages", how: "Anthropic model: relayed" },
    { model: "gpt-6-luna", path: "/v1/chat/completions", how: "OpenAI model: translated to Chat" },
    { model: "deepseek-flash", path: "/v1/chat/completions", how: "DeepSeek model: translated to Chat" },
  ];
  for (const { model, path, how } of cases) {
    it(`${model} (${how})`, async () => {
      await expectToolLoop(g, model, path);
    });
  }
});

describeThroughWorkers(!CLAUDE, "Claude Code CLI, claude-sonnet-5-5 relayed,", (gateway) => expectToolLoop(gateway, "claude-sonnet-5-5", "/v1/messages"));

/** One Bash tool loop of `claude -p` on `model` through `gateway`: the command ran, the answer came, every call billed. */
async function expectToolLoop(gateway: CliGateway, model: string, path: string): Promise<{ accountId: string }> {
  const { accountId, key } = await gateway.t.newAccountWithKey({ credit: 50 });
  gateway.fake.reset();
  const script = {
    // With thinking on, Anthropic wants the tool-using turn to start with a (signed) thinking block.
    thinking: "The user wants the marker command run.",
    tool_calls: [{ name: "Bash", arguments: { command: COMMAND, description: "Print the gateway marker" } }],
    after_tool_result: { text: FINAL },
  };
  const prompt = `Run the marker command. ${directive(script)}`;
  const run = await runClaude(model, prompt, key, gateway);
  console.log(`[e2e-cli] claude -p --model ${model}: exit ${run.code} in ${run.ms} ms`);
  const result = resultOf(run.stdout);
  if (run.code !== 0 || !result || result.is_error) throw new Error(`Claude Code failed on ${model}:\n${describeRun(run)}`);

  expect(result.subtype).toBe("success");
  expect(result.result).toBe(FINAL);

  // The upstream saw: the prompt with the Bash tool declared; then the Bash output as the tool result.
  const upstream = completionRequests(gateway.fake).filter((request) => request.body?.model === model);
  expect(upstream.every((request) => request.path.split("?")[0] === path)).toBe(true);
  expect(upstream.length).toBeGreaterThanOrEqual(2);
  expect(declaredTools(upstream[0]!.body)).toContain("Bash");
  expect(toolResultIn(upstream[0]!.body)).toBeNull();
  expect(prompt).not.toContain(MARKER);
  const answered = upstream.map((request) => toolResultIn(request.body)).find((found) => found !== null);
  expect(answered).toBeDefined();
  expect(answered!.output).toContain(MARKER);
  expect(answered!.callId).toBe(answered!.id);

  // Billed: one generation record per upstream call (the small model's too), all charged, and the key's usage adds up.
  const { rows } = await expectBilledExactly(gateway, key, accountId, 50, [model, SMALL_MODEL]);
  expect(rows.filter((row) => row.model === model).length).toBe(upstream.length);
  return { accountId };
}

/**
 * Claude Code 2.1 sends `role: "system"` turns inside `messages` (beta mid-conversation-system-2026-04-07).
 * The gateway must accept them (before: 400 `messages.1.role: must be "user" or "assistant"`, which Claude Code
 * does not recognise as its cue to fall back): relayed as is to Anthropic, hoisted into the system prompt elsewhere.
 */
describe("Messages requests as Claude Code 2.1 shapes them (no CLI needed)", () => {
  const BETA = "claude-code-20250219,mid-conversation-system-2026-04-07";
  const body = (model: string) => ({
    model,
    max_tokens: 512,
    system: [{ type: "text", text: "You are a helpful agent." }],
    messages: [
      { role: "user", content: [{ type: "text", text: "Hi there." }] },
      { role: "system", content: "Available agent types: general-purpose." },
    ],
  });
  const post = (key: string, payload: unknown) =>
    fetch(`${g.t.url}/v1/messages?beta=true`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01", "anthropic-beta": BETA },
      body: JSON.stringify(payload),
    });

  it("relays a mid-conversation system message to an Anthropic model untouched", async () => {
    const { key } = await g.t.newAccountWithKey();
    g.fake.reset();
    const response = await post(key, body("claude-sonnet-5-5"));
    const answer = (await response.json()) as any;
    expect(response.status).toBe(200);
    expect(answer.content).toEqual([{ type: "text", text: "Hello from claude-sonnet-5-5." }]);
    const [upstream] = completionRequests(g.fake);
    expect(upstream!.body.messages).toEqual(body("claude-sonnet-5-5").messages);
    expect(upstream!.headers["anthropic-beta"]).toContain("mid-conversation-system-2026-04-07");
  });

  it("hoists it into the system prompt for a translated model", async () => {
    const { key } = await g.t.newAccountWithKey();
    g.fake.reset();
    const response = await post(key, body("gpt-6-luna"));
    const answer = (await response.json()) as any;
    expect(response.status).toBe(200);
    expect(answer.content).toEqual([{ type: "text", text: "Hello from gpt-6-luna." }]);
    const [upstream] = completionRequests(g.fake);
    const messages: any[] = upstream!.body.messages;
    expect(messages.map((message) => message.role)).toEqual(["system", "user"]);
    expect(messages[0].content).toBe("You are a helpful agent.\n\nAvailable agent types: general-purpose.");
  });

  it("still refuses a system message that opens the conversation (the top-level system field is for that)", async () => {
    const { key } = await g.t.newAccountWithKey();
    const response = await post(key, { ...body("claude-sonnet-5-5"), messages: [...body("claude-sonnet-5-5").messages].reverse() });
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error).toMatchObject({ type: "invalid_request_error", message: expect.stringContaining("messages.0.role") });
  });

  it("counts tokens for such a request", async () => {
    const { key } = await g.t.newAccountWithKey();
    const response = await fetch(`${g.t.url}/v1/messages/count_tokens?beta=true`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01", "anthropic-beta": BETA },
      body: JSON.stringify({ ...body("claude-sonnet-5-5"), max_tokens: undefined }),
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).input_tokens).toBeGreaterThan(0);
  });
});
