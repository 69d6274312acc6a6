/**
 * The proof in numbers of issue 31: what automatic prompt caching saves an agent on a translated route into Claude.
 *
 *   npx bun bench/prompt-caching.ts
 *
 * A 10-turn agent conversation whose prompt grows from ~31 KB to ~108 KB (a ~20 KB system prompt and three tool
 * definitions; the task, then one ~8 KB tool result per turn, plus the assistant's answer and tool call of each
 * turn), sent whole every turn by a client that sets no cache breakpoint:
 *
 *   chat completions (`openai` SDK, not streamed)                    → claude-sonnet-5-5
 *   Responses (`openai.responses.create`, streamed, stateless: the
 *   whole input resent every turn, store: false)                     → claude-sonnet-5-5
 *
 * each through a gateway with automatic caching on (the default) and one with it off (ANTHROPIC_AUTO_CACHE=false):
 * 4 runs. The upstream is bench/fake-anthropic-cache.ts, a fake Anthropic Messages API that honours breakpoints as
 * Anthropic does (reads the longest prefix an earlier request wrote, writes up to the last breakpoint, caches
 * nothing without one; tokens = characters / 4). Its cache is emptied before each run; its clock does not move
 * (every turn comes well within the 5-minute lifetime).
 *
 * Prints, per run and turn, the prompt tokens, the tokens read from and written to the cache, and the turn's cost
 * from GET /v1/generation (`total_cost`, parsed exactly into nano-USD); each run's total; and a summary: the cost
 * with and without automatic caching and the saving. Every turn's billed cost is also checked against the fake's
 * reported usage priced from catalog.yaml, to the nano-USD. Gateways run in this process (SQLite in a temporary
 * directory). Takes a few seconds.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startGateway, type RunningGateway } from "../src/core/lifecycle.ts";
import { createLogger } from "../src/core/log.ts";
import { nanoToUsdString, usdToNano } from "../src/core/money.ts";
import { loadCatalog } from "../src/plugins/catalog/catalog.ts";
import { startCacheFake, type CacheFake, type CacheUsage } from "./fake-anthropic-cache.ts";

const MODEL = "claude-sonnet-5-5";
const TURNS = 10;
const ADMIN_TOKEN = "bench-admin";

// ------------------------------------------------------------------------------------------------
// The conversation: deterministic text
// ------------------------------------------------------------------------------------------------

/** About `bytes` characters of varied, code-like text, the same for the same seed. */
function filler(seed: number, bytes: number, kind: "prose" | "code"): string {
  const words = ["parser", "token", "span", "buffer", "request", "answer", "stream", "budget", "record", "cache", "prefix", "turn", "module", "error", "value", "index"];
  let state = seed * 2654435761 + 1;
  const next = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state;
  };
  const lines: string[] = [];
  let size = 0;
  for (let line = 0; size < bytes; line++) {
    const a = words[next() % words.length]!;
    const b = words[next() % words.length]!;
    const c = words[next() % words.length]!;
    const text =
      kind === "code"
        ? `  const ${a}_${line} = ${b}.${c}(${next() % 1000}, "${a}-${b}"); // ${c} of the ${a} at line ${line}`
        : `Rule ${seed}.${line}: keep the ${a} and the ${b} apart; when the ${c} changes, say so before editing anything.`;
    lines.push(text);
    size += text.length + 1;
  }
  return lines.join("\n").slice(0, bytes);
}

const SYSTEM = `You are a careful coding agent working in a TypeScript repository.\n${filler(1, 20_000, "prose")}`;
const TASK = `The test suite fails in the parser module. Here is the failing output and the files involved:\n${filler(2, 8_000, "code")}`;
const toolResult = (turn: number) => `// src/module-${turn}.ts\n${filler(100 + turn, 8_000, "code")}`;

const toolDescription = (name: string, seed: number) => `${name}: ${filler(seed, 900, "prose")}`;
const TOOLS = [
  { name: "read_file", description: toolDescription("Read a file of the repository", 10), parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } },
  {
    name: "edit_file",
    description: toolDescription("Replace text in a file", 11),
    parameters: { type: "object", properties: { path: { type: "string" }, old: { type: "string" }, new: { type: "string" } }, required: ["path", "old", "new"] },
  },
  { name: "run_tests", description: toolDescription("Run the test suite", 12), parameters: { type: "object", properties: { filter: { type: "string" } } } },
];

// ------------------------------------------------------------------------------------------------
// Gateways
// ------------------------------------------------------------------------------------------------

interface Gateway {
  gateway: RunningGateway;
  url: string;
  key: string;
  dir: string;
}

async function startBenchGateway(upstream: string, autoCache: boolean): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), "bench-prompt-caching-"));
  const env: Record<string, string | undefined> = {
    ...process.env,
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${join(dir, "gateway.db")}`,
    EDGE_RATE_LIMIT_RPS: "0",
    GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
    GATEWAY_SANDBOX: "false",
    GATEWAY_LOG: "silent",
    REDIS_URL: "",
    ANTHROPIC_BASE_URL: upstream,
    ANTHROPIC_API_KEY: "sk-ant-bench",
    ANTHROPIC_AUTO_CACHE: String(autoCache),
  };
  const gateway = await startGateway({ env, port: 0, log: createLogger("bench", { silent: true }) });
  const admin = async (path: string, body: unknown) => {
    const response = await fetch(gateway.url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`admin POST ${path}: ${response.status} ${await response.text()}`);
    return ((await response.json()) as any).data;
  };
  const account = await admin("/admin/v1/accounts", { name: "prompt-caching bench" });
  await admin(`/admin/v1/accounts/${account.id}/credits`, { amount: 1000, kind: "card", reference: `bench-${crypto.randomUUID()}` });
  const key = await admin(`/admin/v1/accounts/${account.id}/keys`, { name: "bench" });
  return { gateway, url: gateway.url, key: key.key, dir };
}

async function stopBenchGateway(g: Gateway): Promise<void> {
  await g.gateway.stop();
  rmSync(g.dir, { recursive: true, force: true });
}

interface Generation {
  promptTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  /** Exact nano-USD of total_cost and cache_discount (parsed from the JSON numbers' source text). */
  costNano: number;
  discountNano: number;
}

/** The generation record of a request (retried while its record is not yet readable). */
async function generation(g: Gateway, requestId: string): Promise<Generation> {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(`${g.url}/v1/generation?id=${encodeURIComponent(requestId)}`, { headers: { authorization: `Bearer ${g.key}` } });
    const text = await response.text();
    if (response.status === 200) {
      // Numbers kept as their source text: the view's USD figures are exact decimals of nano-USD.
      const reviver = (_key: string, value: unknown, context?: { source?: string }) => (typeof value === "number" && context?.source ? context.source : value);
      const data = (JSON.parse as any)(text, reviver).data;
      return {
        promptTokens: Number(data.usage.prompt_tokens),
        cachedTokens: Number(data.usage.cached_tokens),
        cacheWriteTokens: Number(data.usage.cache_write_tokens),
        costNano: usdToNano(String(data.total_cost)),
        discountNano: usdToNano(String(data.cache_discount ?? "0")),
      };
    }
    if (attempt >= 50) throw new Error(`generation ${requestId}: ${response.status} ${text}`);
    await Bun.sleep(20);
  }
}

// ------------------------------------------------------------------------------------------------
// The two clients
// ------------------------------------------------------------------------------------------------

type Ingress = "chat" | "responses";

/** One turn's request ids, in order. */
async function runChat(client: OpenAI): Promise<string[]> {
  const messages: any[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: TASK },
  ];
  const tools = TOOLS.map((tool) => ({ type: "function" as const, function: tool }));
  const ids: string[] = [];
  for (let turn = 1; turn <= TURNS; turn++) {
    const { data, response } = await client.chat.completions.create({ model: MODEL, max_tokens: 1024, messages, tools }).withResponse();
    ids.push(response.headers.get("x-gateway-request-id")!);
    const answer = data.choices[0]!.message;
    if (turn === TURNS) break;
    messages.push({ role: "assistant", content: answer.content, tool_calls: answer.tool_calls });
    const call = answer.tool_calls?.[0];
    if (!call) throw new Error(`turn ${turn}: no tool call in the answer`);
    messages.push({ role: "tool", tool_call_id: call.id, content: toolResult(turn + 1) });
  }
  return ids;
}

async function runResponses(client: OpenAI): Promise<string[]> {
  const input: any[] = [{ role: "user", content: TASK }];
  const tools = TOOLS.map((tool) => ({ type: "function" as const, name: tool.name, description: tool.description, parameters: tool.parameters, strict: false }));
  const ids: string[] = [];
  for (let turn = 1; turn <= TURNS; turn++) {
    const { data: stream, response } = await client.responses
      .create({ model: MODEL, instructions: SYSTEM, input, tools, max_output_tokens: 1024, store: false, stream: true })
      .withResponse();
    ids.push(response.headers.get("x-gateway-request-id")!);
    let output: any[] | undefined;
    for await (const event of stream) if (event.type === "response.completed") output = event.response.output;
    if (!output) throw new Error(`turn ${turn}: the stream ended without response.completed`);
    if (turn === TURNS) break;
    input.push(...output);
    const call = output.find((item) => item.type === "function_call");
    if (!call) throw new Error(`turn ${turn}: no function_call in the answer`);
    input.push({ type: "function_call_output", call_id: call.call_id, output: toolResult(turn + 1) });
  }
  return ids;
}

// ------------------------------------------------------------------------------------------------
// Runs and tables
// ------------------------------------------------------------------------------------------------

interface Turn {
  generation: Generation;
  upstream: CacheUsage;
  /** The fake's usage priced from catalog.yaml (nano-USD). */
  expectedNano: number;
}

interface Run {
  ingress: Ingress;
  autoCache: boolean;
  turns: Turn[];
  totalNano: number;
}

const catalog = loadCatalog("catalog.yaml");

function priced(usage: CacheUsage): number {
  const p = catalog.pricesFor(catalog.get(MODEL)!, usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens);
  return (
    usage.input_tokens * p.input +
    usage.cache_read_input_tokens * p.cacheRead +
    usage.cache_creation.ephemeral_5m_input_tokens * p.cacheWrite +
    usage.cache_creation.ephemeral_1h_input_tokens * p.cacheWrite1h +
    usage.output_tokens * p.output
  );
}

async function run(fake: CacheFake, g: Gateway, ingress: Ingress, autoCache: boolean): Promise<Run> {
  fake.reset();
  const client = new OpenAI({ apiKey: g.key, baseURL: `${g.url}/v1`, maxRetries: 0 });
  const ids = ingress === "chat" ? await runChat(client) : await runResponses(client);
  const turns: Turn[] = [];
  for (const [index, id] of ids.entries()) {
    const upstream = fake.answered[index]!;
    turns.push({ generation: await generation(g, id), upstream, expectedNano: priced(upstream) });
  }
  return { ingress, autoCache, turns, totalNano: turns.reduce((sum, turn) => sum + turn.generation.costNano, 0) };
}

const usd = (nano: number) => `$${nanoToUsdString(nano)}`;
const int = (value: number) => value.toLocaleString("en-US");
const label = (r: Run) => `${r.ingress === "chat" ? "chat completions" : "Responses (stateless, streamed)"} → ${MODEL}, automatic caching ${r.autoCache ? "ON" : "OFF"}`;

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => "| " + cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(" | ") + " |";
  return [line(header), "|" + widths.map((w, i) => (i === 0 ? "-" : "") + "-".repeat(w + 1) + (i === 0 ? "" : ":")).join("|") + "|", ...rows.map(line)].join("\n");
}

function printRun(r: Run): boolean {
  const exact = r.turns.every((turn) => turn.generation.costNano === turn.expectedNano);
  console.log(`\n${label(r)}`);
  console.log(
    table(
      ["turn", "prompt tokens", "read from cache", "written to cache", "cost (USD)", "cache discount (USD)"],
      [
        ...r.turns.map((turn, index) => [
          String(index + 1),
          int(turn.generation.promptTokens),
          int(turn.generation.cachedTokens),
          int(turn.generation.cacheWriteTokens),
          nanoToUsdString(turn.generation.costNano),
          nanoToUsdString(turn.generation.discountNano),
        ]),
        [
          "total",
          int(r.turns.reduce((sum, turn) => sum + turn.generation.promptTokens, 0)),
          int(r.turns.reduce((sum, turn) => sum + turn.generation.cachedTokens, 0)),
          int(r.turns.reduce((sum, turn) => sum + turn.generation.cacheWriteTokens, 0)),
          nanoToUsdString(r.totalNano),
          nanoToUsdString(r.turns.reduce((sum, turn) => sum + turn.generation.discountNano, 0)),
        ],
      ],
    ),
  );
  console.log(`billed = the upstream's usage priced from catalog.yaml, every turn to the nano-USD: ${exact ? "yes" : "NO"}`);
  return exact;
}

async function main(): Promise<void> {
  const fake = await startCacheFake();
  const runs: Run[] = [];
  try {
    for (const autoCache of [true, false]) {
      const g = await startBenchGateway(fake.url, autoCache);
      try {
        for (const ingress of ["chat", "responses"] as Ingress[]) runs.push(await run(fake, g, ingress, autoCache));
      } finally {
        await stopBenchGateway(g);
      }
    }
  } finally {
    await fake.stop();
  }

  console.log(`# Prompt caching: a ${TURNS}-turn agent conversation, no client breakpoints, ${MODEL} (fake upstream that honours breakpoints)`);
  let exact = true;
  for (const r of runs) exact = printRun(r) && exact;

  const summary: string[][] = [];
  for (const ingress of ["chat", "responses"] as Ingress[]) {
    const on = runs.find((r) => r.ingress === ingress && r.autoCache)!;
    const off = runs.find((r) => r.ingress === ingress && !r.autoCache)!;
    const saving = ((off.totalNano - on.totalNano) / off.totalNano) * 100;
    summary.push([
      ingress === "chat" ? "chat completions" : "Responses",
      usd(off.totalNano),
      usd(on.totalNano),
      usd(off.totalNano - on.totalNano),
      `${saving.toFixed(1)}%`,
      `${int(on.turns.reduce((sum, turn) => sum + turn.generation.cachedTokens, 0))} / ${int(on.turns.reduce((sum, turn) => sum + turn.generation.promptTokens, 0))}`,
    ]);
  }
  console.log(`\nSummary: the conversation's cost without and with automatic caching`);
  console.log(table(["route → " + MODEL, "caching OFF", "caching ON", "saved", "saving", "prompt tokens read from cache (ON)"], summary));
  if (!exact) {
    console.error("a billed cost differs from the upstream's usage priced from catalog.yaml");
    process.exit(1);
  }
}

await main();
