import type { Subprocess } from "bun";
import type { GatewayConfig } from "./config.ts";
import { writeStdout, type Logger } from "./log.ts";
import { probePort } from "./lifecycle.ts";
import { Replies, replyWith, WORKER_INDEX_ENV, WORKER_PORT_ENV, type ChannelMessage, type PrimaryHost, type PrimaryPart } from "./workers.ts";

/** A worker that dies this soon after its start counts as a crash loop: the next restart waits longer. */
const HEALTHY_AFTER_MS = 10_000;
const MAX_RESTART_DELAY_MS = 30_000;

export interface RunningPrimary {
  /** Where the workers listen (the port chosen when the configured one is 0). */
  port: number;
  stop(): Promise<void>;
}

interface WorkerSlot {
  index: number;
  process: Subprocess | null;
  startedAt: number;
  restartDelayMs: number;
  ready: boolean;
  /** Its log lines being copied to stdout; settles once its output has ended and is written. */
  relay: Promise<void>;
  /** While the gateway starts: told when this worker listens, or dies first. */
  starting?: { listening(): void; died(code: number | null): void };
}

/**
 * The primary of `server.workers` = N > 1 (docs/workers.md): it serves no request. It checks the port is free,
 * sets up the plugins' `primary` parts (what the workers share), starts worker 0 (which migrates the store and
 * makes the admin token on a first start), then the others, all on the same port with SO_REUSEPORT: the kernel
 * spreads the connections. It restarts a worker that dies (with backoff when it keeps dying at start) and, on
 * stop, stops them all gracefully (each drains its requests). A worker whose primary is gone stops too.
 */
export async function startPrimary(config: GatewayConfig, count: number, options: { log: Logger; env: Record<string, string | undefined>; now?: () => number; entry: string }): Promise<RunningPrimary> {
  const { log, env } = options;
  // Port 0 (tests): the port the kernel chose, which every worker then binds.
  const port = probePort(config.server.hostname, config.server.port, config.file);
  const handlers = new Map<string, (payload: unknown, from: number) => unknown | Promise<unknown>>();
  const replies = new Replies();
  const slots: WorkerSlot[] = Array.from({ length: count }, (_, index) => ({ index, process: null, startedAt: 0, restartDelayMs: 1_000, ready: false, relay: Promise.resolve() }));
  let stopping = false;
  const exitHandlers: ((worker: number) => void)[] = [];

  const host: PrimaryHost = {
    env,
    log,
    now: options.now ?? Date.now,
    workers: count,
    serve(topic, handler) {
      handlers.set(topic, handler);
    },
    async askAll<T>(topic: string, payload: unknown, timeoutMs = 2_000): Promise<T[]> {
      const asked = slots.filter((slot) => slot.ready && slot.process).map((slot) => {
        const { id, promise } = replies.open(timeoutMs, `worker ${slot.index} "${topic}"`);
        send(slot, { t: "ask", id, topic, payload });
        return promise as Promise<T>;
      });
      const settled = await Promise.allSettled(asked);
      return settled.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
    },
    onWorkerExit(handler) {
      exitHandlers.push(handler);
    },
  };
  const parts: { name: string; part: PrimaryPart }[] = [];
  for (const { definition, config: pluginConfig } of config.plugins) {
    if (!definition.primary) continue;
    parts.push({ name: definition.name, part: await definition.primary(pluginConfig as never, { ...host, log: log.child(definition.name) }) });
  }

  function send(slot: WorkerSlot, message: ChannelMessage): void {
    try {
      slot.process?.send(message);
    } catch {
      // The worker is gone; its exit handler restarts it.
    }
  }

  function onMessage(slot: WorkerSlot, message: ChannelMessage): void {
    if (message.t === "call") {
      const handler = handlers.get(message.topic);
      replyWith((reply) => send(slot, reply), message.id, handler && (() => handler(message.payload, slot.index)), message.topic);
    } else if (message.t === "reply") replies.settle(message);
    else if (message.t === "pub") {
      for (const other of slots) if (other !== slot && other.ready) send(other, message);
    } else if (message.t === "ready") {
      slot.ready = true;
      slot.starting?.listening();
    }
  }

  /** A worker exited: during the start that fails the start; later it is restarted, with backoff while it keeps dying. */
  function onExit(slot: WorkerSlot, code: number | null): void {
    if (slot.starting) return slot.starting.died(code);
    if (stopping) return;
    const healthy = Date.now() - slot.startedAt >= HEALTHY_AFTER_MS;
    slot.restartDelayMs = healthy ? 1_000 : Math.min(slot.restartDelayMs * 2, MAX_RESTART_DELAY_MS);
    log.error("worker exited; restarting it", { worker: slot.index, exit_code: code, restart_in_ms: slot.restartDelayMs });
    setTimeout(() => {
      if (!stopping) spawn(slot);
    }, slot.restartDelayMs);
  }

  function spawn(slot: WorkerSlot): void {
    slot.ready = false;
    slot.startedAt = Date.now();
    slot.process = Bun.spawn([process.execPath, options.entry], {
      env: { ...workerEnv(env, count, port), [WORKER_INDEX_ENV]: String(slot.index) },
      // Its log lines come through the primary, whole: two processes writing one pipe cut each other's lines
      // once the pipe is full (a slow log collector).
      stdio: ["ignore", "pipe", "inherit"],
      ipc: (message) => onMessage(slot, message as ChannelMessage),
      // JSON, not structured clone: the messages are plain data (ids, counts, nano-USD), and a round trip costs
      // ~2.7 µs of CPU against ~9.7 µs (a budget hold is one per request: bench/RESULTS.md, issue 32).
      serialization: "json",
      onExit: (_, code) => {
        slot.process = null;
        slot.ready = false;
        for (const handler of exitHandlers) {
          try {
            handler(slot.index);
          } catch (error) {
            log.error("a worker-exit handler failed", { worker: slot.index, error: String(error) });
          }
        }
        onExit(slot, code);
      },
    });
    slot.relay = relayWholeLines(slot.process.stdout as ReadableStream<Uint8Array>);
  }

  /** Starts `slot` and resolves once it listens; rejects with its exit code when it dies first. */
  function startOne(slot: WorkerSlot): Promise<void> {
    return new Promise((resolve, reject) => {
      slot.starting = {
        listening: () => {
          slot.starting = undefined;
          resolve();
        },
        died: (code) => {
          slot.starting = undefined;
          reject(new WorkerStartError(slot.index, code));
        },
      };
      spawn(slot);
    });
  }

  try {
    // Worker 0 first: it migrates the store and makes the admin token; the others find both done.
    await startOne(slots[0]!);
    await Promise.all(slots.slice(1).map(startOne));
  } catch (error) {
    stopping = true;
    await stopAll();
    await closeParts();
    throw error;
  }

  async function stopAll(): Promise<void> {
    const exits = slots.filter((slot) => slot.process).map((slot) => {
      const child = slot.process!;
      child.kill("SIGTERM");
      return child.exited;
    });
    await Promise.all(exits);
    // Every line they wrote (their "stopped" lines last) is out before this process exits; a log reader that
    // stopped reading altogether cannot hold the stop for more than 30 s.
    await Promise.race([Promise.all(slots.map((slot) => slot.relay)), Bun.sleep(30_000)]);
  }

  async function closeParts(): Promise<void> {
    for (const { name, part } of parts.reverse()) {
      try {
        await part.close?.();
      } catch (error) {
        log.error("plugin close failed", { plugin: name, error: String(error) });
      }
    }
  }

  let stopped: Promise<void> | undefined;
  return {
    port,
    stop: () =>
      (stopped ??= (async () => {
        stopping = true;
        await stopAll();
        replies.failAll("stopping");
        await closeParts();
      })()),
  };
}

const NEWLINE = 10;

/**
 * Copies a worker's log output to this process's stdout in whole lines only, through the logger's one writer, so
 * that the lines of several workers (and the primary's own) never cut each other. Waits while stdout is full: the
 * worker's own writes then wait in the worker, as a single process's do.
 */
async function relayWholeLines(from: ReadableStream<Uint8Array>): Promise<void> {
  let rest: Uint8Array = new Uint8Array(0);
  try {
    for await (const chunk of from) {
      const end = chunk.lastIndexOf(NEWLINE) + 1;
      if (end === 0) {
        rest = joined(rest, chunk);
        continue;
      }
      await writeStdout(joined(rest, chunk.slice(0, end)));
      rest = chunk.slice(end);
    }
  } catch {
    // The worker is gone: what it wrote before is out; a cut last line follows below.
  }
  if (rest.length > 0) await writeStdout(joined(rest, new Uint8Array([NEWLINE])));
}

function joined(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** A worker died before it listened: the gateway does not start (its own lines say why). */
export class WorkerStartError extends Error {
  override name = "WorkerStartError";
  constructor(
    readonly worker: number,
    readonly exitCode: number | null,
  ) {
    super(`worker ${worker} exited with code ${exitCode} before it listened`);
  }
}

/**
 * What every worker runs with: the chosen port, and on SQLite budget holds in the primary (`primary`,
 * storage/sqlite/primary-holds.ts) unless SQLITE_HOLDS says `shared` (rows of the file). The Postgres pool is split so that N workers together
 * open what one process would (unless DATABASE_POOL_SIZE says otherwise).
 */
function workerEnv(env: Record<string, string | undefined>, count: number, port: number): Record<string, string | undefined> {
  return {
    ...env,
    [WORKER_PORT_ENV]: String(port),
    GATEWAY_WORKERS: String(count),
    SQLITE_HOLDS: workerHoldsMode(env),
    DATABASE_POOL_SIZE: env.DATABASE_POOL_SIZE || String(Math.max(4, Math.ceil(20 / count))),
  };
}


/**
 * Where the workers' SQLite budget holds live: in the primary unless SQLITE_HOLDS says otherwise (`shared`: rows of the
 * file; `process` is refused at start, one process's memory cannot serve several).
 */
export function workerHoldsMode(env: Record<string, string | undefined>): string {
  return env.SQLITE_HOLDS || "primary";
}
