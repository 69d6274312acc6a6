/**
 * OpenAI Responses API (`POST /v1/responses`) for the fake upstream:
 * https://platform.openai.com/docs/api-reference/responses, as api.openai.com answers it (response object, SSE with
 * `event:` lines and sequence numbers, reasoning items with encrypted content, function_call and custom_tool_call
 * items, usage with details and total_tokens).
 *
 * Scenario control: the same `[[fake {json}]]` directive as openai.ts, in the LAST user message of
 * `input` (or the `input` string). Responses-specific keys:
 *   reasoning: "summary text"           a reasoning item first (encrypted_content when include asks for it)
 *   tool_calls: [{name, arguments}]     function_call items; [{name, input}] custom_tool_call items (raw input)
 *   finish_reason: "length" | "content_filter"   → status incomplete with that reason
 *   stream_error_after_chunks: n        n events, then `response.failed` (error inside response.error), close
 * usage keys: prompt_tokens|input_tokens, completion_tokens|output_tokens, cached_tokens, cache_write_tokens,
 * reasoning_tokens, total_tokens. Everything else (status/error, delays, hang, no_usage, headers) as openai.ts.
 *
 * Like OpenAI it refuses previous_response_id (nothing is stored), a function_call_output whose call_id has no
 * function_call before it, and reasoning encrypted_content it did not issue for this model.
 */
import { controlledStream, jsonResponse, sleep, type Ctx } from "./server.ts";
import { registerFake } from "./registry.ts";
import {
  INVALID_API_KEY_JSON,
  buildErrorBody,
  countWords,
  defaultReplyText,
  messageText,
  parseDirective,
  splitArguments,
  splitTextForStream,
  type FakeDirective,
} from "./openai.ts";

export interface ResponsesDirective extends Omit<FakeDirective, "usage" | "tool_calls" | "after_tool_result"> {
  /** Replaces this directive once a function_call_output / custom_tool_call_output item follows its message. */
  after_tool_result?: ResponsesDirective;
  reasoning?: string;
  tool_calls?: { name: string; arguments?: unknown; input?: string }[];
  usage?: FakeDirective["usage"] & { input_tokens?: number; output_tokens?: number };
}

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens?: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

type Json = Record<string, any>;

// ---------------------------------------------------------------------------------------------
// Deterministic token counting (exported so tests compute exact costs)
// ---------------------------------------------------------------------------------------------

function inputItems(body: any): Json[] {
  if (typeof body?.input === "string") return [{ type: "message", role: "user", content: body.input }];
  return Array.isArray(body?.input) ? body.input : [];
}

/** The text an input item contributes to the prompt count. */
function itemText(item: Json): string {
  switch (item?.type ?? "message") {
    case "message":
      return messageText(item.content);
    case "function_call":
      return String(item.name ?? "") + String(item.arguments ?? "");
    case "custom_tool_call":
      return String(item.name ?? "") + String(item.input ?? "");
    case "function_call_output":
    case "custom_tool_call_output":
      return messageText(item.output);
    case "reasoning":
      return messageText(item.summary);
    default:
      return "";
  }
}

/**
 * Input tokens of a Responses body: ceil(C / 4) + 3 * M, where C is the string length of `instructions` plus
 * the text of every input item (message text parts, function_call name + arguments, custom_tool_call name +
 * input, tool output text, reasoning summaries) and M is the number of items (+1 for non-empty instructions).
 */
export function countResponsesInputTokens(body: any): number {
  const items = inputItems(body);
  let chars = typeof body?.instructions === "string" ? body.instructions.length : 0;
  for (const item of items) chars += itemText(item).length;
  const messages = items.length + (typeof body?.instructions === "string" && body.instructions !== "" ? 1 : 0);
  return Math.ceil(chars / 4) + 3 * messages;
}

/** The directive in the last user message of `input` (the `input` string counts as one). */
export function parseResponsesDirective(body: any): ResponsesDirective | null {
  const items = inputItems(body);
  const at = items.findLastIndex((item) => (item?.type ?? "message") === "message" && item.role === "user");
  if (at < 0) return null;
  const directive = parseDirective({ messages: [{ role: "user", content: items[at]!.content }] }) as ResponsesDirective | null;
  const after = directive?.after_tool_result;
  const answered = items.slice(at + 1).some((item) => item?.type === "function_call_output" || item?.type === "custom_tool_call_output");
  return after && typeof after === "object" && answered ? after : directive;
}

interface ReplyToolCall {
  callId: string;
  name: string;
  /** function_call arguments (JSON text), or the raw input of a custom_tool_call. */
  arguments: string;
  custom: boolean;
}

function replyToolCalls(directive: ResponsesDirective | null): ReplyToolCall[] {
  return (directive?.tool_calls ?? []).map((call, index) => {
    const custom = typeof call.input === "string";
    const args = custom ? call.input! : typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {});
    return { callId: `call_fake${index}`, name: String(call.name), arguments: args, custom };
  });
}

function replyText(body: any, directive: ResponsesDirective | null): string | null {
  if (directive?.text !== undefined) return directive.text;
  if (directive?.tool_calls && directive.tool_calls.length > 0) return null;
  return defaultReplyText(String(body?.model ?? ""));
}

/**
 * Usage for a reply: output_tokens = words(text) + 1 + Σ ceil((name + arguments) / 4) + reasoning tokens, where
 * reasoning tokens = words(reasoning summary) unless the directive sets them. Directive keys override one by one.
 */
export function computeResponsesUsage(body: any, directive?: ResponsesDirective | null): ResponsesUsage {
  const d = directive ?? null;
  const text = replyText(body, d);
  const u = d?.usage ?? {};
  const reasoning = u.reasoning_tokens ?? (d?.reasoning ? countWords(d.reasoning) : 0);
  let output = (text ? countWords(text) : 0) + 1 + reasoning;
  for (const call of replyToolCalls(d)) output += Math.ceil((call.name.length + call.arguments.length) / 4);
  const input = u.input_tokens ?? u.prompt_tokens ?? countResponsesInputTokens(body);
  const outputTokens = u.output_tokens ?? u.completion_tokens ?? output;
  const details: ResponsesUsage["input_tokens_details"] = { cached_tokens: u.cached_tokens ?? 0 };
  if (u.cache_write_tokens !== undefined) details.cache_write_tokens = u.cache_write_tokens;
  return {
    input_tokens: input,
    input_tokens_details: details,
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: u.total_tokens ?? input + outputTokens,
  };
}

// ---------------------------------------------------------------------------------------------
// Reply construction
// ---------------------------------------------------------------------------------------------

let counter = 0;
const PREFIX = Math.random().toString(36).slice(2, 8);
const nextId = (kind: string) => `${kind}_fake${PREFIX}${(++counter).toString(36)}`;

/** Encrypted reasoning the fake issues: bound to the model, like OpenAI's. */
export function fakeEncryptedContent(model: string): string {
  return `fake_enc.${Buffer.from(model).toString("base64url")}.${(++counter).toString(36)}`;
}

function issuedFor(encrypted: string, model: string): boolean {
  return encrypted.startsWith(`fake_enc.${Buffer.from(model).toString("base64url")}.`);
}

interface Reply {
  response: Json;
  /** The output items, complete. */
  items: Json[];
}

function buildReply(body: any, directive: ResponsesDirective | null): Reply {
  const model = String(body.model);
  const items: Json[] = [];
  if (directive?.reasoning !== undefined) {
    const item: Json = { type: "reasoning", id: nextId("rs"), summary: [{ type: "summary_text", text: directive.reasoning }] };
    if (Array.isArray(body.include) && body.include.includes("reasoning.encrypted_content")) item.encrypted_content = fakeEncryptedContent(model);
    items.push(item);
  }
  const text = replyText(body, directive);
  if (text !== null) {
    items.push({ type: "message", id: nextId("msg"), status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [], logprobs: [] }] });
  }
  for (const call of replyToolCalls(directive)) {
    items.push(
      call.custom
        ? { type: "custom_tool_call", id: nextId("ctc"), status: "completed", call_id: call.callId, name: call.name, input: call.arguments }
        : { type: "function_call", id: nextId("fc"), status: "completed", call_id: call.callId, name: call.name, arguments: call.arguments },
    );
  }
  const reason = directive?.finish_reason;
  const incomplete = reason === "length" ? "max_output_tokens" : reason === "content_filter" ? "content_filter" : null;
  const response: Json = {
    id: nextId("resp"),
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: incomplete ? "incomplete" : "completed",
    error: null,
    incomplete_details: incomplete ? { reason: incomplete } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model,
    output: items,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: body.reasoning ?? { effort: null, summary: null },
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: body.text ?? { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: "disabled",
    usage: directive?.no_usage ? null : computeResponsesUsage(body, directive),
    metadata: body.metadata ?? {},
  };
  return { response, items };
}

/**
 * The SSE events of a streamed reply, in api.openai.com's order
 * (https://platform.openai.com/docs/api-reference/responses-streaming), the terminal event last.
 */
export function buildResponsesStreamEvents(reply: Reply): string[] {
  const events: string[] = [];
  let sequence = 0;
  const emit = (type: string, payload: Json) => events.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...payload })}\n\n`);
  const inProgress = { ...reply.response, status: "in_progress", incomplete_details: null, output: [], usage: null };
  emit("response.created", { response: inProgress });
  emit("response.in_progress", { response: inProgress });
  reply.items.forEach((item, outputIndex) => {
    const at = { item_id: item.id, output_index: outputIndex };
    if (item.type === "reasoning") {
      const text = item.summary[0].text as string;
      emit("response.output_item.added", { output_index: outputIndex, item: { type: "reasoning", id: item.id, summary: [] } });
      emit("response.reasoning_summary_part.added", { ...at, summary_index: 0, part: { type: "summary_text", text: "" } });
      for (const delta of splitTextForStream(text)) emit("response.reasoning_summary_text.delta", { ...at, summary_index: 0, delta });
      emit("response.reasoning_summary_text.done", { ...at, summary_index: 0, text });
      emit("response.reasoning_summary_part.done", { ...at, summary_index: 0, part: { type: "summary_text", text } });
    } else if (item.type === "message") {
      const text = item.content[0].text as string;
      emit("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", content: [] } });
      emit("response.content_part.added", { ...at, content_index: 0, part: { type: "output_text", text: "", annotations: [], logprobs: [] } });
      for (const delta of splitTextForStream(text)) emit("response.output_text.delta", { ...at, content_index: 0, delta, logprobs: [] });
      emit("response.output_text.done", { ...at, content_index: 0, text, logprobs: [] });
      emit("response.content_part.done", { ...at, content_index: 0, part: item.content[0] });
    } else if (item.type === "function_call") {
      emit("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", arguments: "" } });
      for (const delta of splitArguments(item.arguments)) emit("response.function_call_arguments.delta", { ...at, delta });
      emit("response.function_call_arguments.done", { ...at, name: item.name, arguments: item.arguments });
    } else {
      emit("response.output_item.added", { output_index: outputIndex, item: { ...item, input: "" } });
      for (const delta of splitArguments(item.input)) emit("response.custom_tool_call_input.delta", { ...at, delta });
      emit("response.custom_tool_call_input.done", { ...at, input: item.input });
    }
    emit("response.output_item.done", { output_index: outputIndex, item });
  });
  emit(reply.response.status === "incomplete" ? "response.incomplete" : "response.completed", { response: reply.response });
  return events;
}

/** `response.failed` with the error inside response.error (what OpenAI sends mid-stream). */
function failedEvent(reply: Reply, err: FakeDirective["error"], sequence: number): string {
  const error = buildErrorBody(500, err).error;
  const response = { ...reply.response, status: "failed", output: [], usage: null, error: { code: error.code ?? "server_error", message: error.message } };
  return `event: response.failed\ndata: ${JSON.stringify({ type: "response.failed", sequence_number: sequence, response })}\n\n`;
}

// ---------------------------------------------------------------------------------------------
// Handler
// ---------------------------------------------------------------------------------------------

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "openai-version": "2020-10-01" };

function error(status: number, err: FakeDirective["error"], headers?: Record<string, string>): Response {
  return jsonResponse(status, JSON.stringify(buildErrorBody(status, err)), headers);
}

/** What OpenAI refuses in a stateless request (400), or null. */
function refusal(body: Json): Response | null {
  if (typeof body.model !== "string" || body.model === "") return error(400, { message: "Missing required parameter: 'model'.", param: "model", code: "missing_required_parameter" });
  if (typeof body.input !== "string" && !Array.isArray(body.input)) return error(400, { message: "Missing required parameter: 'input'.", param: "input" });
  if (typeof body.previous_response_id === "string") {
    return error(400, { message: `Previous response with id '${body.previous_response_id}' not found.`, param: "previous_response_id", code: "previous_response_not_found" });
  }
  const calls = new Set<string>();
  for (const item of inputItems(body)) {
    if (item?.type === "function_call" || item?.type === "custom_tool_call") calls.add(String(item.call_id));
    if ((item?.type === "function_call_output" || item?.type === "custom_tool_call_output") && !calls.has(String(item.call_id))) {
      return error(400, { message: `No tool call found for function call output with call_id ${item.call_id}.`, param: "input" });
    }
    if (item?.type === "reasoning" && typeof item.encrypted_content === "string" && !issuedFor(item.encrypted_content, body.model)) {
      return error(400, { message: "The encrypted content could not be verified.", code: "invalid_encrypted_content", param: "input" });
    }
  }
  return null;
}

export async function handleResponses(ctx: Ctx): Promise<Response> {
  const auth = ctx.req.headers.get("authorization") ?? "";
  if (!/^bearer \S+/i.test(auth)) return jsonResponse(401, INVALID_API_KEY_JSON);
  if (ctx.jsonError || !ctx.body || typeof ctx.body !== "object") return error(400, { message: "We could not parse the JSON body of your request." });
  const body = ctx.body as Json;
  const refused = refusal(body);
  if (refused) return refused;
  let directive: ResponsesDirective | null = null;
  if (ctx.rawBody.includes("[[fake")) {
    try {
      directive = parseResponsesDirective(body);
    } catch (e) {
      return error(400, { message: `fake upstream: ${(e as Error).message}`, code: "fake_directive_error" });
    }
  }
  const headers = directive?.headers;
  if (directive?.delay_ms) await sleep(directive.delay_ms, ctx.signal);
  const status = directive?.status ?? 0;
  if (status >= 400 || (directive?.error !== undefined && directive.stream_error_after_chunks === undefined)) {
    return error(status >= 400 ? status : 500, directive?.error, headers);
  }
  const reply = buildReply(body, directive);
  if (body.stream !== true) return jsonResponse(200, JSON.stringify(reply.response), headers);
  const events = buildResponsesStreamEvents(reply);
  const controlled = directive?.chunk_delay_ms || directive?.hang_after_chunks !== undefined || directive?.stream_error_after_chunks !== undefined;
  const sseHeaders = { ...SSE_HEADERS, ...headers };
  if (!controlled) return new Response(events.join(""), { status: 200, headers: sseHeaders });
  const stream = controlledStream(events, {
    chunkDelayMs: directive!.chunk_delay_ms,
    hangAfter: directive!.hang_after_chunks,
    errorAfter: directive!.hang_after_chunks === undefined ? directive!.stream_error_after_chunks : undefined,
    errorEvent: failedEvent(reply, directive!.error, directive!.stream_error_after_chunks ?? 0),
    signal: ctx.signal,
  });
  return new Response(stream, { status: 200, headers: sseHeaders });
}

registerFake("openai-responses", [{ method: "POST", path: "/v1/responses", handler: handleResponses }]);
