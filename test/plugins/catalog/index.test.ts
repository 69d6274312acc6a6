import { describe, expect, it } from "bun:test";
import { join } from "node:path";
import { Elysia } from "elysia";
import catalogPlugin from "../../../src/plugins/catalog/index.ts";
import allowlistPlugin from "../../../src/plugins/allowlist/index.ts";
import type { GatewayContext } from "../../../src/core/context.ts";
import type { WireFormat } from "../../../src/core/format.ts";
import type { PluginHost } from "../../../src/core/plugin.ts";
import type { Logger } from "../../../src/core/log.ts";
import {
  AuthenticationError,
  GatewayError,
  InvalidRequestError,
  UnknownModelError,
  errorResponse,
} from "../../../src/core/errors.ts";
import type { Principal } from "../../../src/plugins/auth/principal.ts";

const KEYS: Record<string, string[] | null> = { "sk-all": null, "sk-two": ["gpt-6-luna", "llama-4-scout-17b-16e-instruct"] };

function principal(models: string[] | null): Principal {
  return { accountId: "acct", key: { models } } as unknown as Principal;
}

const silent: Logger = {
  info() {},
  warn() {},
  error() {},
  request() {},
  child: () => silent,
};

const auth = {
  async authenticate(headers: Headers) {
    const key = headers.get("authorization")?.replace(/^Bearer /, "") ?? "";
    if (!(key in KEYS)) throw new AuthenticationError("Invalid API key.");
    return principal(KEYS[key]);
  },
  forget() {},
};

/** The real allowlist plugin's rule: the catalog's listings ask it when the plugin is enabled. */
const allowlist = (await allowlistPlugin.setup({}, {} as PluginHost)).provides;

/** A host with auth, and with the allowlist plugin when `withAllowlist`. */
function hostWith(withAllowlist: boolean): PluginHost {
  const services: Record<string, unknown> = withAllowlist ? { auth, allowlist } : { auth };
  return {
    configFile: "plugins-config.yaml",
    log: silent,
    has: (name: string) => name in services,
    service(name: string) {
      if (!(name in services)) throw new Error(`no ${name}`);
      return services[name];
    },
  } as unknown as PluginHost;
}

const catalogFile = join(import.meta.dir, "../../../catalog.yaml");
const instance = await catalogPlugin.setup({ file: catalogFile }, hostWith(true));

function context(model: string, ingress = "openai-chat"): GatewayContext {
  return { request: { model }, ingress: { name: ingress } as WireFormat, responseHeaders: {}, log: {} } as unknown as GatewayContext;
}

function app(plugin = instance) {
  const server = new Elysia().onError(({ error }) => (error instanceof GatewayError ? errorResponse(error) : undefined));
  plugin.routes!(server, {} as never);
  return server;
}

async function get(path: string, key?: string, plugin = instance) {
  const headers = key ? { authorization: `Bearer ${key}` } : undefined;
  const response = await app(plugin).handle(new Request(`http://localhost${path}`, { headers }));
  return { status: response.status, body: (await response.json()) as any };
}

describe("catalog plugin", () => {
  it("provides the catalog", () => {
    expect(instance.provides?.get("gpt-6-luna")?.id).toBe("gpt-6-luna");
  });

  it("sets ctx.model and the target for a known model", () => {
    const ctx = context("llama-4-scout-17b-16e-instruct");
    instance.onRequest!(ctx);
    expect(ctx.model?.id).toBe("llama-4-scout-17b-16e-instruct");
    // The id carries no provider prefix; the upstream's own name keeps Groq's.
    expect(ctx.target).toEqual({ provider: "groq", upstreamModel: "meta-llama/llama-4-scout-17b-16e-instruct" });
    expect(ctx.responseHeaders["x-gateway-model"]).toBe("llama-4-scout-17b-16e-instruct");
    expect(ctx.fallbacks).toBeUndefined();
  });

  it("rejects ids with another case or a provider prefix as unknown models", () => {
    for (const id of ["openai/gpt-6-luna", "GPT-6-LUNA", "meta-llama/llama-4-scout-17b-16e-instruct"]) {
      let thrown: unknown;
      try {
        instance.onRequest!(context(id));
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(UnknownModelError);
      const error = thrown as UnknownModelError;
      expect(error.code).toBe("model_not_found");
      expect(error.param).toBe("model");
      expect(error.message).toStartWith(`The model \`${id}\` does not exist. Model ids are case-sensitive`);
      expect(error.message).toContain(`Did you mean \`${id.startsWith("meta-llama/") ? "llama-4-scout-17b-16e-instruct" : "gpt-6-luna"}\`?`);
    }
  });

  it("rejects the image model on chat ingresses only", () => {
    for (const ingress of ["openai-chat", "anthropic-messages"]) {
      expect(() => instance.onRequest!(context("gpt-image-2.6-sunburst", ingress))).toThrow(InvalidRequestError);
    }
    expect(() => instance.onRequest!(context("gpt-image-2.6-sunburst", "openai-chat"))).toThrow(/\/v1\/images\/generations/);
    const ctx = context("gpt-image-2.6-sunburst", "openai-images");
    instance.onRequest!(ctx);
    expect(ctx.target).toEqual({ provider: "openai", upstreamModel: "gpt-image-2.6-sunburst" });
  });
});

describe("GET /v1/models", () => {
  it("needs an API key", async () => {
    const { status, body } = await get("/v1/models");
    expect(status).toBe(401);
    expect(body.error.code).toBe("invalid_api_key");
  });

  it("lists every model for a key without an allowlist", async () => {
    const { status, body } = await get("/v1/models", "sk-all");
    expect(status).toBe(200);
    expect(body.object).toBe("list");
    expect(body.data).toHaveLength(40);
    const luna = body.data.find((m: { id: string }) => m.id === "gpt-6-luna");
    expect(luna).toMatchObject({ object: "model", owned_by: "openai", pricing: { prompt: "0.0000001" } });
  });

  it("lists only the key's allowlist", async () => {
    const { body } = await get("/v1/models", "sk-two");
    expect(body.data.map((m: { id: string }) => m.id)).toEqual(["gpt-6-luna", "llama-4-scout-17b-16e-instruct"]);
  });

  it("lists and shows every model to a limited key when the allowlist plugin is not enabled", async () => {
    const withoutAllowlist = await catalogPlugin.setup({ file: catalogFile }, hostWith(false));
    expect((await get("/v1/models", "sk-two", withoutAllowlist)).body.data).toHaveLength(40);
    expect((await get("/v1/models/claude-opus-5-5", "sk-two", withoutAllowlist)).status).toBe(200);
  });
});

describe("GET /v1/models/:id", () => {
  it("returns one model; a provider-prefixed id is model_not_found, slashed or encoded", async () => {
    const plain = await get("/v1/models/gpt-6-luna", "sk-two");
    expect(plain.status).toBe(200);
    expect(plain.body.id).toBe("gpt-6-luna");
    const llama = await get("/v1/models/llama-4-scout-17b-16e-instruct", "sk-two");
    expect(llama.status).toBe(200);
    expect(llama.body.id).toBe("llama-4-scout-17b-16e-instruct");
    for (const path of ["/v1/models/meta-llama/llama-4-scout-17b-16e-instruct", "/v1/models/meta-llama%2Fllama-4-scout-17b-16e-instruct"]) {
      const prefixed = await get(path, "sk-two");
      expect(prefixed.status).toBe(404);
      expect(prefixed.body.error.code).toBe("model_not_found");
    }
  });

  it("answers 404 model_not_found for unknown or disallowed models", async () => {
    for (const path of ["/v1/models/nope", "/v1/models/GPT-6-LUNA", "/v1/models/claude-opus-5-5"]) {
      const { status, body } = await get(path, "sk-two");
      expect(status).toBe(404);
      expect(body.error).toMatchObject({ type: "invalid_request_error", code: "model_not_found", param: "model" });
    }
    expect((await get("/v1/models/claude-opus-5-5", "sk-all")).status).toBe(200);
  });
});
