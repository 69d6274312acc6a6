import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { Type } from "@sinclair/typebox";
import { componentSchemas, publicOperation, securitySchemes } from "./operation.ts";
import { scalarBundle } from "./assets.ts";

/** Where the UI and the document are served (the paths /swagger and /swagger/json are kept from @elysiajs/swagger). */
export const DOCS_PATH = "/swagger";
export const SPEC_PATH = `${DOCS_PATH}/json`;
export const SCALAR_PATH = `${DOCS_PATH}/assets/scalar.js`;

export const healthDocs = publicOperation({
  summary: "Liveness",
  responses: { "200": { description: "The process serves HTTP", schema: Type.Object({ status: Type.Literal("ok") }) } },
});

export const readyDocs = publicOperation({
  summary: "Readiness: every plugin can serve",
  responses: {
    "200": {
      description: "Every plugin is ready (store reachable, …); models whose provider cannot serve (no key) are listed, the others are served",
      schema: Type.Object({
        status: Type.Literal("ready"),
        unserved: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()), { description: "Model ids by provider that cannot serve them" })),
      }),
    },
    "503": {
      description: "A plugin cannot serve yet; it is named",
      schema: Type.Object({ status: Type.Literal("unavailable"), plugin: Type.String() }),
    },
  },
});

/**
 * The API docs: the OpenAPI 3.1 document at /swagger/json, built from every route's `detail`, and the
 * Scalar UI at /swagger with its script served by the gateway itself (vendored at a pinned version in ./vendor), so the
 * page works offline and sends nothing to a CDN.
 */
export function apiDocs() {
  const scalar = scalarBundle();
  const completed = new WeakMap<object, unknown>();
  return new Elysia({ name: "api-docs" })
    .onAfterHandle(function completeSpec({ path, response }) {
      // Local to this instance: runs only for the two docs routes below, never for API routes.
      if (path !== SPEC_PATH || response === null || typeof response !== "object") return;
      let document = completed.get(response);
      if (document === undefined) completed.set(response, (document = completeDocument(response as OpenApiDocument)));
      return document;
    })
    .get(SCALAR_PATH, ({ request }) => scalar.response(request), { detail: { hide: true } })
    .use(
      openapi({
        path: DOCS_PATH,
        specPath: SPEC_PATH,
        documentation: {
          info: {
            title: "AI gateway",
            version: "1",
            description:
              "One API key and one prepaid USD balance for every model family. Client routes take the key as `Authorization: Bearer <key>` or `x-api-key: <key>`; " +
              "/admin routes take the operator's token. Errors are `{error:{message,type,code,param}}`, except on /v1/messages (Anthropic's shape).",
          },
          tags: [
            { name: "inference", description: "Model calls in the OpenAI and Anthropic wire formats, billed to the token" },
            { name: "models", description: "The catalog this key may call" },
            { name: "cost and usage", description: "How clients reconcile their spend" },
            { name: "admin", description: "The operator API (GATEWAY_ADMIN_TOKEN)" },
            { name: "health", description: "Liveness and readiness, no key" },
          ],
          // The builders' schemas are JSON Schema 2020-12 (OpenAPI 3.1); the plugin's option type is 3.0's.
          components: { securitySchemes, schemas: componentSchemas() } as never,
        },
        scalar: {
          // Relative like the plugin's spec URL; the version in the query busts the year-long cache on an upgrade.
          cdn: `${SCALAR_PATH.slice(1)}?v=${scalar.version}`,
          version: scalar.version,
          // Scalar's default fonts come from fonts.scalar.com; the system fonts need no network.
          withDefaultFonts: false,
          telemetry: false,
          // Features backed by Scalar's cloud (Ask AI, MCP generation, share and deploy): nothing leaves the gateway.
          agent: { disabled: true },
          mcp: { disabled: true },
          showDeveloperTools: "never",
          // Every group open, so each endpoint's path is on the page without a click.
          defaultOpenAllTags: true,
          // The option's type is Scalar's parsed configuration (every field required, no per-source `agent`);
          // the page passes any subset to Scalar as it is.
        } satisfies Partial<ScalarOptions> & { agent: { disabled: boolean } } as unknown as ScalarOptions,
      }),
    );
}

type ScalarOptions = NonNullable<NonNullable<Parameters<typeof openapi>[0]>["scalar"]>;

interface OpenApiDocument {
  paths: Record<string, Record<string, Record<string, unknown>>>;
  [key: string]: unknown;
}

/**
 * The plugin's document, finished: a wildcard route (`/v1/models/*`, whose ids may hold a slash) is
 * listed under the path parameter its docs name (`/v1/models/{id}`).
 */
export function completeDocument(document: OpenApiDocument): OpenApiDocument {
  const paths: OpenApiDocument["paths"] = {};
  for (const [path, item] of Object.entries(document.paths)) {
    const name = path.endsWith("/*") ? wildcardName(item) : undefined;
    const documentedPath = name ? `${path.slice(0, -1)}{${name}}` : path;
    paths[documentedPath] = item;
  }
  return { ...document, paths };
}

/** The one path parameter a wildcard route's operations declare. */
function wildcardName(item: Record<string, Record<string, unknown>>): string | undefined {
  for (const operation of Object.values(item)) {
    const parameters = (operation.parameters ?? []) as { in?: string; name?: string }[];
    const declared = parameters.find((parameter) => parameter.in === "path");
    if (declared?.name) return declared.name;
  }
  return undefined;
}
