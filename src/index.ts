import { hostPort, ListenError, listensEverywhere, localHost, startGateway } from "./core/lifecycle.ts";
import { ConfigError, defaultConfigFile, loadConfig, workerCount, type GatewayConfig } from "./core/config.ts";
import { createLogger, flushLogs } from "./core/log.ts";
import { startPrimary, WorkerStartError } from "./core/primary.ts";
import { workerIndex } from "./core/workers.ts";

const log = createLogger("core");
// A stray rejection is a bug to fix, never a reason to drop every other client's request: it is logged at
// error level (tests look for this line) and the process keeps serving.
process.on("unhandledRejection", (reason) => {
  log.error("unhandled rejection", { error: String((reason as Error)?.stack ?? reason) });
});

try {
  const config = await loadConfig(defaultConfigFile(process.env), process.env);
  const workers = workerCount(config.server);
  if (config.server.workers === "auto") log.info("workers: one per available CPU", { workers });
  if (workers > 1 && workerIndex(process.env) === null) await runPrimary(workers, config);
  else await runGateway(config);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`${error instanceof ListenError ? "start error" : "config error"}: ${error.message}`);
    process.exit(78);
  }
  if (error instanceof WorkerStartError) {
    console.error(`start error: ${error.message}`);
    process.exit(error.exitCode === 78 ? 78 : 1);
  }
  throw error;
}

/** One process serving the port, alone or as one worker of a primary. */
async function runGateway(config: GatewayConfig): Promise<void> {
  const gateway = await startGateway({ log, config });
  if (gateway.worker) log.info("worker listening", { bind: gateway.bind, pid: process.pid });
  else log.info("gateway listening", { ...whereListening(config.server.hostname, gateway.port), config: config.file, plugins: config.plugins.map((p) => p.definition.name) });
  const shutdown = stopOnSignals(() => gateway.stop());
  // A worker whose primary died (kill -9) stops gracefully rather than serving on unsupervised.
  gateway.worker?.onPrimaryGone(() => void shutdown("primary gone"));
}

/** The primary of several workers (core/primary.ts): it serves nothing itself. */
async function runPrimary(workers: number, config: GatewayConfig): Promise<void> {
  const primary = await startPrimary(config, workers, { log, env: process.env, entry: import.meta.path });
  log.info("gateway listening", {
    ...whereListening(config.server.hostname, primary.port),
    config: config.file,
    workers,
    plugins: config.plugins.map((p) => p.definition.name),
  });
  stopOnSignals(() => primary.stop(), { workers });
}

/** Where the gateway listens, for its "gateway listening" line: the bound address and a URL this machine reaches. */
function whereListening(hostname: string, port: number): Record<string, string> {
  const url = `http://${hostPort(localHost(hostname), port)}`;
  const reach: Record<string, string> = listensEverywhere(hostname) ? { interfaces: "all (reachable from other machines)", local_url: url } : { url };
  return { bind: hostPort(hostname, port), ...reach };
}

/**
 * Stops gracefully on SIGTERM or SIGINT, once (a worker gets Ctrl-C's SIGINT from the terminal and its primary's
 * SIGTERM too), waits until stdout has taken every line, exits 0. Returns the stop for other reasons.
 */
function stopOnSignals(stop: () => Promise<void>, fields: Record<string, unknown> = {}): (reason: string) => Promise<void> {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal, ...fields });
    await stop();
    log.info("stopped");
    await flushLogs();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  return shutdown;
}
