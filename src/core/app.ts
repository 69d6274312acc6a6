import { Elysia } from "elysia";
import { apiDocs, healthDocs, readyDocs } from "../openapi/index.ts";
import type { Stage } from "./pipeline.ts";
import type { Gateway } from "./plugin.ts";
import type { ServerConfig } from "./config.ts";
import type { Logger } from "./log.ts";
import {
  GatewayError,
  InvalidRequestError,
  NotFoundError,
  PayloadTooLargeError,
  errorResponse,
} from "./errors.ts";

/** The Elysia app: health, docs, error mapping, the body limit, and every plugin's routes. */
export function createApp(stages: Stage[], gateway: Gateway, server: ServerConfig, log: Logger) {
  // Bun's own limit is only a backstop for bodies without content-length: ours answers first, with an error body.
  const app = new Elysia({ serve: { maxRequestBodySize: Math.max(2 * server.max_body_bytes, 128 * 1024 * 1024) } })
    .onRequest(function rejectOversizedBody({ request }) {
      // Inference endpoints answer this themselves, in the client's wire format (the pipeline checks first).
      if (request.method === "POST" && pathOf(request).startsWith("/v1/")) return;
      const declared = Number(request.headers.get("content-length") ?? "0");
      if (declared > server.max_body_bytes) {
        return errorResponse(new PayloadTooLargeError(`request body is ${declared} bytes; the limit is ${server.max_body_bytes} bytes`));
      }
    })
    .onError(function mapError({ code, error }) {
      if (error instanceof GatewayError) return errorResponse(error);
      if (code === "VALIDATION") return errorResponse(validationError(error));
      if (code === "PARSE") return errorResponse(new InvalidRequestError("request body is not valid JSON"));
      if (code === "NOT_FOUND") return errorResponse(new NotFoundError("no such endpoint"));
      log.error("unhandled route error", { error: String((error as Error)?.stack ?? error) });
      return errorResponse(new GatewayError("internal error"));
    })
    .use(apiDocs())
    .get("/health", () => ({ status: "ok" }), { detail: healthDocs })
    .get(
      "/ready",
      async function readiness({ set }) {
        for (const { name, instance } of stages) {
          const ok = instance.ready ? await Promise.resolve(instance.ready()).catch(() => false) : true;
          if (!ok) {
            set.status = 503;
            return { status: "unavailable", plugin: name };
          }
        }
        return { status: "ready" };
      },
      { detail: readyDocs },
    );
  for (const { instance } of stages) instance.routes?.(app, gateway);
  return app;
}

/** The path of a request URL without parsing the whole URL (this runs on every request). */
export function pathOf(request: Request): string {
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  return start === -1 ? "/" : url.slice(start);
}

/** The client's address as Bun sees it. */
export function clientAddress(server: { requestIP(request: Request): { address: string } | null } | null, request: Request): string {
  return server?.requestIP(request)?.address ?? "unknown";
}

function validationError(error: unknown): InvalidRequestError {
  const detail = error as { all?: { path?: string; summary?: string; message?: string; schema?: { error?: unknown } }[] };
  const first = detail.all?.[0];
  if (first) {
    const field = (first.path ?? "").replace(/^\//, "").replaceAll("/", ".") || "body";
    // A schema's own `error` text (e.g. the allowed values of a union) says more than the generic summary.
    const custom = typeof first.schema?.error === "string" ? first.schema.error : undefined;
    const message = `invalid ${field}: ${custom ?? first.summary ?? first.message ?? "does not match the schema"}`;
    return new InvalidRequestError(message, { param: field === "body" ? undefined : field });
  }
  return new InvalidRequestError("request does not match the schema");
}
