import { Elysia, StatusMap } from "elysia";
import { apiDocs, healthDocs, readyDocs } from "../openapi/index.ts";
import type { Stage } from "./pipeline.ts";
import type { Gateway, RouteAnswer } from "./plugin.ts";
import type { ServerConfig } from "./config.ts";
import type { Logger } from "./log.ts";
import { RouteLines } from "./request-line.ts";
import { REQUEST_ID_HEADER } from "./pipeline.ts";
import { unservedModels } from "./readiness.ts";
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
  // Request lines of every route outside the pipeline (the pipeline writes its own, with model and cost).
  // A hook that refuses a request throws its GatewayError (the line is written here); a Response it returns is
  // sent as it is, without a line.
  const lines = new RouteLines(log, (request) => gateway.clientIp(request));
  const observers = stages.flatMap(({ instance }) => (instance.routeAnswered ? [instance.routeAnswered.bind(instance)] : []));
  const tellObservers = (request: Request, route: string | undefined, params: unknown, status: number) => {
    for (const observe of observers) observe({ request, route, params: params as RouteAnswer["params"], status });
  };
  const app = new Elysia({ serve: { maxRequestBodySize: Math.max(2 * server.max_body_bytes, 128 * 1024 * 1024) } })
    .onRequest(function rejectOversizedBody({ request }) {
      lines.start(request);
      // Inference endpoints answer this themselves, in the client's wire format (the pipeline checks first).
      if (request.method === "POST" && pathOf(request).startsWith("/v1/")) return;
      const declared = Number(request.headers.get("content-length") ?? "0");
      if (declared > server.max_body_bytes) {
        throw new PayloadTooLargeError(`request body is ${declared} bytes; the limit is ${server.max_body_bytes} bytes`);
      }
    })
    .onError(function mapError({ code, error, request, route, params }) {
      const failure = gatewayErrorOf(code, error, log);
      lines.failed(request, failure);
      tellObservers(request, route, params, failure.status);
      return errorResponse(failure);
    })
    .onAfterHandle(function writeRequestLine({ request, set, responseValue, route, params }) {
      let status: number;
      if (responseValue instanceof Response) {
        // The pipeline's answers (they carry the request id) are logged by the pipeline, at their end.
        if (responseValue.headers.has(REQUEST_ID_HEADER)) return;
        status = responseValue.status;
        lines.answered(request, status);
      } else {
        status = typeof set.status === "number" ? set.status : ((StatusMap as Record<string, number>)[set.status ?? ""] ?? 200);
        lines.answered(request, status);
      }
      tellObservers(request, route, params, status);
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
        // Models without a usable provider (no key) leave the gateway ready: it serves every other model.
        const unserved = Object.fromEntries(Object.entries(unservedModels(stages)).map(([provider, { models }]) => [provider, models]));
        return Object.keys(unserved).length === 0 ? { status: "ready" } : { status: "ready", unserved };
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

/** What a route's failure is to the client: a GatewayError, Elysia's validation / parse / not-found, else a 500. */
function gatewayErrorOf(code: unknown, error: unknown, log: Logger): GatewayError {
  if (error instanceof GatewayError) return error;
  if (code === "VALIDATION") return validationError(error);
  if (code === "PARSE") return new InvalidRequestError("request body is not valid JSON");
  if (code === "NOT_FOUND") return new NotFoundError("no such endpoint");
  log.error("unhandled route error", { error: String((error as Error)?.stack ?? error) });
  return new GatewayError("internal error");
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
