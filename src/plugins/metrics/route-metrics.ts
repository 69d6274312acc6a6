import type { RouteAnswer } from "../../core/plugin.ts";
import { httpStatusClass, OTHER } from "./labels.ts";
import type { CounterSeries, Family, MetricsRegistry } from "./registry.ts";

/**
 * gateway_route_requests_total: the requests answered outside the pipeline (admin, dashboard, cost API, health,
 * docs, /metrics, unknown paths, the edge limit's refusals), told by the app's `routeAnswered`. The route label is
 * a registered route's template, else `other`: an unknown path, or a request refused before any route was matched
 * (the edge limit, the admin guard); a path never makes a series of its own.
 */
export class RouteMetrics {
  private readonly requests: Family<CounterSeries>;
  private known: ReadonlySet<string> | undefined;

  constructor(
    registry: MetricsRegistry,
    /** The app's route templates, read once at the first answer (every plugin has registered its routes by then). */
    private readonly templates: () => Iterable<string>,
  ) {
    this.requests = registry.counter(
      "gateway_route_requests_total",
      "Requests answered outside the inference pipeline (admin, dashboard, cost API, health, docs, metrics), by route template (other: an unknown path, or refused before routing) and HTTP status class.",
      ["route", "status_class"],
    );
  }

  record(answer: RouteAnswer): void {
    this.known ??= new Set(this.templates());
    const route = answer.route !== undefined && this.known.has(answer.route) ? answer.route : OTHER;
    this.requests.get2(route, httpStatusClass(answer.status)).inc(1);
  }
}
