/**
 * The dashboard's Logs page over 1,000,000 requests (issue 28: "renders in < 200 ms server time; pages weigh
 * < 200 KB with their assets").
 *
 * Run: npx bun bench/dashboard-logs.ts [--rows 1000000] [--samples 30] [--keep]
 *
 * Seeds a SQLite store in a temporary directory: one account, 2 keys, a dashboard user, and `rows` generations
 * over the last 90 UTC days across 5 models (~3% failed, ~0.5% cancelled), written straight into the
 * `generations` table in big transactions (the Logs page reads only that table; the daily roll-ups are not
 * seeded). Then starts a gateway on that file, signs in over HTTP and times GET /dashboard/logs (first page,
 * each filter, combined filters, a deep cursor page, the htmx table fragment) and a request's detail, `samples`
 * times each after warm-up, from request sent to body read on loopback: the server's time plus a fraction of a
 * millisecond of HTTP. Prints a markdown table (p50, p95, max) and the page weight (HTML as sent, assets gzipped).
 * The directory is removed at the end unless --keep.
 */
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway } from "../src/core/lifecycle.ts";
import { createLogger } from "../src/core/log.ts";
import { hashApiKey, maskApiKey } from "../src/plugins/auth/keys.ts";
import { newUser } from "../src/plugins/auth/users.ts";
import { createSqliteRepository } from "../src/plugins/storage/sqlite/repository.ts";

const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
};
const ROWS = Number(arg("--rows", "1000000"));
const SAMPLES = Number(arg("--samples", "30"));
const KEEP = args.includes("--keep");
const WARMUP = 3;
const DAYS = 90;
const DAY_MS = 86_400_000;
const BATCH = 50_000;
const MODELS = ["gpt-6-luna", "gpt-6.2-sol", "deepseek-flash", "deepseek-v4-pro", "grok-4.3"];
const EMAIL = "bench@example.com";
const PASSWORD = "bench password 123";

const dataDir = mkdtempSync(join(tmpdir(), "dashboard-logs-bench-"));
const dbPath = join(dataDir, "gateway.db");

// ---------------------------------------------------------------------------------------------------------
// Seed
// ---------------------------------------------------------------------------------------------------------

const seedStarted = performance.now();
const repo = createSqliteRepository(dbPath, { log: createLogger("seed", { silent: true }) });
const account = await repo.createAccount("Logs bench");
await repo.addCredit({ accountId: account.id, amount: 1_000_000 * 1e9, kind: "card", reference: `bench-${crypto.randomUUID()}` });
const keys: string[] = [];
for (const name of ["production", "staging"]) {
  const secret = `sk-gw-bench${crypto.randomUUID().replaceAll("-", "")}`;
  const key = await repo.createKey({
    id: "",
    accountId: account.id,
    name,
    keyHash: hashApiKey(secret),
    label: maskApiKey(secret),
    limit: null,
    models: null,
    requestsPerMinute: null,
    tokensPerMinute: null,
    expiresAt: null,
  });
  keys.push(key.id);
}
await repo.createUser(await newUser({ accountId: account.id, email: EMAIL, password: PASSWORD, role: "owner" }));
await repo.close();

const db = new Database(dbPath);
db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;");
const COLUMNS = [
  "id", "response_id", "account_id", "key_id", "model", "provider", "ingress", "stream", "status", "error_code", "created_at",
  "latency_ms", "time_to_first_token_ms", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
  "reasoning_tokens", "input_cost_nano", "cache_read_cost_nano", "cache_write_cost_nano", "output_cost_nano", "total_cost_nano",
  "unbilled_cost_nano", "usage_estimated", "attempts",
];
const insert = db.prepare(`insert into generations (${COLUMNS.join(", ")}) values (${COLUMNS.map(() => "?").join(", ")})`);
const now = Date.now();
const windowStart = Math.floor(now / DAY_MS) * DAY_MS - (DAYS - 1) * DAY_MS;
const step = (now - windowStart) / ROWS;
const insertBatch = db.transaction((from: number, to: number) => {
  for (let i = from; i < to; i++) {
    // In arrival order, as the gateway writes them: time-ordered created_at and UUIDv7 request ids.
    const createdAt = windowStart + Math.floor(i * step + Math.random() * step);
    const status = i % 200 === 7 ? "cancelled" : i % 33 === 0 ? "failed" : "success";
    const ok = status === "success";
    const model = MODELS[(i * 7919) % MODELS.length]!;
    const promptTokens = 50 + (i % 1900);
    const completionTokens = ok ? 10 + (i % 700) : 0;
    const cachedTokens = i % 3 === 0 ? Math.floor(promptTokens / 2) : 0;
    const inputCost = ok ? (promptTokens - cachedTokens) * 137 : 0;
    const cacheReadCost = ok ? cachedTokens * 13 : 0;
    const outputCost = completionTokens * 1093;
    const latency = 200 + (i % 3000);
    const attempts = ok
      ? `[{"deployment":"openai#1","status":200,"error_class":null,"latency_ms":${latency - 3}}]`
      : `[{"deployment":"openai#1","status":503,"error_class":"server_error","latency_ms":40},{"deployment":"openai#2","status":500,"error_class":"server_error","latency_ms":${latency - 50}}]`;
    insert.run(
      "gen-" + Bun.randomUUIDv7("hex", createdAt).replaceAll("-", ""),
      null,
      account.id,
      keys[i % 7 === 0 ? 1 : 0]!,
      model,
      model.startsWith("gpt") ? "openai" : model.startsWith("grok") ? "xai" : "deepseek",
      "openai-chat",
      i % 2,
      status,
      ok ? null : status === "cancelled" ? "client_closed" : "upstream_error",
      createdAt,
      latency,
      ok ? 100 + (i % 900) : null,
      promptTokens,
      completionTokens,
      cachedTokens,
      0,
      i % 5 === 0 ? Math.floor(completionTokens / 3) : 0,
      inputCost,
      cacheReadCost,
      0,
      outputCost,
      inputCost + cacheReadCost + outputCost,
      0,
      0,
      attempts,
    );
  }
});
for (let from = 0; from < ROWS; from += BATCH) insertBatch(from, Math.min(ROWS, from + BATCH));
db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
// Cursors and ids the cases use, read before the gateway opens the file.
const deep = db
  .query(`select created_at as at, id from generations where account_id = ? order by created_at desc, id desc limit 1 offset ?`)
  .get(account.id, Math.floor(ROWS * 0.9)) as { at: number; id: string };
const middle = db.query(`select id from generations where account_id = ? order by created_at desc, id desc limit 1 offset ?`).get(account.id, Math.floor(ROWS / 2)) as { id: string };
const failedId = (db.query(`select id from generations where account_id = ? and status = 'failed' and status <> 'success' order by created_at desc limit 1`).get(account.id) as { id: string }).id;
db.close();
const seedMs = performance.now() - seedStarted;
const dbBytes = ["", "-wal", "-shm"].reduce((sum, suffix) => {
  try {
    return sum + statSync(dbPath + suffix).size;
  } catch {
    return sum;
  }
}, 0);

// ---------------------------------------------------------------------------------------------------------
// Gateway, sign-in
// ---------------------------------------------------------------------------------------------------------

const gateway = await startGateway({
  port: 0,
  log: createLogger("bench", { silent: true }),
  env: {
    ...process.env,
    HOST: "127.0.0.1",
    DATABASE_URL: `sqlite:${dbPath}`,
    EDGE_RATE_LIMIT_RPS: "0",
    GATEWAY_ADMIN_TOKEN: "bench-admin-token",
    GATEWAY_SANDBOX: "false",
    OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    OPENAI_API_KEY: "sk-unused",
    DEEPSEEK_BASE_URL: "http://127.0.0.1:9/v1",
    DEEPSEEK_API_KEY: "sk-unused",
    XAI_BASE_URL: "http://127.0.0.1:9/v1",
    XAI_API_KEY: "sk-unused",
    MISTRAL_API_KEY: "",
  },
});
const base = gateway.url;

function cookieOf(response: Response, name: string): string {
  for (const line of response.headers.getSetCookie()) if (line.startsWith(name + "=")) return line.split(";")[0]!;
  throw new Error(`no ${name} cookie: ${response.status}`);
}
const form = await fetch(`${base}/dashboard/sign-in`);
const pre = cookieOf(form, "gw_signin");
const csrf = /name="_csrf" value="([^"]+)"/.exec(await form.text())![1]!;
const signIn = await fetch(`${base}/dashboard/sign-in`, {
  method: "POST",
  redirect: "manual",
  headers: { cookie: pre, "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({ _csrf: csrf, email: EMAIL, password: PASSWORD }),
});
if (signIn.status !== 303) throw new Error(`sign-in: ${signIn.status} ${await signIn.text()}`);
const session = cookieOf(signIn, "gw_session");

// ---------------------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------------------

const aDay = new Date(windowStart + 45 * DAY_MS).toISOString().slice(0, 10);
const cases: { name: string; path: string; htmx?: string }[] = [
  { name: "first page", path: "/dashboard/logs" },
  { name: "first page, htmx table fragment", path: "/dashboard/logs", htmx: "log" },
  { name: "key (the 1-in-7 key)", path: `/dashboard/logs?key=${keys[1]}` },
  { name: "model", path: "/dashboard/logs?model=deepseek-flash" },
  { name: "model with no requests", path: "/dashboard/logs?model=gpt-6-astra" },
  { name: "status failed", path: "/dashboard/logs?status=failed" },
  { name: "status cancelled", path: "/dashboard/logs?status=cancelled" },
  { name: "status success", path: "/dashboard/logs?status=success" },
  { name: `day ${aDay}`, path: `/dashboard/logs?day=${aDay}` },
  { name: "key + status cancelled", path: `/dashboard/logs?key=${keys[1]}&status=cancelled` },
  { name: "key + model + status failed + day", path: `/dashboard/logs?key=${keys[1]}&model=grok-4.3&status=failed&day=${aDay}` },
  { name: `deep cursor page (row ${Math.floor(ROWS * 0.9).toLocaleString("en-US")})`, path: `/dashboard/logs?before=${deep.at}_${deep.id}` },
  { name: "deep cursor + model", path: `/dashboard/logs?model=gpt-6-luna&before=${deep.at}_${deep.id}` },
  { name: `detail page (row ${Math.floor(ROWS / 2).toLocaleString("en-US")})`, path: `/dashboard/logs/${middle.id}` },
  { name: "detail, htmx row fragment (failed)", path: `/dashboard/logs/${failedId}`, htmx: "d-3" },
];

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const results: { name: string; p50: number; p95: number; max: number; bytes: number; rows: number }[] = [];
for (const c of cases) {
  const headers: Record<string, string> = { cookie: session };
  if (c.htmx) Object.assign(headers, { "hx-request": "true", "hx-target": c.htmx });
  const times: number[] = [];
  let bytes = 0;
  let rows = 0;
  for (let i = 0; i < WARMUP + SAMPLES; i++) {
    const started = performance.now();
    const response = await fetch(base + c.path, { headers, redirect: "manual" });
    const body = await response.text();
    const elapsed = performance.now() - started;
    const expected = c.path.startsWith("/dashboard/logs/") ? "Upstream attempts" : 'aria-label="Request log"';
    if (response.status !== 200 || !body.includes(expected)) throw new Error(`${c.name}: ${response.status} ${body.slice(0, 300)}`);
    if (i >= WARMUP) times.push(elapsed);
    bytes = body.length;
    rows = (body.match(/class="detail-slot"/g) ?? []).length;
  }
  times.sort((a, b) => a - b);
  results.push({ name: c.name, p50: percentile(times, 50), p95: percentile(times, 95), max: times.at(-1)!, bytes, rows });
}

// Page weight: the first page as sent (the gateway does not compress pages) and its assets as sent gzipped.
const page = await (await fetch(`${base}/dashboard/logs`, { headers: { cookie: session } })).text();
const assetUrls = [...page.matchAll(/(?:href|src)="(\/dashboard\/assets\/[^"]+)"/g)].map((m) => m[1]!);
let assetBytes = 0;
const assetRows: string[] = [];
for (const url of assetUrls) {
  const response = await fetch(base + url, { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit);
  const size = (await response.arrayBuffer()).byteLength;
  assetBytes += size;
  assetRows.push(`${url.replace("/dashboard/assets/", "")} ${(size / 1024).toFixed(1)} KB (${response.headers.get("content-encoding") ?? "identity"})`);
}
const pageBytes = new TextEncoder().encode(page).byteLength;

await gateway.stop();
if (!KEEP) rmSync(dataDir, { recursive: true, force: true });

const ms = (value: number) => value.toFixed(1);
console.log(`\n### Dashboard Logs over ${ROWS.toLocaleString("en-US")} requests (SQLite, ${SAMPLES} samples per case after ${WARMUP} warm-up)\n`);
console.log(`Seeded in ${(seedMs / 1000).toFixed(1)} s, database ${(dbBytes / 1024 / 1024).toFixed(0)} MB${KEEP ? ` at ${dbPath}` : ""}. Bun ${Bun.version}, ${navigator.hardwareConcurrency} CPUs.\n`);
console.log("| case | rows | p50 ms | p95 ms | max ms | HTML bytes |");
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of results) console.log(`| ${r.name} | ${r.name.startsWith("detail") ? "1" : r.rows} | ${ms(r.p50)} | ${ms(r.p95)} | ${ms(r.max)} | ${r.bytes} |`);
console.log(
  `\nPage weight (first page): HTML ${(pageBytes / 1024).toFixed(1)} KB as sent (${(Bun.gzipSync(page).byteLength / 1024).toFixed(1)} KB if gzipped) + assets ${(assetBytes / 1024).toFixed(1)} KB gzipped = ${((pageBytes + assetBytes) / 1024).toFixed(1)} KB (goal < 200 KB).`,
);
console.log(`Assets: ${assetRows.join("; ")}.`);
const worst = Math.max(...results.map((r) => r.p95));
console.log(`\nWorst p95 ${ms(worst)} ms (goal < 200 ms): ${worst < 200 ? "met" : "NOT met"}.`);
