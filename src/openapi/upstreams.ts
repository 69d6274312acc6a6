import { Type } from "@sinclair/typebox";
import { adminOperation, component, data } from "./operation.ts";

/** The upstream-health plugin's admin route: each provider's deployments and their health. */

const Nullable = (schema: ReturnType<typeof Type.String> | ReturnType<typeof Type.Number>) => Type.Union([schema, Type.Null()]);
const Count = Type.Integer({ minimum: 0 });

const DeploymentHealthView = component(
  "UpstreamDeployment",
  Type.Object({
    name: Type.String({ description: "Unique within its provider" }),
    weight: Type.Number(),
    unavailable_reason: Type.Union([Type.String(), Type.Null()], { description: "Why it cannot serve as configured (no key); null when it can" }),
    breaker: Type.Union([Type.Literal("closed"), Type.Literal("open"), Type.Literal("half_open")]),
    failures: Type.Integer({ minimum: 0, description: "Failures counted by the breaker (consecutive, or in the current window)" }),
    errors_last_5m: Type.Record(Type.String(), Count, { description: "Failed attempts by error class over the last 5 minutes (this instance)" }),
    p50_latency_ms: Nullable(Type.Number({ description: "Median latency of the last 64 successful attempts" })),
    in_flight: Count,
    waiting_until: Nullable(Type.String({ format: "date-time", description: "Skipped until then (the upstream's Retry-After)" })),
    probe_at: Nullable(Type.String({ format: "date-time", description: "An open breaker lets one probe request through from then" })),
  }),
);

export const upstreamsDocs = adminOperation({
  summary: "Each provider's deployments and their health: breaker, recent errors, p50 latency, in flight, waits",
  description: "Breaker states and waits are shared by every instance when upstream-health has a redis_url; error counts, latency and in-flight counts are this instance's.",
  response: data(Type.Array(Type.Object({ provider: Type.String(), deployments: Type.Array(DeploymentHealthView) }))),
  errors: [],
});
