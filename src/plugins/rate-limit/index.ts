import { definePlugin } from "../../core/plugin.ts";
import type { GatewayContext } from "../../core/context.ts";
import type { Principal } from "../auth/principal.ts";
import { rateLimitConfigSchema } from "./schema.ts";
import type { Denial, WindowStore } from "./gcra.ts";
import { createMemoryStore } from "./memory-store.ts";
import { createLeasedStore, type LeasableStore } from "./leases.ts";
import { createPrimaryStore, serveSharedWindows } from "./primary-store.ts";
import { createPromotionalStatus } from "./promotional.ts";
import { capBinds, limitExceeded, promptTooLarge, stricter } from "./limits.ts";
import type { EffectiveLimits, RateLimitService } from "./service.ts";
import type { LedgerStore } from "../storage/repository.ts";

export type { EffectiveLimits, RateLimitService } from "./service.ts";

/**
 * Requests and tokens per minute per key (GCRA over 60 s), with the promotional caps of accounts that
 * never paid. In memory, or in Redis shared by every instance; fails closed (503) when Redis is lost.
 * Several workers without Redis share one memory store kept by the primary process (primary-store.ts).
 */
export default definePlugin({
  name: "rate-limit",
  requires: ["auth", "storage", "token-count"],
  configSchema: rateLimitConfigSchema,
  async setup(config, host) {
    const store: LedgerStore = host.service("storage"); // the slices of the store it uses
    const now = host.now;
    const capRpm = config.promotional.requests_per_minute;
    const capTpm = config.promotional.tokens_per_minute;
    const capped = capRpm > 0 || capTpm > 0;
    const promotional = createPromotionalStatus(store, now, config.promotional_cache_ms);
    let windows: WindowStore;
    const leased = (shared: LeasableStore): WindowStore =>
      config.lease_ms > 0
        ? createLeasedStore(shared, {
            leaseMs: config.lease_ms,
            now,
            onGiveBackFailed: (error) => host.log.warn("rate-limit lease not given back (its units drain within a minute)", { error: String((error as Error)?.cause ?? error) }),
          })
        : shared;
    let backend: "memory" | "redis" | "primary" = "memory";
    if (config.redis_url) {
      backend = "redis";
      // ioredis (megabytes resident) is loaded only when counts live in Redis.
      const shared = await (await import("./redis-store.ts")).createRedisStore({
        url: config.redis_url,
        keyPrefix: config.redis_key_prefix,
        commandTimeoutMs: config.redis_command_timeout_ms,
        log: host.log,
      });
      windows = leased(shared);
    } else if (host.workers) {
      // Several workers: one count for all of them, in the primary process (its `primary` part below).
      backend = "primary";
      windows = leased(createPrimaryStore(host.workers));
    } else windows = createMemoryStore({ now });
    host.log.info("rate-limit windows", { backend, lease_ms: backend === "memory" ? undefined : config.lease_ms });

    /**
     * Admits the request under the key's effective limits, or throws 429; no limit: returns at once, allocating
     * nothing. `countsTokens` false (count_tokens): the request counts against RPM only, as Anthropic's does.
     */
    function admit(ctx: GatewayContext, principal: Principal, isPromotional: boolean, countsTokens: boolean): void | Promise<void> {
      const key = principal.key;
      const rpm = isPromotional ? stricter(key.requestsPerMinute, capRpm) : stricter(key.requestsPerMinute, 0);
      const tpm = !countsTokens ? 0 : isPromotional ? stricter(key.tokensPerMinute, capTpm) : stricter(key.tokensPerMinute, 0);
      if (rpm === 0 && tpm === 0) return;
      const tokens = tpm > 0 ? (ctx.promptTokenBound ?? 0) : 0;
      if (tokens > tpm && tpm > 0) {
        ctx.log.rate_limit = "prompt_over_tpm";
        throw promptTooLarge(tokens, tpm, capBinds(key.tokensPerMinute, capTpm, isPromotional));
      }
      const verdict = windows.admit(key.id, rpm, tpm, tokens, now());
      if (verdict instanceof Promise) return verdict.then((refused) => decide(ctx, refused, rpm, tpm, tokens, isPromotional));
      decide(ctx, verdict, rpm, tpm, tokens, isPromotional);
    }

    /** `admit` for the caller, once its account's promotional status is known (cached: synchronously). */
    function admitCaller(ctx: GatewayContext, countsTokens: boolean): void | Promise<void> {
      const principal = ctx.principal!;
      if (!capped) return admit(ctx, principal, false, countsTokens);
      const cached = promotional.peek(principal.accountId);
      if (cached !== undefined) return admit(ctx, principal, cached, countsTokens);
      return promotional.load(principal.accountId).then((isPromotional) => admit(ctx, principal, isPromotional, countsTokens));
    }

    function decide(ctx: GatewayContext, refused: Denial | null, rpm: number, tpm: number, tokens: number, isPromotional: boolean): void {
      if (refused === null) {
        if (tpm > 0) ctx.rateLimitCharge = { tpm, tokens };
        return;
      }
      const key = ctx.principal!.key;
      const own = refused.limit === "rpm" ? key.requestsPerMinute : key.tokensPerMinute;
      ctx.log.rate_limit = refused.limit;
      throw limitExceeded(refused, rpm, tpm, tokens, capBinds(own, refused.limit === "rpm" ? capRpm : capTpm, isPromotional));
    }

    const service: RateLimitService = {
      async effectiveLimits(principal: Principal): Promise<EffectiveLimits> {
        // Read fresh (and refresh the cache): a client checking its limits right after a top-up sees them lifted.
        const isPromotional = capped && (await promotional.refresh(principal.accountId));
        const { requestsPerMinute, tokensPerMinute } = principal.key;
        return {
          requests_per_minute: stricter(requestsPerMinute, isPromotional ? capRpm : 0) || null,
          tokens_per_minute: stricter(tokensPerMinute, isPromotional ? capTpm : 0) || null,
        };
      },
    };

    return {
      provides: service,

      onRequest(ctx) {
        return admitCaller(ctx, true);
      },

      // count_tokens: one request against RPM, no tokens (nothing to settle, so no onComplete is needed).
      onLocalRequest(ctx) {
        return admitCaller(ctx, false);
      },

      onComplete(ctx) {
        const charge = ctx.rateLimitCharge;
        if (charge === undefined) return;
        // Count what usage reports: completion tokens, and the prompt's actual size instead of its bound.
        // No usage (failed before any): the prompt's charge is given back; the request itself still counts.
        const usage = ctx.usage;
        const tokens = (usage ? usage.inputTokens + usage.outputTokens : 0) - charge.tokens;
        if (tokens === 0) return;
        const settled = windows.adjust(ctx.principal!.key.id, charge.tpm, tokens, now());
        // Not awaited: the response must not wait for Redis (where settles are summed for a few ms, redis-store.ts).
        if (settled instanceof Promise) {
          settled.catch(function settleFailed(error) {
            host.log.warn("rate-limit settle lost", { request_id: ctx.requestId, tokens, error: String(error?.cause ?? error) });
          });
        }
      },

      close: () => windows.close(),
    };
  },

  /** Several workers: the primary keeps their shared windows, unless Redis does (then every worker uses Redis). */
  primary(config, host) {
    return config.redis_url ? {} : serveSharedWindows(host);
  },
});
