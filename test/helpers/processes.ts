import type { Subprocess } from "bun";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

/** A port nobody listens on right now (for a gateway process the test spawns). */
export function freePort(): number {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

/** Polls `condition` every `stepMs` until it holds, then resolves with the time it took; throws naming `what` after `timeoutMs`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs: number, what: string, stepMs = 5): Promise<number> {
  const started = performance.now();
  const deadline = started + timeoutMs;
  while (performance.now() < deadline) {
    if (await condition()) return performance.now() - started;
    await Bun.sleep(stepMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

const ROOT = resolve(import.meta.dir, "../..");
const BUN = join(ROOT, "node_modules/.bin/bun");

/** A child's output as it comes (`text()`) and whole once it has ended (`all`). */
export interface GatheredOutput {
  text(): string;
  all: Promise<string>;
}

function gather(stream: ReadableStream<Uint8Array>): GatheredOutput {
  let text = "";
  const all = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of stream) text += decoder.decode(chunk, { stream: true });
    } catch {}
    return text;
  })();
  return { text: () => text, all };
}

/** A gateway process (`bun src/index.ts`) the test started. */
export interface GatewayChild {
  url: string;
  child: Subprocess<"ignore", "pipe", "pipe">;
  stdout: GatheredOutput;
  stderr: GatheredOutput;
}

/**
 * Starts `bun src/index.ts` from the repository on 127.0.0.1 (a free port unless `env.PORT` names one) with
 * the edge limit off and only PATH and HOME of this environment: every other setting comes from `env`.
 */
export function spawnGatewayChild(env: Record<string, string>): GatewayChild {
  const port = env.PORT ?? String(freePort());
  const child = Bun.spawn([BUN, "src/index.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? tmpdir(), HOST: "127.0.0.1", EDGE_RATE_LIMIT_RPS: "0", ...env, PORT: port },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  return { url: `http://127.0.0.1:${port}`, child, stdout: gather(child.stdout), stderr: gather(child.stderr) };
}

/** Waits until the gateway answers GET /ready with 200; throws with its output when it exits first. */
export async function untilReady(gateway: GatewayChild, timeoutMs = 20_000, name = "gateway"): Promise<void> {
  const { child, url } = gateway;
  await waitFor(
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${name} exited early (${child.exitCode ?? child.signalCode}):\n${gateway.stdout.text()}${gateway.stderr.text()}`);
      }
      return fetch(`${url}/ready`).then((response) => response.status === 200, () => false);
    },
    timeoutMs,
    `${name} GET ${url}/ready`,
  );
}
