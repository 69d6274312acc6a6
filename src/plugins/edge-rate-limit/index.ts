import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { RateLimitError } from "../../core/errors.ts";
import { createSecondWindowCounter } from "../../core/window-counter.ts";
import { IPV6_CLIENT_PREFIX, addressGroup } from "../../core/client-ip.ts";
import { createSharedEdgeCounter, serveEdgeCounts } from "./shared-counts.ts";

/** What the plugin offers later ones (the metrics plugin counts its refusals). */
export interface EdgeRefusals {
  /** `listener` is told of every request this limit refuses; returns its removal. */
  onRefused(listener: () => void): () => void;
}

declare module "../../core/plugin.ts" {
  interface Services {
    "edge-rate-limit": EdgeRefusals;
  }
}

/**
 * Requests per second per client address on every endpoint, before anything else runs (fixed one-second
 * windows). The address is the gateway's client address: the socket peer, or behind a trusted proxy the
 * forwarded one (`server.trusted_proxies`); an IPv6 client counts with its network (`ipv6_prefix`). Several workers
 * share one count, kept by the primary (shared-counts.ts).
 */
export default definePlugin({
  name: "edge-rate-limit",
  configSchema: Type.Object({
    /** 0 turns the limit off. */
    requests_per_second: Type.Integer({ minimum: 0, default: 60 }),
    /**
     * The IPv6 addresses counted as one client: the first this many bits. 56 by default, as express-rate-limit
     * (`ipv6Subnet`): a subscriber's network is a /56 or a /64. 128 counts each address.
     */
    ipv6_prefix: Type.Integer({ minimum: 32, maximum: 128, default: IPV6_CLIENT_PREFIX }),
  }),
  setup(config, host) {
    const limit = config.requests_per_second;
    const clientOf = (gateway: { clientIp(request: Request): string }, request: Request) =>
      addressGroup(gateway.clientIp(request), config.ipv6_prefix);
    const withinLimit = createSecondWindowCounter(limit);
    const listeners: (() => void)[] = [];
    const refusal = () => {
      for (const listener of listeners) listener();
      // Thrown, not returned: the app maps it and writes the request line.
      return new RateLimitError(`edge rate limit: at most ${limit} requests per second per client address; retry after a second`, {
        headers: { "retry-after": "1" },
      });
    };
    let unreachableLoggedAt = 0;
    const shared =
      host.workers && limit > 0
        ? createSharedEdgeCounter(host.workers, limit, {
            fallback: withinLimit,
            onUnreachable: (error) => {
              if (Date.now() - unreachableLoggedAt < 60_000) return;
              unreachableLoggedAt = Date.now();
              host.log.warn("edge rate limit: the primary did not answer; this worker counts alone meanwhile", { error: String(error) });
            },
          })
        : null;
    const refusals: EdgeRefusals = {
      onRefused(listener) {
        listeners.push(listener);
        return () => {
          const index = listeners.indexOf(listener);
          if (index >= 0) listeners.splice(index, 1);
        };
      },
    };
    return {
      provides: refusals,
      routes(app, gateway) {
        if (limit === 0) return;
        if (shared === null) {
          app.onRequest(function edgeRateLimit({ request }) {
            if (!withinLimit(clientOf(gateway, request))) throw refusal();
          });
          return;
        }
        app.onRequest(async function sharedEdgeRateLimit({ request }) {
          const admitted = shared(clientOf(gateway, request));
          if (admitted === false || (admitted !== true && !(await admitted))) throw refusal();
        });
      },
    };
  },

  /** Several workers: the primary keeps the one count they share. */
  primary(config, host) {
    return config.requests_per_second > 0 ? serveEdgeCounts(host, config.requests_per_second) : {};
  },
});
