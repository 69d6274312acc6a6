import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { RateLimitError, errorResponse } from "../../core/errors.ts";
import { clientAddress } from "../../core/app.ts";
import { createSecondWindowCounter } from "../../core/window-counter.ts";

/** Requests per second per client IP on every endpoint, before anything else runs (fixed one-second windows). */
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
      routes(app) {
        if (limit === 0) return;
        app.onRequest(function edgeRateLimit({ request, server }) {
          if (!withinLimit(clientAddress(server, request))) {
            return errorResponse(
              new RateLimitError(`edge rate limit: at most ${limit} requests per second per client address; retry after a second`, {
                headers: { "retry-after": "1" },
              }),
            );
          }
        });
      },
    };
  },
});
