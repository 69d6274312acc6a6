/**
 * What counting a coding agent's prompt costs the event loop: a ~160 KB prompt (this repository's source
 * and README) counted the first time and again (agents resend the whole conversation every turn), for an
 * OpenAI model (o200k, exact) and another family (bounded).
 *
 *   bun bench/token-count.ts
 */
import { countPromptTokens, loadTokenizer } from "../src/plugins/token-count/count.ts";
import { ROOT } from "./lib.ts";

await loadTokenizer();
const files = ["src/core/pipeline.ts", "README.md", "src/plugins/budget/index.ts", "src/core/canonical.ts"];
const source = (await Promise.all(files.map((file) => Bun.file(`${ROOT}/${file}`).text()))).join("\n");
const text = source.repeat(Math.max(1, Math.ceil(160_000 / source.length)));

function timed(body: Record<string, unknown>, exact: boolean): { tokens: number; ms: number } {
  const started = performance.now();
  const tokens = countPromptTokens(body, exact);
  return { tokens, ms: performance.now() - started };
}

console.log(`prompt: ${(Buffer.byteLength(text) / 1024).toFixed(0)} KB in one user message, plus a new 40-byte turn per request`);
for (const exact of [true, false]) {
  const history = { role: "user", content: text + (exact ? "" : " ") }; // distinct text per family: no shared cache entry
  const first = timed({ messages: [history] }, exact);
  const turns = Array.from({ length: 20 }, (_, i) => timed({ messages: [history, { role: "user", content: `turn ${i}: what does this code do?` }] }, exact));
  const again = turns.map((t) => t.ms).sort((a, b) => a - b)[Math.floor(turns.length / 2)]!;
  console.log(`${exact ? "OpenAI (o200k, exact)" : "other families (bound)"}: ${first.tokens.toLocaleString("en-US")} tokens; first count ${first.ms.toFixed(2)} ms, same history + a new turn ${again.toFixed(3)} ms (median of 20)`);
}
