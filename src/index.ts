import { ListenError, listensEverywhere, startGateway } from "./core/lifecycle.ts";
import { ConfigError } from "./core/config.ts";
import { createLogger } from "./core/log.ts";

const log = createLogger("core");
// A stray rejection is a bug to fix, never a reason to drop every other client's request: it is logged at
// error level (tests look for this line) and the process keeps serving.
process.on("unhandledRejection", (reason) => {
  log.error("unhandled rejection", { error: String((reason as Error)?.stack ?? reason) });
});
try {
  const gateway = await startGateway({ log });
  const everywhere = listensEverywhere(gateway.config.server.hostname);
  log.info("gateway listening", {
    bind: gateway.bind,
    ...(everywhere ? { interfaces: "all (reachable from other machines)", local_url: gateway.url } : { url: gateway.url }),
    config: gateway.config.file,
    plugins: gateway.config.plugins.map((p) => p.definition.name),
  });
  const shutdown = async (signal: string) => {
    log.info("stopping", { signal });
    await gateway.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`${error instanceof ListenError ? "start error" : "config error"}: ${error.message}`);
    process.exit(78);
  }
  throw error;
}
