/**
 * The fake OpenAI Chat Completions upstream: POST /v1/chat/completions, GET /v1/models and /v1/models/{id}.
 * Wire-format rendering lives in openai.ts; the routes register themselves (registry.ts).
 */
import {
  INVALID_API_KEY_JSON,
  MODELS_LIST_JSON,
  FAKE_MODELS,
  buildChatCompletion,
  buildModelObject,
  buildReplySpec,
  buildStreamErrorEvent,
  buildStreamEvents,
  parseDirective,
  type FakeDirective,
} from "./openai.ts";
import { baseHeaders, controlledStream, jsonResponse, openaiError, sleep, type Ctx, JSON_CT, SSE_CT } from "./server.ts";
import { registerFake } from "./registry.ts";

function hasBearer(req: Request): boolean {
  const a = req.headers.get("authorization");
  if (!a || a.length <= 7) return false;
  if (!(a.startsWith("Bearer ") || a.startsWith("bearer "))) return false;
  return a.slice(7).trim().length > 0;
}

async function chatCompletions(ctx: Ctx): Promise<Response> {
  if (!hasBearer(ctx.req)) return jsonResponse(401, INVALID_API_KEY_JSON);
  if (ctx.jsonError || !ctx.body || typeof ctx.body !== "object") {
    return openaiError(400, {
      message:
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
    });
  }
  const body = ctx.body;
  if (typeof body.model !== "string" || body.model === "") {
    return openaiError(400, { message: "you must provide a model parameter", code: null });
  }
  if (!Array.isArray(body.messages)) {
    return openaiError(400, { message: "Missing required parameter: 'messages'.", param: "messages", code: "missing_required_parameter" });
  }

  // Directive: cheap substring check on the raw body before any parsing work.
  let d: FakeDirective | null = null;
  if (ctx.rawBody.includes("[[fake")) {
    try {
      d = parseDirective(body);
    } catch (e) {
      return openaiError(400, { message: `fake upstream: ${(e as Error).message}`, code: "fake_directive_error" });
    }
  }

  const stream = body.stream === true;
  const includeUsage = stream && body.stream_options?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);

  if (d === null) {
    // Hot path: no directive.
    const spec = buildReplySpec(body, null, created);
    if (!stream) return jsonResponse(200, JSON.stringify(buildChatCompletion(spec)));
    return new Response(buildStreamEvents(spec, includeUsage).join(""), { status: 200, headers: baseHeaders(SSE_CT) });
  }

  const extraHeaders = d.headers;
  if (d.delay_ms) await sleep(d.delay_ms, ctx.signal);

  const status = d.status ?? 0;
  if (status >= 400 || (d.error !== undefined && d.stream_error_after_chunks === undefined)) {
    return openaiError(status >= 400 ? status : 500, d.error, extraHeaders);
  }

  const spec = buildReplySpec(body, d, created);

  if (!stream) {
    if (d.hang_after_chunks !== undefined) {
      // Headers go out, the body never arrives.
      return new Response(controlledStream([""], { hangAfter: 0, signal: ctx.signal }), {
        status: 200,
        headers: baseHeaders(JSON_CT, extraHeaders),
      });
    }
    return jsonResponse(200, JSON.stringify(buildChatCompletion(spec)), extraHeaders);
  }

  const events = buildStreamEvents(spec, includeUsage);
  const controlled = d.chunk_delay_ms || d.hang_after_chunks !== undefined || d.stream_error_after_chunks !== undefined || d.drop_after_chunks !== undefined;
  if (!controlled) return new Response(events.join(""), { status: 200, headers: baseHeaders(SSE_CT, extraHeaders) });
  const bodyStream = controlledStream(events, {
    chunkDelayMs: d.chunk_delay_ms,
    hangAfter: d.hang_after_chunks,
    errorAfter: d.hang_after_chunks === undefined ? d.stream_error_after_chunks : undefined,
    dropAfter: d.drop_after_chunks,
    errorEvent: buildStreamErrorEvent(d.error),
    signal: ctx.signal,
  });
  return new Response(bodyStream, { status: 200, headers: baseHeaders(SSE_CT, extraHeaders) });
}

function listModels(ctx: Ctx): Response {
  if (!hasBearer(ctx.req)) return jsonResponse(401, INVALID_API_KEY_JSON);
  return jsonResponse(200, MODELS_LIST_JSON);
}

function retrieveModel(ctx: Ctx): Response {
  if (!hasBearer(ctx.req)) return jsonResponse(401, INVALID_API_KEY_JSON);
  const id = decodeURIComponent(ctx.path.slice("/v1/models/".length).split("?")[0]!);
  if (!FAKE_MODELS.includes(id)) {
    return openaiError(404, { message: `The model '${id}' does not exist`, code: "model_not_found" });
  }
  return jsonResponse(200, JSON.stringify(buildModelObject(id)));
}

registerFake("openai-chat", [
  { method: "POST", path: "/v1/chat/completions", handler: chatCompletions },
  { method: "GET", path: "/v1/models", handler: listModels },
  { method: "GET", path: "/v1/models/", prefix: true, handler: retrieveModel },
]);
