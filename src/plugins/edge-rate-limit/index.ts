import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { RateLimitError, errorResponse } from "../../core/errors.ts";
import { clientAddress } from "../../core/app.ts";

/** Requests per second per client IP on every endpoint, before anything else runs (fixed one-second windows). */
export default definePlugin({
  name: "edge-rate-limit",
  configSchema: Type.Object({
    /** 0 turns the limit off. */
    requests_per_second: Type.Integer({ minimum: 0, default: 60 }),
  }),
  setup(config) {
    const limit = config.requests_per_second;
    let window = 0;
    let counts = new Map<string, number>();
    return {
      routes(app) {
        if (limit === 0) return;
        app.onRequest(function edgeRateLimit({ request, server }) {
          const second = Math.floor(Date.now() / 1000);
          if (second !== window) {
            window = second;
            counts = new Map();
          }
          const ip = clientAddress(server, request);
          const count = (counts.get(ip) ?? 0) + 1;
          counts.set(ip, count);
          if (count > limit) {
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
