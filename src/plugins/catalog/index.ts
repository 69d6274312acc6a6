import { resolve } from "node:path";
import type { AnyElysia } from "elysia";
import { definePlugin } from "../../core/plugin.ts";
import type { GatewayContext } from "../../core/context.ts";
import { GatewayError, InvalidRequestError, UnknownModelError } from "../../core/errors.ts";
import type { Principal } from "../auth/principal.ts";
import type { ModelAccess } from "../allowlist/index.ts";
import { loadCatalog, type Catalog, type CatalogModel } from "./catalog.ts";
import { CatalogConfigSchema, DEFAULT_CATALOG_FILE } from "./schema.ts";
import { getModelDocs, listModelsDocs } from "../../openapi/account.ts";

declare module "../../core/plugin.ts" {
  interface Services {
    catalog: Catalog;
  }
}

declare module "../../core/context.ts" {
  interface GatewayContext {
    /** The catalog entry of `request.model`. Writer: catalog. */
    model?: CatalogModel;
  }
}

/** The catalog id of the model that answered (a fallback's when one did). */
const MODEL_HEADER = "x-gateway-model";

/** Ingress formats that serve chat models only; image models are reached at /v1/images/generations. */
const CHAT_INGRESSES = new Set(["openai-chat", "anthropic-messages", "openai-responses"]);
/** Ingress formats that serve image models only (chat models are a 400 there). */
const IMAGE_INGRESSES = new Set(["openai-images"]);

/** `GET /v1/models/{id}` for an id that is not in the catalog (or not allowed for the key). */
class ModelNotFoundError extends GatewayError {
  override readonly status = 404;
  override readonly type = "invalid_request_error";
  override readonly code = "model_not_found";
}

export default definePlugin({
  name: "catalog",
  requires: ["auth"],
  configSchema: CatalogConfigSchema,
  setup(config, host) {
    const file = resolve(process.cwd(), config.file ?? DEFAULT_CATALOG_FILE);
    const catalog = loadCatalog(file);
    const auth = host.service("auth");
    host.log.info("catalog loaded", { file, models: catalog.all().length });

    /** The router: the catalog entry of the request's model and the provider that serves it. */
    function resolveModel(ctx: GatewayContext): void {
      const id = ctx.request.model;
      const model = catalog.get(id);
      if (!model) throw unknownModel(catalog, id);
      if (model.kind === "image" && CHAT_INGRESSES.has(ctx.ingress.name)) {
        throw new InvalidRequestError(
          `The model \`${model.id}\` is an image model; it is served only at POST /v1/images/generations.`,
          { param: "model" },
        );
      }
      if (model.kind !== "image" && IMAGE_INGRESSES.has(ctx.ingress.name)) {
        const images = catalog.all().filter((entry) => entry.kind === "image").map((entry) => entry.id);
        throw new InvalidRequestError(
          `The model \`${model.id}\` is a chat model; POST /v1/images/generations serves image models only (${images.join(", ")}).`,
          { param: "model" },
        );
      }
      ctx.model = model;
      ctx.target = { provider: model.provider, upstreamModel: model.upstream_model };
      if (model.fallbacks !== undefined && model.fallbacks.length > 0) ctx.fallbacks = model.fallbacks;
    }

    /** The request goes to a fallback model (or back to the one it came from): the route, the answer's `model`, the header. */
    function fallBack(ctx: GatewayContext, id: string): void {
      const model = catalog.get(id);
      if (!model) throw new GatewayError(`fallback model "${id}" is not in the catalog`);
      if (ctx.requestedModel === undefined) ctx.log.requested_model = ctx.requestedModel = ctx.request.model;
      ctx.request.model = model.id;
      ctx.model = model;
      ctx.target = { provider: model.provider, upstreamModel: model.upstream_model };
      ctx.responseHeaders[MODEL_HEADER] = model.id;
    }

    return {
      provides: catalog,

      onRequest(ctx) {
        resolveModel(ctx);
        ctx.responseHeaders[MODEL_HEADER] = ctx.model!.id;
      },
      onFallback: fallBack,
      // count_tokens is routed the same way: an unknown model gets the same 400.
      onLocalRequest: resolveModel,

      routes: function catalogRoutes(app: AnyElysia) {
        // The listing follows the rule requests follow: the allowlist plugin's, when it is enabled (it comes later in
        // the pipeline, but every plugin is set up before routes are mounted); without it a key calls and sees every model.
        const access = host.has("allowlist") ? host.service("allowlist") : undefined;
        app.get("/v1/models", async function listModels({ request }) {
          const principal = await auth.authenticate((request as Request).headers);
          const now = new Date();
          const data = visibleModels(catalog, principal, access).map((model) => catalog.listing(model, now));
          return { object: "list", data };
        }, { detail: listModelsDocs });

        // Wildcard: ids carry no "/", but a prefixed one (meta-llama/...) gets model_not_found, not "no such endpoint".
        app.get("/v1/models/*", async function getModel({ request, params }) {
          const principal = await auth.authenticate((request as Request).headers);
          const id = decodeId(String(params["*"] ?? ""));
          const model = catalog.get(id);
          if (!model || !allowed(principal, model.id, access)) {
            throw new ModelNotFoundError(`The model \`${clip(id)}\` does not exist or you do not have access to it.`, {
              param: "model",
            });
          }
          return catalog.listing(model, new Date());
        }, { detail: getModelDocs });
      },
    };
  },
});

/**
 * The 400 for an id that is not in the catalog. A `claude-...` id is most likely Claude Code's own default
 * (claude-opus-4-8, claude-haiku-4-5-20251001, ...): the message names the variable that replaces it.
 */
export function unknownModel(catalog: Catalog, id: string): UnknownModelError {
  const suggestion = catalog.suggest(id);
  const hint = suggestion ? ` Did you mean \`${suggestion}\`?` : "";
  return new UnknownModelError(
    `The model \`${clip(id)}\` does not exist. Model ids are case-sensitive and carry no provider prefix; see GET /v1/models.${hint}${claudeCodeHint()}`,
    { param: "model" },
  );

  function claudeCodeHint(): string {
    if (!id.startsWith("claude-")) return "";
    const roles: Record<string, string> = {
      opus: "its main model when ANTHROPIC_MODEL is not set, and its `opus` alias",
      sonnet: "its `sonnet` alias",
      haiku: "its `haiku` alias, background calls and Explore subagents",
      fable: "its `fable` alias",
    };
    const alias = Object.keys(roles).find((word) => id.includes(word));
    const chat = catalog.all().filter((model) => model.kind === "chat");
    const example = (alias && chat.find((model) => model.family === "anthropic" && model.id.includes(alias))) || chat.find((model) => model.family === "anthropic") || chat[0];
    const like = example ? ` such as ${example.id}` : "";
    const every = "docs/coding-agents.md lists every model variable Claude Code reads";
    if (!alias) return ` Claude Code: set ANTHROPIC_MODEL to a catalog id${like}; ${every}.`;
    const variable = `ANTHROPIC_DEFAULT_${alias.toUpperCase()}_MODEL`;
    const also = alias === "opus" ? " (and ANTHROPIC_MODEL)" : "";
    return ` Claude Code asks for this id when ${variable} is not set (${roles[alias]}): set it${also} to a catalog id${like}; ${every}.`;
  }
}

/** The models a key may call: every one, unless the allowlist plugin is enabled and its rule says otherwise. */
function visibleModels(catalog: Catalog, principal: Principal, access: ModelAccess | undefined): readonly CatalogModel[] {
  if (!access) return catalog.all();
  return catalog.all().filter((model) => access.allows(principal, model.id));
}

function allowed(principal: Principal, id: string, access: ModelAccess | undefined): boolean {
  return !access || access.allows(principal, id);
}

function decodeId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** Keeps echoed client input short in error messages. */
function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
