import { loadConfig, defaultConfigFile, ConfigError, type GatewayConfig } from "./config.ts";
import { createLogger, logAsWorker, type Logger } from "./log.ts";
import { Pipeline, type Stage } from "./pipeline.ts";
import { createApp } from "./app.ts";
import { startIdleMemoryRelease } from "./idle-memory.ts";
import { registerSecret } from "./secrets.ts";
import { unservedModels } from "./readiness.ts";
import type { PluginHost, Services } from "./plugin.ts";
import { connectToPrimary, WORKER_PORT_ENV, workerIndex, type WorkerLink } from "./workers.ts";

export interface RunningGateway {
  /** A URL this machine can reach the gateway at (127.0.0.1 when it listens on every interface). */
  url: string;
  /** Where it listens, as bound: `0.0.0.0:3000`, `[::]:3000`, `127.0.0.1:8080`. */
  bind: string;
  port: number;
  config: GatewayConfig;
  /** An enabled plugin's `provides`, as later plugins get it (tests drive a plugin through it: the USDT poller's pollOnce). */
  service<K extends keyof Services>(name: K): Services[K] | undefined;
  /** Graceful stop: no new connections, drain in-flight requests, close plugins (flush). */
  stop(): Promise<void>;
  /** This process is one of several workers (core/primary.ts): `onPrimaryGone` is told when its primary dies. */
  worker: (WorkerLink & { onPrimaryGone(handler: () => void): void }) | null;
}

/** Loads the configuration, sets plugins up in pipeline order and listens. */
export async function startGateway(
  options: { configFile?: string; config?: GatewayConfig; port?: number; log?: Logger; env?: Record<string, string | undefined>; now?: () => number } = {},
): Promise<RunningGateway> {
  const log = options.log ?? createLogger("core");
  const env = options.env ?? process.env;
  const config = options.config ?? (await loadConfig(options.configFile ?? defaultConfigFile(env), env));
  const now = options.now ?? Date.now;
  const index = workerIndex(env);
  const worker = index === null ? null : connectToPrimary(index, Number(env.GATEWAY_WORKERS) || 1);
  const port = worker ? Number(env[WORKER_PORT_ENV]) : (options.port ?? config.server.port);
  const hostname = config.server.hostname;
  // Before any plugin opens its database (or generates an admin token into it): a second gateway on the same
  // port stops here, having touched nothing. A worker's primary checked it; its siblings share the port.
  if (!worker) probePort(hostname, port, config.file);
  if (worker) logAsWorker(worker.index);
  const stages = await setupPlugins(config, env, now, log, worker);
  if (!worker || worker.index === 0) warnUnserved(stages, log); // once per host, not once per worker
  const pipeline = new Pipeline(stages, config.server, log, now);
  const app = createApp(stages, pipeline, config.server, log);
  try {
    // No SO_REUSEPORT (Elysia's default): a second gateway on a taken port must fail here, not share the
    // port and split the requests between two databases. Workers of one primary share it on purpose.
    app.listen({ port, hostname, idleTimeout: 0, reusePort: worker !== null });
  } catch (error) {
    await closePlugins(stages, log);
    throw listenError(config.file, hostname, port, error);
  }
  const server = app.server!;
  pipeline.attachServer(server);
  worker?.ready();
  const idleMemory = startIdleMemoryRelease(() => pipeline.received, config.server.idle_memory_release_ms);
  const boundPort = server.port ?? port;
  let stopping: Promise<void> | undefined;
  return {
    url: `http://${hostPort(localHost(hostname), boundPort)}`,
    bind: hostPort(hostname, boundPort),
    port: boundPort,
    config,
    service: (name) => stages.find((stage) => stage.name === name)?.instance.provides as never,
    stop: () => (stopping ??= drainAndClose()),
    worker,
  };

  async function drainAndClose() {
    idleMemory.stop();
    server.stop(false);
    const deadline = Date.now() + config.server.drain_timeout_ms;
    while (pipeline.inFlight > 0 && Date.now() < deadline) await Bun.sleep(10);
    if (pipeline.inFlight > 0) log.warn("drain timeout: requests still in flight", { in_flight: pipeline.inFlight });
    await closePlugins(stages, log);
    server.stop(true);
  }
}

/** The port was taken (or the address is not local): the gateway does not start. */
export class ListenError extends ConfigError {
  override name = "ListenError";
}

function listenError(file: string, hostname: string, port: number, error: unknown): ListenError {
  const detail = String((error as Error)?.message ?? error).split("\n")[0];
  return new ListenError(
    `${file}: cannot listen on ${hostPort(hostname, port)}: the port is taken (another gateway, or another program, listens there) or the address is not this machine's; stop it or set server.port / PORT (${detail})`,
    { cause: error },
  );
}

/** Binds the port for a moment and lets it go: fails with a ListenError when it is taken. Returns the port bound (port 0: a free one). */
export function probePort(hostname: string, port: number, file: string): number {
  try {
    const probe = Bun.serve({ hostname, port, reusePort: false, fetch: () => new Response(null, { status: 503 }) });
    const bound = probe.port ?? port;
    probe.stop(true);
    return bound;
  } catch (error) {
    throw listenError(file, hostname, port, error);
  }
}

/** `host:port`, brackets around an IPv6 host. */
export function hostPort(hostname: string, port: number): string {
  return hostname.includes(":") ? `[${hostname}]:${port}` : `${hostname}:${port}`;
}

/** A host this machine reaches a listener on `hostname` at: loopback for the any-address. */
export function localHost(hostname: string): string {
  if (hostname === "0.0.0.0") return "127.0.0.1";
  if (hostname === "::" || hostname === "[::]") return "::1";
  return hostname;
}

/** Whether `hostname` is an any-address: every interface of the machine. */
export function listensEverywhere(hostname: string): boolean {
  return hostname === "0.0.0.0" || hostname === "::" || hostname === "[::]";
}

/** One warning per provider that cannot serve (no key), with how many models that leaves unserved and a few ids. */
function warnUnserved(stages: Stage[], log: Logger): void {
  for (const [provider, { reason, models }] of Object.entries(unservedModels(stages))) {
    log.warn("provider cannot serve: its models are unserved (GET /ready lists them)", {
      provider,
      reason,
      unserved_models: models.length,
      examples: models.slice(0, 3),
    });
  }
}

/** Closes plugins in reverse pipeline order; a failing close is logged, never stops the others. */
async function closePlugins(stages: Stage[], log: Logger): Promise<void> {
  for (const { name, instance } of [...stages].reverse()) {
    try {
      await instance.close?.();
    } catch (error) {
      log.error("plugin close failed", { plugin: name, error: String(error) });
    }
  }
}

async function setupPlugins(config: GatewayConfig, env: Record<string, string | undefined>, now: () => number, log: Logger, workers: WorkerLink | null): Promise<Stage[]> {
  const stages: Stage[] = [];
  const provided = new Map<string, unknown>();
  const host: PluginHost = {
    configFile: config.file,
    env,
    now,
    log,
    has: (name) => config.plugins.some((plugin) => plugin.definition.name === name),
    secret: registerSecret,
    workers,
    service<K extends keyof Services>(name: K): Services[K] {
      if (!provided.has(name as string)) throw new Error(`plugin "${String(name)}" is not enabled before this plugin, or provides nothing`);
      return provided.get(name as string) as Services[K];
    },
  };
  for (const { definition, config: pluginConfig } of config.plugins) {
    let instance: Stage["instance"];
    try {
      instance = await definition.setup(pluginConfig as never, { ...host, log: log.child(definition.name) });
    } catch (error) {
      // A plugin that cannot start (bad database_url, missing catalog file ...): close the ones already
      // set up, and report it like a configuration error, on one line naming the file and the plugin.
      await closePlugins(stages, log);
      const message = String((error as Error)?.message ?? error).split("\n")[0];
      throw new ConfigError(`${config.file}: plugin "${definition.name}": setup failed: ${message}`, { cause: error });
    }
    if (instance.provides !== undefined) provided.set(definition.name, instance.provides);
    stages.push({ name: definition.name, instance });
  }
  return stages;
}
