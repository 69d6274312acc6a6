/**
 * The parts of a request's log line that every line has, whoever writes it: the pipeline for inference
 * requests (at their end, with model, cost and outcome), the app for every other route (core/app.ts). See
 * docs/operations.md for the fields.
 */

/** Longest path kept in a line: a client may send a path of megabytes. */
const MAX_PATH = 256;
/** Longest error message kept in a line. */
export const MAX_ERROR_MESSAGE = 300;

export interface RequestOrigin {
  method: string;
  path: string;
  client_ip: string;
}

/** Method, path (without the query string: its values may hold keys or tokens) and client address. */
export function requestOrigin(request: Request, clientIp: string): RequestOrigin {
  return { method: request.method, path: requestPath(request), client_ip: clientIp };
}

/** The URL's path without query string or fragment, clipped. */
export function requestPath(request: Request): string {
  const url = request.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start === -1) return "/";
  let end = url.length;
  const query = url.indexOf("?", start);
  if (query !== -1) end = query;
  const hash = url.indexOf("#", start);
  if (hash !== -1 && hash < end) end = hash;
  return clip(url.slice(start, end), MAX_PATH);
}

/** `error_code` and `error_message` (clipped) of a failure, or nulls for a success. */
export function errorFields(error: { code: string; message: string } | undefined): { error_code: string | null; error_message: string | null } {
  if (error === undefined) return { error_code: null, error_message: null };
  return { error_code: error.code, error_message: clip(error.message, MAX_ERROR_MESSAGE) };
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Fields a route adds to its request's line (what it acted on), gathered until the line is written. */
const annotations = new WeakMap<Request, Record<string, unknown>>();

/**
 * Adds fields to the request line of a route outside the pipeline (an admin route's account id, say). Core
 * fields (method, path, client_ip, status, error_*) cannot be replaced. Inference requests add theirs to `ctx.log`.
 */
export function annotateRequestLine(request: Request, fields: Record<string, unknown>): void {
  annotations.set(request, { ...annotations.get(request), ...fields });
}

export function requestLineAnnotations(request: Request): Record<string, unknown> | undefined {
  return annotations.get(request);
}

interface LineWriter {
  request(fields: Record<string, unknown>): void;
  readonly quiet?: boolean;
}

/** Probes a load balancer sends every few seconds: their successes are not worth a line each. */
const PROBES = new Set(["/health", "/ready"]);

/**
 * The request lines of routes outside the pipeline (admin, cost API, model list, docs, 404s, refusals by an
 * onRequest hook that throws): `start` when the request comes in, then `answered` or `failed` once.
 */
export class RouteLines {
  readonly #started = new WeakMap<Request, number>();

  constructor(
    private readonly log: LineWriter,
    private readonly clientIp: (request: Request) => string,
  ) {}

  start(request: Request): void {
    if (!this.log.quiet) this.#started.set(request, performance.now());
  }

  /** A route's answer (routes outside the pipeline throw their errors: those come to `failed`). */
  answered(request: Request, status: number): void {
    if (this.log.quiet) return;
    this.write(request, requestOrigin(request, this.clientIp(request)), status, undefined);
  }

  failed(request: Request, error: { status: number; code: string; message: string }): void {
    if (this.log.quiet) return;
    this.write(request, requestOrigin(request, this.clientIp(request)), error.status, error);
  }

  private latency(request: Request): number | null {
    const started = this.#started.get(request);
    return started === undefined ? null : Math.round(performance.now() - started);
  }

  private write(
    request: Request,
    origin: RequestOrigin,
    status: number,
    error: { code: string; message: string } | undefined,
  ): void {
    if (status < 400 && PROBES.has(origin.path)) return;
    const line: Record<string, unknown> = { ...origin, status, ...errorFields(error), latency_ms: this.latency(request) };
    for (const [key, value] of Object.entries(requestLineAnnotations(request) ?? {})) if (!(key in line)) line[key] = value;
    this.log.request(line);
  }
}
