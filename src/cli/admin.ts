/**
 * Operator CLI over the admin API: `npm run admin -- <verb> ...`.
 * Reads GATEWAY_URL (default http://127.0.0.1:$PORT or :3000) and GATEWAY_ADMIN_TOKEN.
 */
import { parseArgs } from "node:util";

const USAGE = `usage: npm run admin -- <command>

  account create <name>
  account list [--limit N] [--before CURSOR] [--q TEXT]
  account show <account_id>
  credit <account_id> <amount_usd> <card|usdt|bonus|voucher|promotional> <reference>
  key create <account_id> <name> [--limit USD] [--models id,id] [--rpm N] [--tpm N] [--expires 2030-01-31T12:00:00Z | 2030-01-31]
  key list <account_id> [--limit N] [--before CURSOR]
  key delete <key_id>
  requests <account_id> [--limit N] [--before CURSOR]
  user create <account_id> <email> [--role owner|member]
  user list <account_id>
  payments reconcile --since <2030-01-31T00:00:00Z | 2030-01-31 | epoch ms>
  payments unmatched [--limit N] [--before CURSOR]
  payments unblock <account_id>

  A credit's reference is its idempotency key (a payment id, an invoice number): the same reference
  credits once, so running the same command again is safe. Lists print next_before: pass it as --before.

  user create reads the password (10 to 256 characters) from GATEWAY_USER_PASSWORD or, when that is not
  set, from the first line of stdin: never from the command line, so it lands in no shell history or ps.
    printf '%s\n' "$PASSWORD" | npm run admin -- user create acct_... alice@example.com

  payments reconcile compares each payment processor's own records since --since with the gateway's
  credits, prints the report and exits 1 when there is any difference (paid_not_credited, credited_not_paid,
  amount_differs, returned_not_taken_back). payments unmatched lists the transfers that matched no top-up.

environment: GATEWAY_URL (default http://127.0.0.1:3000), GATEWAY_ADMIN_TOKEN (required),
  GATEWAY_USER_PASSWORD (user create)`;

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  options: {
    limit: { type: "string" },
    models: { type: "string" },
    rpm: { type: "string" },
    tpm: { type: "string" },
    expires: { type: "string" },
    before: { type: "string" },
    q: { type: "string" },
    role: { type: "string" },
    since: { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});

const baseUrl = (process.env.GATEWAY_URL ?? `http://127.0.0.1:${process.env.PORT ?? 3000}`).replace(/\/+$/, "");
const token = process.env.GATEWAY_ADMIN_TOKEN;

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

async function call(method: string, path: string, body?: unknown): Promise<any> {
  if (!token) fail("GATEWAY_ADMIN_TOKEN is not set (the gateway printed one on its first start)");
  const response = await fetch(baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  }).catch((error) => fail(`cannot reach ${baseUrl}: ${error.message}`));
  const text = await response.text();
  const json = text ? JSON.parse(text) : undefined;
  console.log(text && JSON.stringify(json, null, 2));
  if (!response.ok) process.exit(1);
  return json;
}

/** `?limit=…&before=…&q=…` of the options given (the gateway checks them). */
function listQuery(names: readonly ("limit" | "before" | "q" | "since")[]): string {
  const query = new URLSearchParams();
  for (const name of names) {
    const value = values[name];
    if (value !== undefined) query.set(name, value);
  }
  return query.size ? "?" + query : "";
}

function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!Number.isFinite(parsed)) fail(`--${name} must be a number`);
  return parsed;
}

/**
 * The new user's password: GATEWAY_USER_PASSWORD, else the first line of stdin (a terminal is prompted,
 * on stderr). Never an argument: it would land in the shell's history and in `ps`.
 */
async function readPassword(): Promise<string> {
  const fromEnv = process.env.GATEWAY_USER_PASSWORD;
  if (fromEnv) return fromEnv;
  if (process.stdin.isTTY) process.stderr.write("password (10 to 256 characters), then Enter: ");
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of Bun.stdin.stream()) {
    text += decoder.decode(chunk, { stream: true });
    if (text.includes("\n")) break;
  }
  const line = text.split("\n")[0]!.replace(/\r$/, "");
  if (!line) fail("user create needs a password: set GATEWAY_USER_PASSWORD or give it as the first line of stdin");
  return line;
}

const [command, sub, ...rest] = positionals;
if (values.help || !command) fail(USAGE);

switch (`${command} ${command === "credit" || command === "requests" ? "" : sub ?? ""}`.trim()) {
  case "account create":
    if (!rest[0]) fail(USAGE);
    await call("POST", "/admin/v1/accounts", { name: rest.join(" ") });
    break;
  case "account list":
    if (rest.length > 0) fail(USAGE);
    await call("GET", "/admin/v1/accounts" + listQuery(["limit", "before", "q"]));
    break;
  case "account show":
    if (!rest[0]) fail(USAGE);
    await call("GET", `/admin/v1/accounts/${encodeURIComponent(rest[0])}`);
    break;
  case "credit": {
    const [amount, kind, reference, ...extra] = rest;
    if (!sub || !amount || !kind || extra.length > 0) fail(USAGE);
    // No made-up reference: a retry after a timeout would then credit twice.
    if (!reference) {
      fail(
        "credit needs a <reference>: the credit's idempotency key (a payment id, an invoice number). The same reference credits once, so a retry is safe.\n" +
          `  e.g. npm run admin -- credit ${sub} ${amount} ${kind} invoice-2030-0042\n\n${USAGE}`,
      );
    }
    await call("POST", `/admin/v1/accounts/${encodeURIComponent(sub)}/credits`, { amount, kind, reference });
    break;
  }
  case "key create": {
    const [accountId, ...name] = rest;
    if (!accountId || name.length === 0) fail(USAGE);
    const rpm = numberOption("rpm", values.rpm);
    const tpm = numberOption("tpm", values.tpm);
    await call("POST", `/admin/v1/accounts/${encodeURIComponent(accountId)}/keys`, {
      name: name.join(" "),
      limit: numberOption("limit", values.limit),
      models: values.models ? values.models.split(",").map((id) => id.trim()) : undefined,
      rate_limit: rpm || tpm ? { requests_per_minute: rpm ?? null, tokens_per_minute: tpm ?? null } : undefined,
      expires_at: values.expires,
    });
    break;
  }
  case "key list":
    if (!rest[0] || rest.length > 1) fail(USAGE);
    await call("GET", `/admin/v1/accounts/${encodeURIComponent(rest[0])}/keys` + listQuery(["limit", "before"]));
    break;
  case "key delete":
    if (!rest[0]) fail(USAGE);
    await call("DELETE", `/admin/v1/keys/${encodeURIComponent(rest[0])}`);
    break;
  case "requests": {
    if (!sub) fail(USAGE);
    await call("GET", `/admin/v1/accounts/${encodeURIComponent(sub)}/requests` + listQuery(["limit", "before"]));
    break;
  }
  case "user create": {
    const [accountId, email, ...extra] = rest;
    if (!accountId || !email || extra.length > 0) fail(USAGE);
    if (values.role !== undefined && values.role !== "owner" && values.role !== "member") fail("--role must be owner or member");
    const password = await readPassword();
    await call("POST", `/admin/v1/accounts/${encodeURIComponent(accountId)}/users`, { email, password, role: values.role });
    break;
  }
  case "user list":
    if (!rest[0] || rest.length > 1) fail(USAGE);
    await call("GET", `/admin/v1/accounts/${encodeURIComponent(rest[0])}/users`);
    break;
  case "payments reconcile": {
    if (rest.length > 0 || !values.since) fail(`payments reconcile needs --since (an RFC 3339 time, a UTC day or epoch ms)\n\n${USAGE}`);
    const report = await call("GET", "/admin/v1/payments/reconcile" + listQuery(["since"]));
    const differences = (report?.data?.processors ?? []).flatMap((processor: { name: string; differences: unknown[] }) => processor.differences);
    if (differences.length > 0) {
      console.error(`${differences.length} difference${differences.length === 1 ? "" : "s"} between the processors' records and the gateway's credits`);
      process.exit(1);
    }
    break;
  }
  case "payments unmatched":
    if (rest.length > 0) fail(USAGE);
    await call("GET", "/admin/v1/payments/unmatched" + listQuery(["limit", "before"]));
    break;
  case "payments unblock":
    if (!rest[0] || rest.length > 1) fail(USAGE);
    await call("POST", `/admin/v1/accounts/${encodeURIComponent(rest[0])}/unblock`);
    break;
  default:
    fail(USAGE);
}
