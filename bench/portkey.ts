/**
 * `--vs portkey`: Portkey's open-source gateway (Node + Hono) as another target of the nonstream and stream cases.
 *
 * Installed on demand, never as a project dependency: `npm install` into bench/.portkey/ (git-ignored), with
 * `@hono/node-server` pinned to 1.14.1 (Portkey's streaming fails with `TypeError: immutable` on later ones),
 * forced by an npm override so that no other copy is resolved. Started as
 * `node bench/.portkey/node_modules/@portkey-ai/gateway/build/start-server.js --port=N --headless` and called with
 * `x-portkey-provider: openai` and `x-portkey-custom-host: <fake upstream>/v1`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { ROOT, UPSTREAM_KEY, children, freePort, log, spawnChild, waitReady, type Child, type Target } from "./lib.ts";

export const PORTKEY_DIR = join(ROOT, "bench", ".portkey");
/** Portkey's streaming needs exactly this @hono/node-server (1.14.2+ fail with `TypeError: immutable`). */
export const NODE_SERVER_VERSION = "1.14.1";
const GATEWAY_SPEC = "^1.15.2";
const ENTRY = join(PORTKEY_DIR, "node_modules", "@portkey-ai", "gateway", "build", "start-server.js");
const INSTALL_TIMEOUT_MS = 300_000;

export interface PortkeyInstall {
  node: string;
  nodeVersion: string;
  entry: string;
  version: string;
  nodeServerVersion: string;
  installedNow: boolean;
}

function versionOf(packageJson: string): string | null {
  try {
    return JSON.parse(readFileSync(packageJson, "utf8")).version ?? null;
  } catch {
    return null;
  }
}

/** What is wrong with the installation in bench/.portkey, or null when it is usable. */
function installProblem(): string | null {
  if (!existsSync(ENTRY)) return `${ENTRY} is missing`;
  const top = versionOf(join(PORTKEY_DIR, "node_modules", "@hono", "node-server", "package.json"));
  if (top !== NODE_SERVER_VERSION) return `@hono/node-server is ${top ?? "missing"}, not ${NODE_SERVER_VERSION}`;
  // A nested copy next to the gateway would be the one it resolves.
  const nested = versionOf(join(PORTKEY_DIR, "node_modules", "@portkey-ai", "gateway", "node_modules", "@hono", "node-server", "package.json"));
  if (nested !== null && nested !== NODE_SERVER_VERSION) return `the gateway has its own @hono/node-server ${nested}`;
  return null;
}

async function run(cmd: string[], cwd: string, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  const proc = Bun.spawn({ cmd, cwd, env: process.env as Record<string, string>, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const child: Child = { name: cmd.slice(0, 2).join(" "), proc: proc as Subprocess<"ignore", "pipe", "pipe">, url: "", output: () => "" };
  children.add(child);
  const stdout = new Response(proc.stdout).text();
  const stderr = new Response(proc.stderr).text();
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const code = await proc.exited;
  clearTimeout(timer);
  children.delete(child);
  return { code: proc.signalCode ? null : code, output: `${await stdout}\n${await stderr}`.trim() };
}

/** Installs Portkey's gateway into bench/.portkey/ when it is not there yet; `{skipped}` says why it cannot run. */
export async function ensurePortkey(): Promise<PortkeyInstall | { skipped: string }> {
  const node = Bun.which("node");
  if (!node) return { skipped: "node is not on PATH (Portkey's gateway is a Node server)" };
  let installedNow = false;
  const problem = installProblem();
  if (problem !== null) {
    const npm = Bun.which("npm");
    if (!npm) return { skipped: `Portkey's gateway is not installed (${problem}) and npm is not on PATH` };
    mkdirSync(PORTKEY_DIR, { recursive: true });
    writeFileSync(
      join(PORTKEY_DIR, "package.json"),
      JSON.stringify(
        {
          name: "bench-portkey",
          private: true,
          description: "Portkey's open-source gateway for `npm run bench -- --vs portkey`; installed on demand by bench/portkey.ts (git-ignored).",
          dependencies: { "@portkey-ai/gateway": GATEWAY_SPEC, "@hono/node-server": NODE_SERVER_VERSION },
          overrides: { "@hono/node-server": NODE_SERVER_VERSION },
        },
        null,
        2,
      ) + "\n",
    );
    log(`installing Portkey's gateway into bench/.portkey/ (${problem}): npm install @portkey-ai/gateway@${GATEWAY_SPEC} @hono/node-server@${NODE_SERVER_VERSION}`);
    const started = performance.now();
    // --ignore-scripts: the package's only install script is `patch-package`, and it ships no patches.
    const result = await run([npm, "install", "--prefix", PORTKEY_DIR, "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"], PORTKEY_DIR, INSTALL_TIMEOUT_MS);
    if (result.code !== 0) {
      const tail = result.output.split("\n").filter((l) => !/Unknown user config/.test(l)).slice(-15).join("\n");
      return { skipped: `npm install into bench/.portkey/ failed (${result.code === null ? `no answer in ${INSTALL_TIMEOUT_MS / 1000} s` : `exit ${result.code}`}):\n${tail}` };
    }
    log(`installed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    installedNow = true;
    const after = installProblem();
    if (after !== null) return { skipped: `Portkey's gateway is not usable after npm install: ${after}` };
  }
  const nodeVersion = (await run([node, "--version"], ROOT, 10_000)).output.trim();
  return {
    node,
    nodeVersion,
    entry: ENTRY,
    version: versionOf(join(PORTKEY_DIR, "node_modules", "@portkey-ai", "gateway", "package.json")) ?? "?",
    nodeServerVersion: NODE_SERVER_VERSION,
    installedNow,
  };
}

export async function startPortkey(install: PortkeyInstall): Promise<Child> {
  const port = freePort();
  const child = spawnChild(
    "portkey",
    [install.node, install.entry, `--port=${port}`, "--headless"],
    { ...process.env, NODE_ENV: "production" },
    `http://127.0.0.1:${port}`,
  );
  await waitReady(child, "/", true); // "AI Gateway says hey!"
  return child;
}

/** Portkey pointed at the fake upstream as an OpenAI-compatible provider. */
export function portkeyTarget(portkey: Child, upstreamUrl: string): Target {
  return {
    name: "portkey",
    url: portkey.url,
    pid: portkey.proc.pid,
    key: UPSTREAM_KEY,
    headers: {
      authorization: `Bearer ${UPSTREAM_KEY}`,
      "content-type": "application/json",
      "x-portkey-provider": "openai",
      "x-portkey-custom-host": `${upstreamUrl}/v1`,
    },
  };
}
