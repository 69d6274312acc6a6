import { Type } from "@sinclair/typebox";
import { definePlugin } from "../../core/plugin.ts";
import { planReservation } from "./reservation.ts";

/**
 * Holds each request's worst-case cost before it goes upstream, atomically against the account
 * balance and the key budget, and lets the metering transaction release it with the exact debit.
 */
export default definePlugin({
  name: "budget",
  requires: ["storage", "auth", "catalog", "token-count"],
  configSchema: Type.Object({
    /** How often this process says it is alive. */
    heartbeat_ms: Type.Integer({ minimum: 100, default: 5_000 }),
    /** Reservations of a process silent this long are released (crash recovery). */
    stale_after_ms: Type.Integer({ minimum: 200, default: 30_000 }),
  }),
  async setup(config, host) {
    const store = host.service("storage");
    const catalog = host.service("catalog");
    const instanceId = "gw_" + crypto.randomUUID().replaceAll("-", "").slice(0, 20);

    async function beat() {
      const now = host.now();
      await store.heartbeat(instanceId, now);
      const released = await store.releaseStaleReservations(now - config.stale_after_ms);
      if (released > 0) host.log.warn("released reservations of a stopped gateway process", { released });
    }
    await beat();
    const timer = setInterval(() => beat().catch((error) => host.log.error("heartbeat failed", { error: String(error) })), config.heartbeat_ms);
    timer.unref?.();

    return {
      async onRequest(ctx) {
        const model = ctx.model!;
        const key = ctx.principal!.key;
        const promptTokens = ctx.promptTokenBound ?? 0;
        const worst = {
          promptTokens,
          prices: catalog.pricesFor(model, promptTokens, new Date(ctx.startedAt)),
          clientMaxOutput: ctx.request.maxOutputTokens,
          modelMaxOutput: model.max_output_tokens,
        };
        let outputCap: number | undefined;
        const input = { id: ctx.requestId, accountId: key.accountId, keyId: key.id, keyLimited: key.limit !== null, instanceId, createdAt: ctx.startedAt };
        const held = await store.reserve(input, (funds) => {
          const plan = planReservation(worst, funds);
          outputCap = plan.outputCap;
          return plan.amount;
        });
        ctx.upstreamOutputCap = outputCap;
        ctx.log.reserved_nano = held;
      },
      async onComplete(ctx) {
        // Metered requests release their hold in the transaction that writes their debit.
        if (!ctx.metered) await store.releaseReservation(ctx.requestId);
      },
      async close() {
        clearInterval(timer);
        await store.removeInstance(instanceId);
      },
    };
  },
});
