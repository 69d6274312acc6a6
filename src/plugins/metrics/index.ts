import { timingSafeEqual } from "node:crypto";
import { definePlugin, type PluginHost, type Services } from "../../core/plugin.ts";
import { AuthenticationError, errorResponse, UnavailableError } from "../../core/errors.ts";
import { MoneyMetrics, STORE_GAUGES } from "./money-metrics.ts";
import { MetricsRegistry } from "./registry.ts";
import { modelLabel, RequestMetrics } from "./request-metrics.ts";
import { RouteMetrics } from "./route-metrics.ts";
import { RuntimeMetrics } from "./runtime-metrics.ts";
import { metricsConfigSchema } from "./schema.ts";
import { UpstreamMetrics } from "./upstream-metrics.ts";
import { mergedMetrics, serveMergedMetrics } from "./workers.ts";

const sha256 = (text: string) => new Bun.CryptoHasher("sha256").update(text).digest();

/** Whether the Authorization header carries the token: both hashed first, so the comparison is constant-time whatever the lengths. */
function bearerMatches(authorization: string | null, expected: Buffer): boolean {
  const match = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return match !== null && timingSafeEqual(sha256(match[1]!), expected);
}

/** A plugin's `provides` once every plugin is set up (this one runs first, before the ones it reads). */
function later<K extends keyof Services>(host: PluginHost, name: K): () => Services[K] | undefined {
  let resolved: Services[K] | undefined;
  return () => {
    if (resolved === undefined && host.has(name)) resolved = host.service(name);
    return resolved;
  };
}

/**
 * GET /metrics in the Prometheus text format (prom-client): requests, latencies and tokens by ingress and model,
 * the money (billed, unbilled, refused, the ledger's credits, the holds), upstream attempts and breakers, the
 * process. One onRequestEnd hook per request and cached series; label values only from configuration (labels.ts).
 * First in the pipeline: its onRequestEnd sees every request; what it reads of later plugins is looked up once they
 * are all set up. With several workers a scrape answers the metrics of all of them, merged by the primary (workers.ts).
 */
export default definePlugin({
  name: "metrics",
  configSchema: metricsConfigSchema,
  setup(config, host) {
    host.secret(config.token);
    const expected = config.token ? sha256(config.token) : null;
    const registry = new MetricsRegistry();
    let gateway: { readonly inFlight: number } | undefined;
    const storage = later(host, "storage");
    const requests = new RequestMetrics(registry);
    const money = new MoneyMetrics(registry, storage, host.log);
    const upstreams = new UpstreamMetrics(registry, later(host, "upstream-health"));
    const runtime = new RuntimeMetrics(registry, () => gateway?.inFlight);
    let routeTemplates: () => Iterable<string> = () => [];
    const routes = new RouteMetrics(registry, () => routeTemplates());
    const edge = later(host, "edge-rate-limit");
    let stopCommits: (() => void) | undefined;
    let stopEdge: (() => void) | undefined;
    // Several workers: a scrape answers the metrics of all of them (workers.ts).
    const merged = host.workers ? mergedMetrics(host.workers, () => registry.json(STORE_GAUGES, true)) : null;

    /** The exposition: this process's, or every worker's merged by the primary. */
    async function exposition(): Promise<Response> {
      await money.refresh();
      let text: string;
      if (merged === null) text = await registry.exposition();
      else {
        try {
          text = await merged(await registry.json(STORE_GAUGES, false));
        } catch (error) {
          // Not this worker's metrics alone: its counters would go backwards in Prometheus' eyes (a reset).
          host.log.warn("metrics: the workers' metrics could not be gathered", { error: String(error) });
          return errorResponse(new UnavailableError("the metrics of the other workers could not be gathered; retry", { headers: { "retry-after": "1" } }));
        }
      }
      return new Response(text, { headers: { "content-type": registry.contentType, "cache-control": "no-store" } });
    }

    return {
      onRequestEnd(ctx, outcome) {
        const model = modelLabel(ctx);
        requests.record(ctx, outcome, model, performance.now());
        money.record(ctx, outcome, model);
        upstreams.record(ctx);
      },

      routeAnswered(answer) {
        routes.record(answer);
      },

      routes(app, running) {
        // Every plugin is set up by now: the store and the deployments can be read.
        gateway = running;
        routeTemplates = () => app.routes.map((route) => route.path);
        upstreams.configure(running.upstreams);
        stopCommits ??= storage()?.onCommit(runtime.commitObserver);
        stopEdge ??= edge()?.onRefused(() => money.refusedAtEdge());
        app.get(
          "/metrics",
          async ({ request }) => {
            if (expected && !bearerMatches(request.headers.get("authorization"), expected)) {
              return errorResponse(new AuthenticationError("GET /metrics needs Authorization: Bearer <METRICS_TOKEN>"), { "www-authenticate": "Bearer" });
            }
            return exposition();
          },
          // Prometheus' text format for scrapers, not an API of the document (docs/observability.md).
          { detail: { hide: true } },
        );
      },

      close() {
        stopCommits?.();
        stopEdge?.();
        runtime.close();
      },
    };
  },

  /** Several workers: the primary merges their metrics for the one a scrape reached. */
  primary(_config, host) {
    serveMergedMetrics(host);
    return {};
  },
});
