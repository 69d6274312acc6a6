import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import type { AnyElysia } from "elysia";
import { createApp } from "../../src/core/app.ts";
import { defaultConfigFile, loadConfig } from "../../src/core/config.ts";
import { createLogger } from "../../src/core/log.ts";
import { Pipeline, type Stage } from "../../src/core/pipeline.ts";
import type { PluginHost } from "../../src/core/plugin.ts";
import { registerSecret } from "../../src/core/secrets.ts";
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.ts";

setDefaultTimeout(30_000);

type Json = any;
const NO_KEYS = { OPENAI_API_KEY: "", DEEPSEEK_API_KEY: "", XAI_API_KEY: "", MISTRAL_API_KEY: "" };
/**
 * Routes left out of the document: the docs' own (the UI, the document, the UI's script) and the admin
 * catch-all that answers unknown /admin/ paths with a 404. Everything else must be documented.
 */
const DOCS_ROUTES = ["GET /swagger", "GET /swagger/json", "GET /swagger/assets/scalar.js", "ALL /admin/*", "GET /metrics"]; // /metrics: Prometheus text, not an API for clients
/** The dashboard's HTML pages (and the / redirect to them) are for browsers, not API clients: hidden from the document. */
const isDashboardRoute = (key: string) => / \/$| \/dashboard($|\/)/.test(key);
/** No key or token: health and readiness, and the processors' webhooks (authenticated by their signature). */
const PUBLIC_ROUTES = ["GET /health", "GET /ready", "POST /webhooks/stripe"];

/**
 * The gateway's real Elysia app, built in process from the default configuration as the lifecycle builds
 * it, for its route list (what the document must cover) and the document it serves.
 */
async function buildApp(env: Record<string, string | undefined>): Promise<{ app: AnyElysia; close(): Promise<void> }> {
  const log = createLogger("test", { silent: true });
  const config = await loadConfig(defaultConfigFile(env), env);
  const stages: Stage[] = [];
  const provided = new Map<string, unknown>();
  const host: PluginHost = {
    configFile: config.file,
    env,
    now: Date.now,
    log,
    has: (name) => config.plugins.some((plugin) => plugin.definition.name === name),
    secret: registerSecret,
    workers: null,
    service: (name) => provided.get(name as string) as never,
  };
  for (const { definition, config: pluginConfig } of config.plugins) {
    const instance = await definition.setup(pluginConfig as never, host);
    if (instance.provides !== undefined) provided.set(definition.name, instance.provides);
    stages.push({ name: definition.name, instance });
  }
  const app = createApp(stages, new Pipeline(stages, config.server, log, Date.now), config.server, log) as unknown as AnyElysia;
  return {
    app,
    async close() {
      for (const { instance } of [...stages].reverse()) await instance.close?.();
    },
  };
}

/** Follows a local `$ref` (#/components/schemas/Name) to its schema. */
function resolve(document: Json, schema: Json): Json {
  let current = schema;
  for (let hops = 0; current?.$ref; hops++) {
    if (hops > 10) throw new Error(`$ref loop at ${schema.$ref}`);
    const name = /^#\/components\/schemas\/(.+)$/.exec(current.$ref)?.[1];
    current = name ? document.components?.schemas?.[name] : undefined;
    if (!current) throw new Error(`unresolved $ref ${schema.$ref}`);
  }
  return current;
}

/** Where `value` departs from `schema` (the JSON Schema keywords the document uses), or [] when it conforms. */
function mismatches(document: Json, schema: Json, value: unknown, at = "$"): string[] {
  const s = resolve(document, schema);
  if (s.anyOf) return s.anyOf.some((option: Json) => mismatches(document, option, value, at).length === 0) ? [] : [`${at}: matches no anyOf option`];
  if (s.const !== undefined && value !== s.const) return [`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(s.const)}`];
  const actual = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const expected = s.type === "integer" ? "number" : s.type;
  if (expected && expected !== actual) return [`${at}: ${actual}, documented ${s.type}`];
  if (s.type === "integer" && !Number.isInteger(value)) return [`${at}: ${value} is not an integer`];
  if (actual === "array" && s.items) return (value as unknown[]).flatMap((item, i) => mismatches(document, s.items, item, `${at}[${i}]`));
  if (actual !== "object") return [];
  const object = value as Record<string, unknown>;
  const missing = (s.required ?? []).filter((key: string) => !(key in object)).map((key: string) => `${at}.${key}: missing`);
  const properties = Object.entries(s.properties ?? {}).flatMap(([key, property]) =>
    key in object ? mismatches(document, property, object[key], `${at}.${key}`) : [],
  );
  const additional =
    s.patternProperties || (typeof s.additionalProperties === "object" && s.additionalProperties)
      ? Object.entries(object).flatMap(([key, item]) =>
          key in (s.properties ?? {}) ? [] : mismatches(document, s.additionalProperties ?? Object.values(s.patternProperties)[0], item, `${at}.${key}`),
        )
      : [];
  return [...missing, ...properties, ...additional];
}

/** The OpenAPI path of an Elysia route path, as a pattern: `:id` and a trailing `*` are a `{name}` segment. */
function pathPattern(path: string): RegExp {
  const escaped = path.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "\\{[^}/]+\\}").replace(/\*$/, "\\{[^}/]+\\}");
  return new RegExp(`^${escaped}$`);
}

function operations(document: Json): { key: string; path: string; method: string; operation: Json }[] {
  return Object.entries<Json>(document.paths).flatMap(([path, item]) =>
    Object.entries<Json>(item).map(([method, operation]) => ({ key: `${method.toUpperCase()} ${path}`, path, method, operation })),
  );
}

describe("openapi document (/swagger/json) against the app's routes", () => {
  let dataDir: string;
  let built: Awaited<ReturnType<typeof buildApp>>;
  let document: Json;
  let routes: { method: string; path: string; hooks: Json }[];

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "gateway-openapi-"));
    built = await buildApp({
      ...process.env,
      ...NO_KEYS,
      HOST: "127.0.0.1",
      DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
      GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN,
      GATEWAY_SANDBOX: "true",
      // Card payments on, so their webhook is among the routes (no call reaches Stripe here).
      STRIPE_SECRET_KEY: "sk_test_openapi_document",
      STRIPE_WEBHOOK_SECRET: "whsec_test_openapi_document",
    });
    const response = await built.app.handle(new Request("http://localhost/swagger/json"));
    expect(response.status).toBe(200);
    document = await response.json();
    routes = built.app.routes.map((route: Json) => ({ method: route.method, path: route.path, hooks: route.hooks ?? {} }));
  });
  afterAll(async () => {
    await built?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("lists every registered route under its OpenAPI path, and hides only the docs' own routes and the admin catch-all", () => {
    const listed = operations(document);
    const undocumented: string[] = [];
    const HIDDEN_ROUTES = [...DOCS_ROUTES, ...routes.map((route) => `${route.method} ${route.path}`).filter(isDashboardRoute)];
    expect(HIDDEN_ROUTES).toContain("GET /dashboard/sign-in");
    for (const route of routes) {
      const key = `${route.method} ${route.path}`;
      const found = listed.find((entry) => entry.method === route.method.toLowerCase() && pathPattern(route.path).test(entry.path));
      if (HIDDEN_ROUTES.includes(key)) expect(found).toBeUndefined();
      else if (!found) undocumented.push(key);
    }
    expect(undocumented).toEqual([]);
    // Every registered route, and nothing else: no operation the app does not serve.
    expect(listed.length).toBe(routes.length - HIDDEN_ROUTES.length);
    expect(routes.map((route) => `${route.method} ${route.path}`)).toEqual(expect.arrayContaining([...HIDDEN_ROUTES, ...PUBLIC_ROUTES]));
    for (const path of ["/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/v1/images/generations", "/v1/models", "/v1/models/{id}"]) {
      expect(Object.keys(document.paths)).toContain(path);
    }
  });

  it("gives every operation a summary, a success answer with a schema and error answers in the route's error shape", () => {
    const problems: string[] = [];
    for (const { key, path, operation } of operations(document)) {
      if (!operation.summary) problems.push(`${key}: no summary`);
      const success = Object.entries<Json>(operation.responses ?? {}).filter(([status]) => /^2\d\d$/.test(status));
      if (success.length === 0) problems.push(`${key}: no 2xx response`);
      for (const [status, response] of success) {
        const schema = response.content?.["application/json"]?.schema;
        const resolved = schema && resolve(document, schema);
        if (!resolved?.properties || Object.keys(resolved.properties).length === 0) problems.push(`${key}: ${status} has no JSON schema with properties`);
      }
      if (PUBLIC_ROUTES.includes(key)) continue;
      const errors = Object.entries<Json>(operation.responses ?? {}).filter(([status]) => /^[45]\d\d$/.test(status));
      if (!errors.some(([status]) => status === "401")) problems.push(`${key}: no 401`);
      const shape = path.startsWith("/v1/messages") ? "#/components/schemas/AnthropicError" : "#/components/schemas/Error";
      for (const [status, response] of errors) {
        if (response.content?.["application/json"]?.schema?.$ref !== shape) problems.push(`${key}: ${status} is not ${shape}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("requires a client key (either header) on /v1, the admin token on /admin, nothing on health and readiness", () => {
    expect(document.components.securitySchemes).toEqual({
      apiKeyBearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
      apiKeyHeader: expect.objectContaining({ type: "apiKey", in: "header", name: "x-api-key" }),
      adminBearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
    });
    const wrong: string[] = [];
    for (const { key, path, operation } of operations(document)) {
      const expected = PUBLIC_ROUTES.includes(key)
        ? []
        : path.startsWith("/admin/")
          ? [{ adminBearer: [] }]
          : path.startsWith("/v1/")
            ? [{ apiKeyBearer: [] }, { apiKeyHeader: [] }]
            : undefined;
      if (expected === undefined || !Bun.deepEquals(operation.security, expected)) wrong.push(`${key}: ${JSON.stringify(operation.security)}`);
    }
    expect(wrong).toEqual([]);
  });

  it("describes the inference bodies without an Elysia body schema (the pipeline reads and limits the body itself)", () => {
    for (const path of ["/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/v1/images/generations"]) {
      const route = routes.find((entry) => entry.method === "POST" && entry.path === path)!;
      expect(route.hooks.body).toBeUndefined();
      expect(route.hooks.parse).toBeDefined();
      const schema = resolve(document, document.paths[path].post.requestBody.content["application/json"].schema);
      expect(schema.required).toContain("model");
      expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(["model"]));
    }
    for (const path of ["/v1/chat/completions", "/v1/messages", "/v1/responses"]) {
      expect(document.paths[path].post.responses["200"].content["text/event-stream"]).toBeDefined();
    }
    expect(document.paths["/v1/images/generations"].post.responses["200"].content["text/event-stream"]).toBeUndefined();
    expect(document.paths["/v1/models/{id}"].get.parameters).toEqual([expect.objectContaining({ name: "id", in: "path", required: true })]);
    // Every POST says what it takes.
    for (const { key, method, operation } of operations(document)) {
      if (method === "post") expect({ key, body: operation.requestBody?.content?.["application/json"]?.schema !== undefined }).toEqual({ key, body: true });
    }
  });

  it("resolves every $ref in the document", () => {
    const refs: string[] = [];
    JSON.stringify(document, (key, value) => {
      if (key === "$ref") refs.push(value);
      return value;
    });
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of new Set(refs)) expect(() => resolve(document, { $ref: ref })).not.toThrow();
  });
});

describe("the documented shapes are the ones the gateway answers with", () => {
  let t: TestGateway;
  let document: Json;
  let key: string;

  beforeAll(async () => {
    t = await startTestGateway({ env: { GATEWAY_SANDBOX: "true", ...NO_KEYS } });
    document = await (await fetch(`${t.url}/swagger/json`)).json();
    key = (await t.newAccountWithKey({ credit: 10 })).key;
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** Calls the gateway and checks the answer against the document's schema for that operation and status. */
  async function conforms(method: string, docPath: string, url: string, init: RequestInit = {}, expectedStatus = 200) {
    const response = await fetch(`${t.url}${url}`, { method: method.toUpperCase(), ...init });
    const body: Json = await response.json();
    expect({ status: response.status, body }).toMatchObject({ status: expectedStatus });
    const documented = document.paths[docPath][method].responses[String(expectedStatus)];
    expect(documented).toBeDefined();
    expect(mismatches(document, documented.content["application/json"].schema, body)).toEqual([]);
    return body;
  }

  const json = (auth: Record<string, string>, body: unknown): RequestInit => ({
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

  it("health and readiness", async () => {
    await conforms("get", "/health", "/health");
    await conforms("get", "/ready", "/ready");
  });

  it("errors: the Error shape on OpenAI-format routes, Anthropic's on /v1/messages", async () => {
    await conforms("get", "/v1/models", "/v1/models", {}, 401);
    await conforms("post", "/v1/chat/completions", "/v1/chat/completions", json({}, { model: "x", messages: [] }), 401);
    await conforms("post", "/v1/messages", "/v1/messages", json({}, { model: "x", max_tokens: 1, messages: [] }), 401);
    await conforms("post", "/v1/messages/count_tokens", "/v1/messages/count_tokens", json({ "x-api-key": key }, { model: "nope", messages: [{ role: "user", content: "hi" }] }), 400);
    await conforms("get", "/v1/models/{id}", "/v1/models/no-such-model", { headers: { authorization: `Bearer ${key}` } }, 404);
    await conforms("post", "/admin/v1/accounts", "/admin/v1/accounts", json({ authorization: "Bearer wrong" }, { name: "x" }), 401);
  });

  it("models, cost and usage, with a key in either header", async () => {
    const list = await conforms("get", "/v1/models", "/v1/models", { headers: { authorization: `Bearer ${key}` } });
    const model = list.data.find((entry: Json) => entry.architecture.output_modalities.includes("text")).id;
    await conforms("get", "/v1/models/{id}", `/v1/models/${model}`, { headers: { "x-api-key": key } });
    await conforms("get", "/v1/credits", "/v1/credits", { headers: { "x-api-key": key } });
    await conforms("get", "/v1/key", "/v1/key", { headers: { "x-api-key": key } });
    await conforms("get", "/v1/usage", "/v1/usage", { headers: { "x-api-key": key } });
  });

  it("inference answers (sandbox upstream) and the generation record", async () => {
    const auth = { authorization: `Bearer ${key}` };
    const chat = await conforms("post", "/v1/chat/completions", "/v1/chat/completions", json(auth, { model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] }));
    await conforms("post", "/v1/messages", "/v1/messages", json({ "x-api-key": key }, { model: "gpt-6-luna", max_tokens: 64, messages: [{ role: "user", content: "hi" }] }));
    await conforms("post", "/v1/messages/count_tokens", "/v1/messages/count_tokens", json({ "x-api-key": key }, { model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] }));
    await conforms("post", "/v1/responses", "/v1/responses", json(auth, { model: "gpt-6-luna", input: "hi" }));
    const generation = await conforms("get", "/v1/generation", `/v1/generation?id=${encodeURIComponent(chat.id)}`, { headers: auth });
    expect(generation.data.model).toBe("gpt-6-luna");
  });

  it("admin answers", async () => {
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const account = await conforms("post", "/admin/v1/accounts", "/admin/v1/accounts", json(admin, { name: "docs" }), 201);
    const id = account.data.id;
    await conforms("get", "/admin/v1/accounts/{id}", `/admin/v1/accounts/${id}`, { headers: admin });
    await conforms("post", "/admin/v1/accounts/{id}/credits", `/admin/v1/accounts/${id}/credits`, json(admin, { amount: 5, kind: "card", reference: "docs-1" }), 201);
    const created = await conforms("post", "/admin/v1/accounts/{id}/keys", `/admin/v1/accounts/${id}/keys`, json(admin, { name: "docs key" }), 201);
    await conforms("get", "/admin/v1/accounts/{id}/requests", `/admin/v1/accounts/${id}/requests`, { headers: admin });
    await conforms("get", "/admin/v1/accounts/{id}/keys", `/admin/v1/accounts/${id}/keys`, { headers: admin });
    await conforms("get", "/admin/v1/accounts", "/admin/v1/accounts?limit=2", { headers: admin });
    await conforms("get", "/admin/v1/plans", "/admin/v1/plans", { headers: admin });
    await conforms("get", "/admin/v1/accounts/{id}/funds", `/admin/v1/accounts/${id}/funds`, { headers: admin });
    await conforms("delete", "/admin/v1/keys/{id}", `/admin/v1/keys/${created.data.id}`, { headers: admin });
  });
});

describe("the docs page and its script come from the gateway, pinned", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("the page loads Scalar from /swagger/assets at the version the vendored manifest pins, and nothing from elsewhere", async () => {
    const pinned = JSON.parse(readFileSync("src/openapi/vendor/scalar.json", "utf8")).version;
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    const html = await (await fetch(`${t.url}/swagger`)).text();
    const sources = [...html.matchAll(/<script[^>]*\ssrc="([^"]+)"/g)].map((match) => match[1]);
    expect(sources).toEqual([`swagger/assets/scalar.js?v=${pinned}`]);
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).toContain('"withDefaultFonts":false');
  });

  it("serves the script gzipped or plain, the bytes whose SHA-256 the vendored manifest pins, cached a year", async () => {
    const manifest = JSON.parse(readFileSync("src/openapi/vendor/scalar.json", "utf8"));
    const bundle = gunzipSync(new Uint8Array(readFileSync("src/openapi/vendor/scalar-standalone.js.gz")));
    expect(new Bun.CryptoHasher("sha256").update(bundle).digest("hex")).toBe(manifest.sha256);
    const gzipped = await fetch(`${t.url}/swagger/assets/scalar.js?v=1`, { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit);
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers.get("content-encoding")).toBe("gzip");
    expect(gzipped.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(gzipped.headers.get("content-type")).toContain("javascript");
    expect(Buffer.from(gunzipSync(new Uint8Array(await gzipped.arrayBuffer()))).equals(Buffer.from(bundle))).toBe(true);
    const plain = await fetch(`${t.url}/swagger/assets/scalar.js`, { headers: { "accept-encoding": "identity" } });
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(Buffer.from(await plain.arrayBuffer()).equals(Buffer.from(bundle))).toBe(true);
  });
});
