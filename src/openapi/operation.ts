import { Type, type TSchema, type TUnsafe } from "@sinclair/typebox";
import type { DocumentDecoration } from "elysia";

/**
 * Builders of the OpenAPI operation objects the routes pass as `detail`: who may call (security), what
 * the answers look like (success and the error shapes), and the shared schemas they point to. The route
 * files say only what differs; the document's components are collected here, so every `$ref` resolves.
 */

/** A schema as the document carries it (TypeBox schemas are JSON Schema; their symbols are dropped in JSON). */
type Schema = TSchema | Record<string, unknown>;
type Json = Record<string, unknown>;

/** A reference to a named schema. */
type Ref = TUnsafe<unknown>;

/** Filled as the route modules load their docs; the document reads it when it is built (first request). */
const components: Record<string, Schema> = {};

/** Registers a named schema in the document's components and returns a reference to it (usable inside TypeBox schemas). */
export function component(name: string, schema: Schema): TUnsafe<unknown> {
  const known = components[name];
  if (known !== undefined && known !== schema) throw new Error(`openapi: two different schemas named ${name}`);
  components[name] = schema;
  return Type.Unsafe({ $ref: `#/components/schemas/${name}` });
}

/** The named schemas, live: what registers later (a plugin's docs) is in the document too. */
export function componentSchemas(): Record<string, Schema> {
  return components;
}

/** The security schemes: client keys by either header, and the operator's admin token. */
export const securitySchemes = {
  apiKeyBearer: {
    type: "http",
    scheme: "bearer",
    description: "A gateway API key (sk-gw-…) as `Authorization: Bearer <key>`. The OpenAI SDKs send it this way.",
  },
  apiKeyHeader: {
    type: "apiKey",
    in: "header",
    name: "x-api-key",
    description: "The same gateway API key as `x-api-key: <key>`. The Anthropic SDKs send it this way.",
  },
  adminBearer: {
    type: "http",
    scheme: "bearer",
    description: "The operator's token as `Authorization: Bearer <GATEWAY_ADMIN_TOKEN>`; only /admin routes accept it.",
  },
} as const;

/** Either header carries a client key; an operation listing both alternatives accepts either. */
const CLIENT_SECURITY = [{ apiKeyBearer: [] }, { apiKeyHeader: [] }];
const ADMIN_SECURITY = [{ adminBearer: [] }];

/** The OpenAI-style error body every route but /v1/messages answers with (core/errors.ts errorBody). */
export const ErrorBody = component(
  "Error",
  Type.Object(
    {
      error: Type.Object({
        message: Type.String({ description: "What went wrong, for people; secrets are masked." }),
        type: Type.String({ description: "invalid_request_error, authentication_error, permission_error, not_found_error, rate_limit_error, upstream_error, server_error" }),
        code: Type.String({ description: "Stable code to branch on: invalid_request, model_not_found, insufficient_balance, invalid_api_key, model_not_allowed, rate_limit_exceeded, key_budget_exceeded, payload_too_large, upstream_error, upstream_timeout, unavailable, …" }),
        param: Type.Union([Type.String(), Type.Null()], { description: "The request field at fault, when there is one." }),
      }),
    },
    { description: "The error shape of every route except POST /v1/messages and its count_tokens." },
  ),
);

/** The Anthropic error body of /v1/messages and /v1/messages/count_tokens (formats/anthropic-messages/errors.ts). */
export const AnthropicErrorBody = component(
  "AnthropicError",
  Type.Object(
    {
      type: Type.Literal("error"),
      error: Type.Object({
        type: Type.String({ description: "Anthropic's error type: invalid_request_error, authentication_error, billing_error, permission_error, not_found_error, request_too_large, rate_limit_error, api_error, overloaded_error, timeout_error" }),
        message: Type.String(),
        code: Type.String({ description: "The gateway's stable code (as in Error.error.code); the SDKs ignore it." }),
      }),
      request_id: Type.Optional(Type.String({ description: "The x-gateway-request-id, when the request got one." })),
    },
    { description: "The error shape of POST /v1/messages and /v1/messages/count_tokens (Anthropic's)." },
  ),
);

const ERROR_TEXT: Record<number, string> = {
  400: "Invalid request: a malformed body or field, an unknown model, or a balance too low for the request",
  401: "No key, an unknown, expired or revoked key (admin routes: a wrong admin token)",
  403: "The key may not call this model (its allowlist)",
  404: "No such record",
  409: "Conflicts with an existing record (a credit reference used for another credit, a second balance-funded plan cycle)",
  413: "The request body is larger than the server's max_body_bytes",
  429: "A rate limit, a key's spend limit or a plan window; retry-after says when to retry",
  500: "Internal error",
  502: "The upstream failed or answered with an error",
  503: "A dependency is briefly unavailable (store, provider); retry-after says when to retry",
  504: "The upstream did not answer in time",
};

const RETRY_AFTER = { "retry-after": { description: "Seconds to wait before retrying", schema: { type: "string" } } };

/** Error responses with the given statuses, all in one body shape. */
function errors(statuses: readonly number[], body: Ref): Json {
  return Object.fromEntries(
    statuses.map((status) => [
      String(status),
      {
        description: ERROR_TEXT[status] ?? "Error",
        ...(status === 429 || status === 503 ? { headers: RETRY_AFTER } : {}),
        content: { "application/json": { schema: body } },
      },
    ]),
  );
}

const REQUEST_ID = { description: "The gateway's id of this request (look it up with GET /v1/generation)", schema: { type: "string" } };
const COST = { description: "What the request cost, in USD (non-streaming answers)", schema: { type: "string" } };

/** Errors an inference route can answer before its first byte (after it, the format's in-stream error event). */
const INFERENCE_ERRORS = [400, 401, 403, 413, 429, 500, 502, 503, 504] as const;

/** POST of an inference route: it reads its own body (no Elysia body schema), answers JSON or, with stream: true, SSE. */
export function inferenceOperation(spec: {
  summary: string;
  description: string;
  tags: string[];
  request: Ref;
  response: Ref;
  /** What the SSE stream carries; absent: the route never streams. */
  stream?: { description: string; example: string };
  errorBody: Ref;
  headers?: Json[];
}): DocumentDecoration {
  const ok: Json = {
    description: spec.stream ? "The answer: JSON, or server-sent events when the request has stream: true" : "The answer",
    headers: { "x-gateway-request-id": REQUEST_ID, "x-gateway-cost": COST },
    content: {
      "application/json": { schema: spec.response },
      ...(spec.stream ? { "text/event-stream": { schema: { type: "string", description: spec.stream.description }, example: spec.stream.example } } : {}),
    },
  };
  return operation({
    summary: spec.summary,
    description: spec.description,
    tags: spec.tags,
    security: CLIENT_SECURITY,
    ...(spec.headers ? { parameters: spec.headers } : {}),
    requestBody: { required: true, content: { "application/json": { schema: spec.request } } },
    responses: { "200": ok, ...errors(INFERENCE_ERRORS, spec.errorBody) },
  });
}

/** A route called with a client key that answers JSON (models, cost and usage, count_tokens). */
export function clientOperation(spec: {
  summary: string;
  description?: string;
  tags: string[];
  response: Ref | Json;
  parameters?: Json[];
  request?: Ref;
  errors: readonly number[];
  errorBody?: Ref;
}): DocumentDecoration {
  return operation({
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: spec.tags,
    security: CLIENT_SECURITY,
    ...(spec.parameters ? { parameters: spec.parameters } : {}),
    ...(spec.request ? { requestBody: { required: true, content: { "application/json": { schema: spec.request } } } } : {}),
    responses: {
      "200": { description: "OK", content: { "application/json": { schema: spec.response } } },
      ...errors([401, ...spec.errors], spec.errorBody ?? ErrorBody),
    },
  });
}

/** An /admin route: the admin token, a JSON answer with the given status, the spec error shape. */
export function adminOperation(spec: { summary: string; description?: string; status?: 200 | 201; response: Ref | Json; errors: readonly number[] }): DocumentDecoration {
  return operation({
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: ["admin"],
    security: ADMIN_SECURITY,
    responses: {
      [String(spec.status ?? 200)]: { description: spec.status === 201 ? "Created" : "OK", content: { "application/json": { schema: spec.response } } },
      ...errors([401, ...spec.errors], ErrorBody),
    },
  });
}

/** A route anyone may call (liveness, readiness): no security requirement. */
export function publicOperation(spec: { summary: string; description?: string; responses: Record<string, { description: string; schema: Schema }> }): DocumentDecoration {
  return operation({
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    tags: ["health"],
    security: [],
    responses: Object.fromEntries(
      Object.entries(spec.responses).map(([status, { description, schema }]) => [status, { description, content: { "application/json": { schema } } }]),
    ),
  });
}

/** `{data: <schema>}`: the envelope of the cost and admin APIs. */
export function data(schema: Schema | Ref): Json {
  return { type: "object", required: ["data"], properties: { data: schema } };
}

/** A path or query parameter. */
export function parameter(where: "path" | "query" | "header", name: string, description: string, schema: Json = { type: "string" }, required = where === "path"): Json {
  return { name, in: where, required, description, schema };
}

/** The one place the builders' plain objects meet the OpenAPI 3.0 typing Elysia's `detail` has (the document is 3.1). */
function operation(object: Json): DocumentDecoration {
  return object as DocumentDecoration;
}
