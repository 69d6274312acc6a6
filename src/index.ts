import { ListenError, startGateway } from "./core/lifecycle.ts";
import { ConfigError, defaultConfigFile, loadConfig, workerCount } from "./core/config.ts";
import { createLogger, flushLogs } from "./core/log.ts";
import { startPrimary, WorkerStartError } from "./core/primary.ts";
import { workerIndex } from "./core/workers.ts";
import { listensEverywhere } from "./core/lifecycle.ts";

const log = createLogger("core");
// A stray rejection is a bug to fix, never a reason to drop every other client's request: it is logged at
// error level (tests look for this line) and the process keeps serving.
process.on("unhandledRejection", (reason) => {
  log.error("unhandled rejection", { error: String((reason as Error)?.stack ?? reason) });
});

try {
  const config = await loadConfig(defaultConfigFile(process.env), process.env);
  const workers = workerCount(config.server);
  if (workers > 1 && workerIndex(process.env) === null) await runPrimary(workers, config);
  else await runGateway();
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
async function runGateway(): Promise<void> {
  const gateway = await startGateway({ log });
  const everywhere = listensEverywhere(gateway.config.server.hostname);
  const where = everywhere ? { interfaces: "all (reachable from other machines)", local_url: gateway.url } : { url: gateway.url };
  if (gateway.worker) log.info("worker listening", { bind: gateway.bind, pid: process.pid });
  else log.info("gateway listening", { bind: gateway.bind, ...where, config: gateway.config.file, plugins: gateway.config.plugins.map((p) => p.definition.name) });
  let stopping = false;
  // Once: a worker gets Ctrl-C's SIGINT from the terminal and its primary's SIGTERM too.
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal });
    await gateway.stop();
    log.info("stopped");
    await flushLogs();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  // A worker whose primary died (kill -9) stops gracefully rather than serving on unsupervised.
  gateway.worker?.onPrimaryGone(() => void shutdown("primary gone"));
}

/** The primary of several workers (core/primary.ts): it serves nothing itself. */
async function runPrimary(workers: number, config: Awaited<ReturnType<typeof loadConfig>>): Promise<void> {
  const primary = await startPrimary(config, workers, { log, env: process.env, entry: import.meta.path });
  const hostname = config.server.hostname;
  const host = listensEverywhere(hostname) ? "127.0.0.1" : hostname.includes(":") ? `[${hostname}]` : hostname;
  log.info("gateway listening", {
    bind: `${hostname.includes(":") ? `[${hostname}]` : hostname}:${primary.port}`,
    ...(listensEverywhere(hostname) ? { interfaces: "all (reachable from other machines)", local_url: `http://${host}:${primary.port}` } : { url: `http://${host}:${primary.port}` }),
    config: config.file,
    workers,
    plugins: config.plugins.map((p) => p.definition.name),
  });
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal, workers });
    await primary.stop();
    log.info("stopped");
    await flushLogs();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
}
