/**
 * A controllable fake deployment for the resilience suite (issue 27): one Bun.serve per deployment, so a test
 * starts two or three of one provider and points the provider's comma-separated base URL list at them.
 *
 * Honest answers come from the shared fake upstream's routes (OpenAI chat, OpenAI Responses, Anthropic
 * Messages: registry.ts), so every wire the gateway speaks is served. What the next requests get instead is
 * scripted per test (`script(...)`, consumed in order; `fallback` when the script is empty):
 *   status (+ headers, e.g. retry-after; error body in the wire's shape, Anthropic 529 `overloaded_error`),
 *   delay before the headers, a reset after the first text reached the wire, a truncated stream (first text,
 *   then a clean end: no finish, no usage), a stream that goes silent after the first text.
 * Every request is counted, with the key it carried.
 *
 * This module registers no routes (the shared fake loads every file here: importing it has no side effects).
 */
import { loadFakes, type Ctx } from "./server.ts";
import { fakeRouteFor } from "./registry.ts";

export interface ScriptedAnswer {
  /** An error answer with this status (>= 400) in the wire's error shape; omitted: the honest answer. */
  status?: number;
  /** Extra response headers (retry-after, ...). */
  headers?: Record<string, string>;
  /** Wait this long before sending the headers (a first-byte timeout). */
  delayMs?: number;
  /** The honest answer's first text, then the connection is broken (a stream: mid-stream; JSON: mid-body). */
  resetAfterFirstText?: boolean;
  /** A stream: the first text, then a clean end of the body with no finish and no usage. */
  truncateAfterFirstText?: boolean;
  /** A stream: the first text, then silence with the connection open. */
  idleAfterFirstText?: boolean;
}

export interface DeploymentRequest {
  path: string;
  stream: boolean;
  /** The provider key carried (Bearer or x-api-key). */
  key: string;
  /** Epoch ms when it arrived. */
  at: number;
  /** The last user text (first 200 characters), to tell requests apart. */
  text: string;
}

export interface FakeDeployment {
  name: string;
  /** http://127.0.0.1:PORT (Anthropic base URL); OpenAI's is url + "/v1". */
  url: string;
  requests: DeploymentRequest[];
  /** Requests received (inference paths only). */
  readonly count: number;
  /** Requests answered right now (in flight). */
  readonly inFlight: number;
  /** Queues answers for the next requests, in order. */
  script(...answers: ScriptedAnswer[]): void;
  /** What requests get once the script is used up (default: the honest answer). */
  fallback: ScriptedAnswer;
  reset(): void;
  stop(): Promise<void>;
  /**
   * Down, keeping its port: every connection is closed as it opens (the client sees a connection error). A
   * stopped server's port could be handed to another test's server starting beside it, which would answer.
   */
  down(): Promise<void>;
}

const TEXT_MARK = /"content":"[^"]|text_delta|output_text\.delta|"text":"[^"]/;

function keyOf(req: Request): string {
  const auth = req.headers.get("authorization");
  if (auth?.startsWith("Bearer ")) return auth.slice(7);
  return req.headers.get("x-api-key") ?? "";
}

function lastUserText(body: any): string {
  const pick = (content: unknown): string =>
    typeof content === "string" ? content : Array.isArray(content) ? content.map((part: any) => part?.text ?? "").join("") : "";
  if (Array.isArray(body?.messages)) {
    const users = body.messages.filter((m: any) => m?.role === "user");
    return pick(users.at(-1)?.content).slice(0, 200);
  }
  if (typeof body?.input === "string") return body.input.slice(0, 200);
  if (Array.isArray(body?.input)) return pick(body.input.at(-1)?.content).slice(0, 200);
  return "";
}

function errorAnswer(path: string, status: number, headers: Record<string, string>): Response {
  const anthropic = path.endsWith("/messages");
  const message = `fake deployment error ${status}`;
  let body: unknown;
  if (anthropic) {
    const type =
      status === 529 ? "overloaded_error" : status === 429 ? "rate_limit_error" : status === 401 ? "authentication_error" : status === 403 ? "permission_error" : status === 400 ? "invalid_request_error" : "api_error";
    body = { type: "error", error: { type, message } };
  } else {
    const type = status === 429 ? "rate_limit_exceeded" : status === 401 ? "invalid_request_error" : status === 400 ? "invalid_request_error" : "server_error";
    body = { error: { message, type, param: null, code: status === 401 ? "invalid_api_key" : null } };
  }
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

/**
 * The honest answer's body, passed on up to its first text, then broken / ended / stalled as `mode` says. A
 * stream is cut after the first SSE frame that carries text (a finish and usage never follow); a JSON body
 * inside the text.
 */
function cutAfterFirstText(answer: Response, mode: "reset" | "truncate" | "idle", signal: AbortSignal): Response {
  const source = answer.body!.getReader();
  const isStream = (answer.headers.get("content-type") ?? "").includes("event-stream");
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let seen = "";
  let sent = 0;
  let cut = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (cut) {
        if (mode === "idle") await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
        return;
      }
      const { done, value } = await source.read();
      if (done) {
        controller.close();
        return;
      }
      seen += decoder.decode(value, { stream: true });
      const mark = seen.search(TEXT_MARK);
      let end = -1;
      if (mark >= 0) {
        if (!isStream) end = mark + 12;
        else {
          const frameEnd = seen.indexOf("\n\n", mark);
          if (frameEnd >= 0) end = frameEnd + 2;
        }
      }
      if (end < 0) {
        // No complete frame with text yet: pass on what is certainly before it (whole frames).
        const safe = isStream ? seen.lastIndexOf("\n\n") + 2 : 0;
        if (safe > sent) {
          controller.enqueue(encoder.encode(seen.slice(sent, safe)));
          sent = safe;
        }
        return;
      }
      controller.enqueue(encoder.encode(seen.slice(sent, end)));
      sent = end;
      cut = true;
      void source.cancel().catch(() => {});
      if (mode === "truncate") controller.close();
      else if (mode === "reset") setTimeout(() => controller.error(new Error("fake deployment: connection reset")), 50);
    },
    cancel() {
      void source.cancel().catch(() => {});
    },
  });
  const headers = new Headers(answer.headers);
  headers.delete("content-length");
  return new Response(body, { status: answer.status, headers });
}

export async function startFakeDeployment(name = "deployment"): Promise<FakeDeployment> {
  await loadFakes();
  const requests: DeploymentRequest[] = [];
  const queue: ScriptedAnswer[] = [];
  let inFlight = 0;
  const self = {
    fallback: {} as ScriptedAnswer,
  };
  let closer: { stop(force?: boolean): void } | undefined;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    development: false,
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const rawBody = req.method === "GET" ? "" : await req.text();
      let body: any;
      let jsonError = false;
      try {
        body = rawBody ? JSON.parse(rawBody) : undefined;
      } catch {
        jsonError = true;
      }
      const handler = fakeRouteFor(req.method, url.pathname);
      if (!handler) return new Response(JSON.stringify({ error: { message: "not found", type: "invalid_request_error" } }), { status: 404 });
      requests.push({ path: url.pathname, stream: body?.stream === true, key: keyOf(req), at: Date.now(), text: lastUserText(body) });
      const plan = queue.shift() ?? self.fallback;
      inFlight++;
      try {
        if (plan.delayMs) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, plan.delayMs);
            req.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
          });
        }
        if (plan.status !== undefined && plan.status >= 400) return errorAnswer(url.pathname, plan.status, plan.headers ?? {});
        const ctx: Ctx = { req, path: url.pathname + url.search, rawBody, body, jsonError, signal: req.signal };
        let answer = await handler(ctx);
        if (plan.headers) {
          const headers = new Headers(answer.headers);
          for (const [k, v] of Object.entries(plan.headers)) headers.set(k, v);
          answer = new Response(answer.body, { status: answer.status, headers });
        }
        if (plan.resetAfterFirstText) return cutAfterFirstText(answer, "reset", req.signal);
        if (plan.truncateAfterFirstText) return cutAfterFirstText(answer, "truncate", req.signal);
        if (plan.idleAfterFirstText) return cutAfterFirstText(answer, "idle", req.signal);
        return answer;
      } finally {
        inFlight--;
      }
    },
  });
  const base = `http://127.0.0.1:${server.port}`;
  const deployment: FakeDeployment = {
    name,
    url: base,
    requests,
    get count() {
      return requests.length;
    },
    get inFlight() {
      return inFlight;
    },
    get fallback() {
      return self.fallback;
    },
    set fallback(answer: ScriptedAnswer) {
      self.fallback = answer;
    },
    script(...answers: ScriptedAnswer[]) {
      queue.push(...answers);
    },
    reset() {
      requests.length = 0;
      queue.length = 0;
      self.fallback = {};
    },
    async stop() {
      await closer?.stop(true);
      await server.stop(true);
    },
    async down() {
      const port = Number(server.port);
      await server.stop(true);
      closer = await listenAgain(port);
    },
  };
  return deployment;
}

/**
 * A listener on the port the fake just left that cuts every connection. The stopped server's socket is released
 * a moment after `stop()` resolves (EADDRINUSE once in CI, loaded): ask again until it is free, for up to 2 s.
 */
async function listenAgain(port: number): Promise<{ stop(closeActiveConnections?: boolean): void }> {
  for (let attempt = 0; ; attempt++) {
    try {
      return Bun.listen({ hostname: "127.0.0.1", port, socket: { open: (socket) => void socket.terminate(), data() {} } });
    } catch (error) {
      if ((error as { code?: string }).code !== "EADDRINUSE" || attempt >= 100) throw error;
      await Bun.sleep(20);
    }
  }
}
