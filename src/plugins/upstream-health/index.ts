import { definePlugin } from "../../core/plugin.ts";
import { upstreamsDocs } from "../../openapi/upstreams.ts";
import { HealthKeeper, type Transition } from "./keeper.ts";
import { upstreamHealthConfigSchema } from "./schema.ts";
import { upstreamViews } from "./views.ts";

/** Where this process's transitions go, and the others' come from: Redis (instances) or the primary (workers). */
interface TransitionSync {
  publish(transition: Transition): void;
  close(): Promise<void>;
}

/** The workers' channel (core/workers.ts): a transition made by one worker, applied by the others. */
const WORKERS_TOPIC = "upstream-health.transition";

export { HealthKeeper } from "./keeper.ts";

declare module "../../core/plugin.ts" {
  interface Services {
    "upstream-health": HealthKeeper;
  }
}

/**
 * Each deployment's circuit breaker, Retry-After wait, in-flight count and latency; orders a provider's
 * deployments for the core's attempt loop (its `provides` is a DeploymentHealth). Shared among instances
 * through Redis when `redis_url` is set, else among the workers of one gateway through the primary. GET
 * /admin/v1/upstreams shows it all.
 */
export default definePlugin({
  name: "upstream-health",
  configSchema: upstreamHealthConfigSchema,
  async setup(config, host) {
    let sync: TransitionSync | undefined;
    const keeper = new HealthKeeper({
      strategy: config.strategy,
      breaker: config.breaker,
      maxRetryAfterMs: config.max_retry_after_ms,
      now: host.now,
      onTransition: (transition: Transition) => sync?.publish(transition),
    });
    if (config.redis_url) {
      // ioredis is loaded only when health is shared.
      const { RedisSync } = await import("./redis-sync.ts");
      const redisSync = new RedisSync(keeper, { url: config.redis_url, keyPrefix: config.redis_key_prefix, log: host.log, now: host.now });
      sync = redisSync;
      await redisSync.start();
    } else if (host.workers) {
      const workers = host.workers;
      workers.subscribe(WORKERS_TOPIC, (payload) => {
        const transition = payload as Transition;
        if (typeof transition?.provider === "string" && typeof transition.deployment === "string") keeper.apply(transition);
      });
      sync = { publish: (transition) => workers.publish(WORKERS_TOPIC, transition), close: async () => {} };
    }
    host.log.info("upstream health", { strategy: config.strategy, shared: config.redis_url ? "redis" : host.workers ? "workers" : "none" });
    const adminEnabled = host.has("admin");

    return {
      provides: keeper,

      routes(app, gateway) {
        // Behind the admin plugin's guard (its onRequest covers every /admin/ path): without it, no route.
        if (!adminEnabled) return;
        app.get("/admin/v1/upstreams", () => ({ data: upstreamViews(gateway.upstreams, keeper, host.now()) }), { detail: upstreamsDocs });
      },

      close: () => sync?.close(),
    };
  },
});
