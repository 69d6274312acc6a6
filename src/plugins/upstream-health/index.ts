import { definePlugin } from "../../core/plugin.ts";
import { upstreamsDocs } from "../../openapi/upstreams.ts";
import { HealthKeeper, type Transition } from "./keeper.ts";
import { upstreamHealthConfigSchema } from "./schema.ts";
import { upstreamViews } from "./views.ts";
import type { RedisSync } from "./redis-sync.ts";

export { HealthKeeper } from "./keeper.ts";

declare module "../../core/plugin.ts" {
  interface Services {
    "upstream-health": HealthKeeper;
  }
}

/**
 * Each deployment's circuit breaker, Retry-After wait, in-flight count and latency; orders a provider's
 * deployments for the core's attempt loop (its `provides` is a DeploymentHealth). Shared among instances
 * through Redis when `redis_url` is set. GET /admin/v1/upstreams shows it all.
 */
export default definePlugin({
  name: "upstream-health",
  configSchema: upstreamHealthConfigSchema,
  async setup(config, host) {
    let sync: RedisSync | undefined;
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
      sync = new RedisSync(keeper, { url: config.redis_url, keyPrefix: config.redis_key_prefix, log: host.log, now: host.now });
      await sync.start();
    }
    host.log.info("upstream health", { strategy: config.strategy, shared: config.redis_url ? "redis" : "none" });
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
