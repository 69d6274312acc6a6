import { Type, type TSchema } from "@sinclair/typebox";
import { ModelListingSchema } from "../plugins/catalog/schema.ts";
import { clientOperation, component, data, parameter } from "./operation.ts";

/** The docs of what a client key reads besides inference: the model list and the cost and usage API. */

const Usd = Type.Number({ description: "USD" });
const Count = Type.Integer({ minimum: 0 });
const Time = Type.String({ format: "date-time" });
const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);

// Models

const Model = component("Model", ModelListingSchema);

export const listModelsDocs = clientOperation({
  summary: "The models this key may call, with prices and limits",
  description: "OpenAI's list shape plus context length, output limit, USD prices per token and supported parameters.",
  tags: ["models"],
  response: component("ModelList", Type.Object({ object: Type.Literal("list"), data: Type.Array(Model) })),
  errors: [429, 503],
});

export const getModelDocs = clientOperation({
  summary: "One model by id",
  description: "404 model_not_found for an id not in the catalog or outside the key's allowlist.",
  tags: ["models"],
  parameters: [parameter("path", "id", "The model id (case-sensitive, no provider prefix); an id with a slash answers 404")],
  response: Model,
  errors: [404, 429, 503],
});

// Cost and usage

const TAGS = ["cost and usage"];
const COST_ERRORS = [400, 429, 503] as const;

/** One try of one upstream deployment (core/deployments.ts AttemptRecord). */
export const Attempt = component(
  "Attempt",
  Type.Object({
    deployment: Type.String({ description: "The deployment's name (the operator's, else <provider>#<n>)" }),
    status: Nullable(Type.Integer({ description: "The upstream's HTTP status; null when none came (connection error, timeout)" })),
    error_class: Nullable(
      Type.String({
        description:
          "Why it failed: connection, timeout, rate_limited, overloaded, server_error, auth, client_error, broken_stream or idle_timeout; null for the attempt that answered",
      }),
    ),
    latency_ms: Count,
  }),
);

export const Attempts = Type.Array(Attempt, { description: "Every upstream attempt, in order; only the one that answered is billed. Empty when none was made" });

const Generation = component(
  "Generation",
  Type.Object({
    id: Type.String({ description: "The upstream answer's id (chatcmpl-…, msg_…, resp_…), else the gateway request id" }),
    gateway_request_id: Type.String({ description: "gen-… (the x-gateway-request-id header)" }),
    model: Type.String({ description: "The model that answered (and is billed): a catalog fallback when the requested one could not" }),
    requested_model: Type.String({
      description: "The model the client asked for; equal to `model` unless the request fell back to another catalog model (the catalog's `fallbacks`)",
    }),
    status: Type.Union([Type.Literal("success"), Type.Literal("failed"), Type.Literal("cancelled")]),
    created_at: Time,
    latency_ms: Count,
    time_to_first_token_ms: Count,
    made_with_this_key: Type.Boolean(),
    streamed: Type.Boolean(),
    usage: Type.Object({
      prompt_tokens: Count,
      completion_tokens: Count,
      total_tokens: Count,
      cached_tokens: Count,
      cache_write_tokens: Count,
      cache_write_tokens_details: Type.Object(
        {
          ephemeral_5m: Count,
          ephemeral_1h: Count,
        },
        { description: "cache_write_tokens by cache lifetime (5 minutes, 1 hour), each billed at its own price; they sum to cache_write_tokens" },
      ),
      reasoning_tokens: Count,
    }),
    total_cost: Usd,
    cache_discount: Type.Number({
      description:
        "USD, signed, not charged: what prompt caching saved against billing every cached and written token at the input price " +
        "(cache reads' saving minus cache writes' premium; negative when the writes cost more than the reads saved; docs/billing.md)",
    }),
    unbilled_cost: Type.Number({ description: "USD priced but not charged: the hold and the free funds ran out (docs/billing.md)" }),
    usage_estimated: Type.Boolean({ description: "The upstream reported no usable usage; the gateway counted it" }),
    deployment: Nullable(Type.String({ description: "The deployment that answered (the one billed); null when none did" })),
    attempts: Attempts,
    cost_breakdown: Type.Object({ input: Usd, cache_read: Usd, cache_write: Usd, output: Usd }),
    currency: Type.Literal("USD"),
  }),
);

export const generationDocs = clientOperation({
  summary: "One request's cost and usage, by x-gateway-request-id or the answer's id",
  tags: TAGS,
  parameters: [parameter("query", "id", "gen-… (x-gateway-request-id), or the answer's id (chatcmpl-…, msg_…, resp_…)", { type: "string" }, true)],
  response: data(Generation),
  errors: [...COST_ERRORS, 404],
});

const Counters = {
  cost: Usd,
  requests: Count,
  successful_requests: Count,
  failed_requests: Count,
  prompt_tokens: Count,
  completion_tokens: Count,
  cached_tokens: Count,
  cache_write_tokens: Count,
};

const UsageReport = component(
  "UsageReport",
  Type.Object({
    scope: Type.Union([Type.Literal("account"), Type.Literal("key")]),
    start_date: Type.String({ format: "date" }),
    end_date: Type.String({ format: "date" }),
    currency: Type.Literal("USD"),
    total: Type.Object(Counters),
    days: Type.Array(
      Type.Object({ date: Type.String({ format: "date" }), ...Counters, models: Type.Record(Type.String(), Type.Object(Counters), { description: "By model id" }) }),
    ),
  }),
);

export const usageDocs = clientOperation({
  summary: "Daily usage by model over at most 92 UTC days",
  tags: TAGS,
  parameters: [
    parameter("query", "scope", "account (default): every key of the account; key: the calling key only", { type: "string", enum: ["account", "key"] }),
    parameter("query", "start_date", "First UTC day, YYYY-MM-DD (default: 29 days before end_date)", { type: "string", format: "date" }),
    parameter("query", "end_date", "Last UTC day, inclusive, YYYY-MM-DD (default: today)", { type: "string", format: "date" }),
  ],
  response: data(UsageReport),
  errors: COST_ERRORS,
});

export const creditsDocs = clientOperation({
  summary: "Credits, usage and balance of the account",
  tags: TAGS,
  response: data(component("Credits", Type.Object({ total_credits: Usd, total_usage: Usd, balance: Usd, currency: Type.Literal("USD") }))),
  errors: COST_ERRORS,
});

const RateLimits = Type.Object({ requests_per_minute: Nullable(Count), tokens_per_minute: Nullable(Count) });

export const keyDocs = clientOperation({
  summary: "The calling key's record: usage, limit, rate limits in force, models",
  tags: TAGS,
  response: data(
    component(
      "KeyInfo",
      Type.Object({
        name: Type.String(),
        label: Type.String({ description: "The key, masked" }),
        usage: Usd,
        limit: Nullable(Usd),
        limit_remaining: Nullable(Usd),
        rate_limit: RateLimits,
        models: Nullable(Type.Array(Type.String())),
        blocked: Type.Boolean(),
        created_at: Time,
        expires_at: Nullable(Time),
      }),
    ),
  ),
  errors: COST_ERRORS,
});
