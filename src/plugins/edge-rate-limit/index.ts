import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { RateLimitError } from "../../core/errors.ts";
import { createSecondWindowCounter } from "../../core/window-counter.ts";

/**
 * Requests per second per client address on every endpoint, before anything else runs (fixed one-second
 * windows). The address is the gateway's client address: the socket peer, or behind a trusted proxy the
 * forwarded one (`server.trusted_proxies`).
 */
export default definePlugin({
  name: "edge-rate-limit",
  configSchema: Type.Object({
    /** 0 turns the limit off. */
    requests_per_second: Type.Integer({ minimum: 0, default: 60 }),
  }),
  setup(config) {
    const limit = config.requests_per_second;
    const withinLimit = createSecondWindowCounter(limit);
    return {
      routes(app, gateway) {
        if (limit === 0) return;
        app.onRequest(function edgeRateLimit({ request }) {
          // Thrown, not returned: the app maps it and writes the request line.
          if (!withinLimit(gateway.clientIp(request))) {
            throw new RateLimitError(`edge rate limit: at most ${limit} requests per second per client address; retry after a second`, {
              headers: { "retry-after": "1" },
            });
          }
        });
      },
    };
  },
});
