import { definePlugin } from "../../core/plugin.ts";
import { runsHostDuties } from "../../core/workers.ts";
import { assetResponse } from "./assets.ts";
import { createGuards, HIDDEN, type DashboardDeps, type PageModule } from "./deps.ts";
import { adminPages } from "./pages/admin.tsx";
import { billingPages } from "./pages/billing.tsx";
import { keysPages } from "./pages/keys.tsx";
import { logsPages } from "./pages/logs.tsx";
import { routeProofPages } from "./pages/route-proof.tsx";
import { signInPages } from "./pages/sign-in.tsx";
import { usagePages } from "./pages/usage.tsx";
import { createCounters, serveCounters } from "./counters.ts";
import { DashboardConfig } from "./schema.ts";
import { createSessions } from "./session.ts";

const PAGES: readonly PageModule[] = [signInPages, keysPages, logsPages, usagePages, billingPages, routeProofPages, adminPages];

/** Expired sessions are swept this often. */
const SWEEP_MS = 3_600_000;

/**
 * The dashboard at /dashboard: people of an account sign in and manage keys, read their logs, usage and
 * billing, and run the route proof; operators sign in with the admin token (/dashboard/admin). Pages are
 * rendered on the server from the same store reads the admin and cost APIs answer from.
 */
export default definePlugin({
  name: "dashboard",
  requires: ["storage", "auth"],
  configSchema: DashboardConfig,
  primary(config, host) {
    serveCounters(config, host);
    return {};
  },
  setup(config, host) {
    const store = host.service("storage");
    const sessions = createSessions(store, config, host.now);
    const counters = createCounters(config, host.now, host.workers);
    // Once per host: with several workers only worker 0 sweeps.
    const sweep = !runsHostDuties(host.workers) ? null : setInterval(function sweepExpiredSessions() {
      store.deleteExpiredSessions(host.now()).catch((error) => host.log.warn("expired sessions not swept", { error: String(error) }));
    }, SWEEP_MS);
    sweep?.unref();

    return {
      routes(app, gateway) {
        const deps: DashboardDeps = {
          config,
          store,
          auth: host.service("auth"),
          catalog: host.has("catalog") ? host.service("catalog") : undefined,
          budget: host.has("budget") ? host.service("budget") : undefined,
          admin: host.has("admin") ? host.service("admin") : undefined,
          payments: host.has("payments") ? host.service("payments") : undefined,
          gateway,
          sessions,
          counters,
          log: host.log,
          now: host.now,
          ...createGuards(sessions, host.log),
        };
        app.get("/dashboard/assets/:name", ({ request, params }) => assetResponse(params.name, request), HIDDEN);
        for (const register of PAGES) register(app, deps);
      },
      close() {
        if (sweep) clearInterval(sweep);
      },
    };
  },
});
