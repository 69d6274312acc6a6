/**
 * Several worker processes on one port (`server.workers` / GATEWAY_WORKERS, docs/workers.md): the messages
 * between the primary (core/primary.ts, which serves nothing itself) and its workers, and what a plugin
 * sees of them. Messages travel over Bun's IPC channel (`Bun.spawn({ ipc })` / `process.send`) as JSON: a payload
 * is plain data (no Map, Date, undefined member or non-finite number).
 *
 * - `call`: a worker asks the primary; a plugin's `primary` part answers (rate-limit windows shared by the
 *   workers, the metrics of all of them).
 * - `publish`: a worker tells every other worker (a revoked key's cache entry).
 * - `ask`: the primary asks every worker and gathers the answers (each worker's metrics).
 */

/** What a plugin sees of the other workers; `host.workers` is null in a gateway of one process. */
export interface WorkerLink {
  /** 0 … count−1, kept across restarts. Worker 0 is the leader: it alone runs the once-per-host duties (pollers, sweeps). */
  readonly index: number;
  readonly count: number;
  /** Asks the primary (a plugin's `primary` part answers `topic`); rejects when no answer comes within `timeoutMs` (default 2 s) or the primary is gone. */
  call<T = unknown>(topic: string, payload: unknown, timeoutMs?: number): Promise<T>;
  /** Tells every other worker (their `subscribe` handlers for `topic`); fire and forget. */
  publish(topic: string, payload: unknown): void;
  subscribe(topic: string, handler: (payload: unknown) => void): void;
  /** Answers the primary's `askAll(topic)` (e.g. this worker's metrics). */
  answer(topic: string, handler: (payload: unknown) => unknown | Promise<unknown>): void;
}

/** Whether this process runs the once-per-host duties (pollers, sweeps): a gateway of one process, or worker 0. */
export function runsHostDuties(workers: WorkerLink | null): boolean {
  return workers === null || workers.index === 0;
}

/** What a plugin's `primary` part gets in the primary process. */
export interface PrimaryHost {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly log: import("./log.ts").Logger;
  readonly now: () => number;
  readonly workers: number;
  /** Answers the workers' `call(topic)`; `from` is the asking worker's index. */
  serve(topic: string, handler: (payload: unknown, from: number) => unknown | Promise<unknown>): void;
  /** Asks every live worker (their `answer(topic)`), gathers the answers that come within `timeoutMs` (default 2 s). */
  askAll<T = unknown>(topic: string, payload: unknown, timeoutMs?: number): Promise<T[]>;
  /** Told when a worker exits (a crash, a stop), with its index, before it is started again. */
  onWorkerExit(handler: (worker: number) => void): void;
}

/** What a plugin's `primary` part returns. */
export interface PrimaryPart {
  close?(): void | Promise<void>;
}

/** The messages on the channel, both ways. */
export type ChannelMessage =
  | { t: "ready" }
  | { t: "call"; id: number; topic: string; payload: unknown }
  | { t: "ask"; id: number; topic: string; payload: unknown }
  | { t: "reply"; id: number; ok: true; value: unknown }
  | { t: "reply"; id: number; ok: false; error: string }
  | { t: "pub"; topic: string; payload: unknown };

/** The environment variables the primary gives each worker: its index, and the port every worker binds. */
export const WORKER_INDEX_ENV = "GATEWAY_WORKER_INDEX";
export const WORKER_PORT_ENV = "GATEWAY_WORKER_PORT";

const DEFAULT_TIMEOUT_MS = 2_000;

/** This process is a worker of a primary: its index, else null. */
export function workerIndex(env: Readonly<Record<string, string | undefined>>): number | null {
  const raw = env[WORKER_INDEX_ENV];
  if (raw === undefined || raw === "" || typeof process.send !== "function") return null;
  const index = Number(raw);
  return Number.isInteger(index) && index >= 0 ? index : null;
}

/** Waiting replies, by id: shared by the worker's calls and the primary's asks. */
export class Replies {
  private next = 1;
  private readonly waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void; timer: ReturnType<typeof setTimeout> }>();

  open(timeoutMs: number, what: string): { id: number; promise: Promise<unknown> } {
    const id = this.next++;
    const promise = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${what}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, { resolve, reject, timer });
    });
    return { id, promise };
  }

  settle(message: Extract<ChannelMessage, { t: "reply" }>): void {
    const entry = this.waiting.get(message.id);
    if (!entry) return;
    this.waiting.delete(message.id);
    clearTimeout(entry.timer);
    if (message.ok) entry.resolve(message.value);
    else entry.reject(new Error(message.error));
  }

  fail(id: number, reason: string): void {
    const entry = this.waiting.get(id);
    if (!entry) return;
    this.waiting.delete(id);
    clearTimeout(entry.timer);
    entry.reject(new Error(reason));
  }

  failAll(reason: string): void {
    for (const id of [...this.waiting.keys()]) this.fail(id, reason);
  }
}

/** Runs `handler` and sends its value (or its error's message) back as the reply to `id`. */
export function replyWith(send: (message: ChannelMessage) => void, id: number, handler: (() => unknown) | undefined, topic: string): void {
  if (!handler) {
    send({ t: "reply", id, ok: false, error: `nothing answers "${topic}"` });
    return;
  }
  const failed = (error: unknown) => send({ t: "reply", id, ok: false, error: String((error as Error)?.message ?? error) });
  try {
    const value = handler();
    if (value instanceof Promise) value.then((resolved) => send({ t: "reply", id, ok: true, value: resolved }), failed);
    else send({ t: "reply", id, ok: true, value });
  } catch (error) {
    failed(error);
  }
}

/** The worker's side of the channel (this process was spawned by a primary with an IPC channel). */
export function connectToPrimary(index: number, count: number): WorkerLink & { ready(): void; onPrimaryGone(handler: () => void): void } {
  const replies = new Replies();
  const subscribers = new Map<string, ((payload: unknown) => void)[]>();
  const answers = new Map<string, (payload: unknown) => unknown | Promise<unknown>>();
  let gone = false;
  const send = (message: ChannelMessage) => {
    if (gone) return;
    try {
      process.send!(message);
    } catch {
      // The channel closed under us: the disconnect handler stops this worker.
    }
  };

  process.on("message", (message: ChannelMessage) => {
    if (message.t === "reply") replies.settle(message);
    else if (message.t === "pub") {
      for (const handler of subscribers.get(message.topic) ?? []) handler(message.payload);
    } else if (message.t === "ask") {
      const handler = answers.get(message.topic);
      replyWith(send, message.id, handler && (() => handler(message.payload)), message.topic);
    }
  });
  const goneHandlers: (() => void)[] = [];
  process.on("disconnect", () => {
    gone = true;
    replies.failAll("the primary process is gone");
    for (const handler of goneHandlers) handler();
  });

  return {
    index,
    count,
    call<T>(topic: string, payload: unknown, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<T> {
      if (gone) return Promise.reject(new Error("the primary process is gone"));
      const { id, promise } = replies.open(timeoutMs, `primary "${topic}"`);
      send({ t: "call", id, topic, payload });
      return promise as Promise<T>;
    },
    publish(topic, payload) {
      send({ t: "pub", topic, payload });
    },
    subscribe(topic, handler) {
      subscribers.set(topic, [...(subscribers.get(topic) ?? []), handler]);
    },
    answer(topic, handler) {
      answers.set(topic, handler);
    },
    ready() {
      send({ t: "ready" });
    },
    onPrimaryGone(handler) {
      goneHandlers.push(handler);
    },
  };
}
