/**
 * Codex CLI (the official `codex`, @openai/codex) in `codex exec` mode against the gateway, offline:
 * CODEX_HOME = a temporary dir whose config.toml names the gateway as a custom Responses provider
 * (`base_url = <gateway>/v1`, `env_key = "GATEWAY_KEY"`, `wire_api = "responses"`).
 *
 * Per model: a plain turn first (it also shows which shell tool this Codex version declares for the model),
 * then one tool loop: the fake upstream asks for that shell tool, Codex runs it and sends the output back,
 * the fake answers text. OpenAI models are relayed natively (Responses); other families are translated.
 */
import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  cliBinary,
  cliEnv,
  completionRequests,
  describeRun,
  describeThroughWorkers,
  directive,
  expectBilledExactly,
  runCli,
  runCodexExec,
  startCliGateway,
  tempDir,
  type CliGateway,
  type CliRun,
} from "./cli.ts";

const CODEX = cliBinary("codex");
if (!CODEX) console.warn("[e2e-cli] SKIPPED Codex tests: test/e2e-cli/node_modules/.bin/codex is missing (bash test/e2e-cli/install.sh)");

/** The shell computes the marker, so finding it in a tool output proves the command ran. */
const COMMAND = "echo gateway-$((6*7))";
const MARKER = "gateway-42";
const FINAL = "Codex ran the command through the gateway.";

let g: CliGateway;
beforeAll(async () => {
  g = await startCliGateway();
});
afterAll(async () => {
  await g?.stop();
});

/** The config.toml that points Codex at the gateway. */
function codexConfig(gatewayUrl: string, model: string): string {
  return [
    `model = "${model}"`,
    `model_provider = "gateway"`,
    ``,
    `[model_providers.gateway]`,
    `name = "AI gateway"`,
    `base_url = "${gatewayUrl}/v1"`,
    `env_key = "GATEWAY_KEY"`,
    `wire_api = "responses"`,
    ``,
  ].join("\n");
}

function runCodex(model: string, prompt: string, key: string, gateway: CliGateway = g): Promise<CliRun & { lastMessage: string | null }> {
  return runCodexExec(CODEX!, codexConfig(gateway.t.url, model), prompt, key);
}

interface DeclaredTool {
  name: string;
  kind: "function" | "custom";
  parameters?: any;
}

/**
 * The tools an upstream request declares, whatever its format: Responses `tools` and `additional_tools` input
 * items (namespaces flattened), Chat `tools[].function`, Messages `tools[]`.
 */
function declaredTools(body: any): DeclaredTool[] {
  const out: DeclaredTool[] = [];
  const visit = (tools: any[]) => {
    for (const tool of tools ?? []) {
      if (tool?.type === "namespace") visit(tool.tools);
      else if (tool?.type === "function" && tool.function) out.push({ name: tool.function.name, kind: "function", parameters: tool.function.parameters });
      else if (tool?.type === "function") out.push({ name: tool.name, kind: "function", parameters: tool.parameters });
      else if (tool?.type === "custom") out.push({ name: tool.name, kind: "custom" });
      else if (typeof tool?.name === "string" && tool.input_schema) out.push({ name: tool.name, kind: "function", parameters: tool.input_schema });
    }
  };
  visit(body?.tools);
  for (const item of Array.isArray(body?.input) ? body.input : []) if (item?.type === "additional_tools") visit(item.tools);
  return out;
}

/** The fake's tool call that runs COMMAND through a shell tool this Codex declared. */
function shellCall(tools: DeclaredTool[]): { name: string; arguments?: unknown; input?: string } {
  const find = (name: string, kind: DeclaredTool["kind"]) => tools.find((tool) => tool.name === name && tool.kind === kind);
  if (find("exec_command", "function")) return { name: "exec_command", arguments: { cmd: COMMAND } };
  if (find("shell_command", "function")) return { name: "shell_command", arguments: { command: COMMAND } };
  if (find("shell", "function")) return { name: "shell", arguments: { command: ["bash", "-lc", COMMAND] } };
  // Code mode (Codex 0.16x on GPT-6 models): one freeform `exec` tool running JavaScript that calls nested tools.
  const script = `const result = await tools.exec_command({ cmd: ${JSON.stringify(COMMAND)} });\ntext(result.output);`;
  if (find("exec", "custom")) return { name: "exec", input: script };
  if (find("exec", "function")) return { name: "exec", arguments: { input: script } }; // a custom tool translated to a function
  throw new Error(`no shell tool among the declared tools: ${tools.map((tool) => `${tool.kind} ${tool.name}`).join(", ")}`);
}

/** The output Codex sent back for the call named `name`, in any upstream format; `paired` when its id matches the call's. */
function toolOutputIn(body: any, name: string): { output: string; paired: boolean } | null {
  const text = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));
  // Responses: function_call / custom_tool_call items, then *_output items with the same call_id.
  if (Array.isArray(body?.input)) {
    const calls = new Map<string, string>();
    for (const item of body.input) {
      if (item?.type === "function_call" || item?.type === "custom_tool_call") calls.set(item.call_id, item.name);
      if (item?.type === "function_call_output" || item?.type === "custom_tool_call_output") return { output: text(item.output), paired: calls.get(item.call_id) === name };
    }
    return null;
  }
  const messages: any[] = body?.messages ?? [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (message.role === "tool") {
      const call = messages.slice(0, i).flatMap((earlier) => earlier.tool_calls ?? []).find((c: any) => c.id === message.tool_call_id);
      return { output: text(message.content), paired: call?.function?.name === name };
    }
    for (const block of Array.isArray(message.content) ? message.content : []) {
      if (block?.type !== "tool_result") continue;
      const use = (messages[i - 1]?.content ?? []).find((b: any) => b?.type === "tool_use" && b.id === block.tool_use_id);
      return { output: text(block.content), paired: use?.name === name };
    }
  }
  return null;
}

function expectSuccess(run: CliRun & { lastMessage: string | null }, model: string) {
  if (run.code !== 0 || run.timedOut) throw new Error(`codex exec failed on ${model}:\n${describeRun(run)}`);
}

describe.skipIf(!CODEX)("Codex CLI (codex exec) through the gateway, one shell tool loop", () => {
  const cases = [
    { model: "gpt-6-luna", path: "/v1/responses", how: "OpenAI model: Responses relayed natively" },
    { model: "deepseek-flash", path: "/v1/chat/completions", how: "DeepSeek model: translated to Chat" },
    { model: "claude-sonnet-5-5", path: "/v1/messages", how: "Anthropic model: translated to Messages" },
  ];
  for (const { model, path, how } of cases) {
    it(`${model} (${how})`, async () => {
      await expectShellLoop(g, model, path);
    });
  }
});

describeThroughWorkers(!CODEX, "Codex CLI, gpt-6-luna on Responses relayed,", (gateway) => expectShellLoop(gateway, "gpt-6-luna", "/v1/responses"));

/** A plain `codex exec` turn, then one shell tool loop, on `model` through `gateway`: answered, the command ran, every call billed. */
async function expectShellLoop(gateway: CliGateway, model: string, path: string): Promise<{ accountId: string }> {
  const { accountId, key } = await gateway.t.newAccountWithKey({ credit: 50 });
  gateway.fake.reset();

  // 1. A plain turn; its upstream request shows the tools Codex declares for this model.
  const plain = await runCodex(model, "Say hello.", key, gateway);
  console.log(`[e2e-cli] codex exec (plain) -m ${model}: exit ${plain.code} in ${plain.ms} ms`);
  expectSuccess(plain, model);
  expect(plain.lastMessage).toBe(`Hello from ${model}.`);
  const [first] = completionRequests(gateway.fake);
  expect(first!.path.split("?")[0]).toBe(path);
  if (path === "/v1/responses") expect(first!.body).toMatchObject({ model, stream: true, store: false });
  const call = shellCall(declaredTools(first!.body));

  // 2. The tool loop.
  const before = completionRequests(gateway.fake).length;
  const prompt = `Run the marker command. ${directive({ tool_calls: [call], after_tool_result: { text: FINAL } })}`;
  const run = await runCodex(model, prompt, key, gateway);
  console.log(`[e2e-cli] codex exec (tool loop, ${call.name}) -m ${model}: exit ${run.code} in ${run.ms} ms`);
  expectSuccess(run, model);
  expect(run.lastMessage).toBe(FINAL);
  expect(run.stdout).toContain(FINAL);

  const loop = completionRequests(gateway.fake).slice(before);
  expect(loop.length).toBeGreaterThanOrEqual(2);
  for (const request of loop) {
    expect(request.path.split("?")[0]).toBe(path);
    expect(request.body.model).toBe(model);
  }
  expect(toolOutputIn(loop[0]!.body, call.name)).toBeNull();
  expect(prompt).not.toContain(MARKER);
  const answered = loop.map((request) => toolOutputIn(request.body, call.name)).find((found) => found !== null);
  expect(answered).toBeDefined();
  expect(answered!.paired).toBe(true);
  expect(answered!.output).toContain(MARKER);

  // Billed: one generation record per upstream call, all charged, and the key's usage adds up.
  await expectBilledExactly(gateway, key, accountId, 50, [model]);
  return { accountId };
}

describe.skipIf(!CODEX)("Codex's own request for an OpenAI model name, on translated routes", () => {
  it("declares its tools in an additional_tools input item, and the gateway translates them to Chat and Messages tools", async () => {
    const { key } = await g.t.newAccountWithKey({ credit: 50 });
    g.fake.reset();
    const plain = await runCodex("gpt-6-luna", "Say hello.", key);
    expectSuccess(plain, "gpt-6-luna");
    const [captured] = completionRequests(g.fake);
    expect(captured!.body.input[0].type).toBe("additional_tools");
    expect(Array.isArray(captured!.body.input[0].tools)).toBe(true);
    expect(captured!.body.tools ?? []).toEqual([]);
    const declared = declaredTools(captured!.body).map((tool) => tool.name);
    expect(declared).toContain("exec");

    // The same body, sent to models the gateway translates for (before: 400 'input.0 is a "additional_tools" item').
    for (const { model, path } of [
      { model: "deepseek-flash", path: "/v1/chat/completions" },
      { model: "claude-sonnet-5-5", path: "/v1/messages" },
    ]) {
      g.fake.reset();
      const response = await fetch(`${g.t.url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ ...captured!.body, model, stream: false }),
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as any).output.at(-1).content[0].text).toBe(`Hello from ${model}.`);
      const [upstream] = completionRequests(g.fake);
      expect(upstream!.path.split("?")[0]).toBe(path);
      const names = declaredTools(upstream!.body).map((tool) => tool.name);
      // Namespaced tools travel as <namespace>__<name>: every declared tool, once.
      expect(names.map((name) => name.split("__").at(-1)).sort()).toEqual([...declared].sort());
      expect(names).toContain("functions__exec");
    }
  });
});
