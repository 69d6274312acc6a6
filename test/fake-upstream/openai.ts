/**
 * OpenAI Chat Completions wire format for the fake upstream.
 *
 * Pure functions only (plus a few small memo caches): request → token counts / directive,
 * reply spec → response JSON object or SSE event strings. No I/O here; see server.ts.
 *
 * Shapes follow OpenAI's API reference, https://platform.openai.com/docs/api-reference/chat/create (api.openai.com
 * behaviour).
 */

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

export interface OpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; audio_tokens: number; cache_write_tokens?: number };
  completion_tokens_details: {
    reasoning_tokens: number;
    audio_tokens: number;
    accepted_prediction_tokens: number;
    rejected_prediction_tokens: number;
  };
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** `[[fake {...}]]` directive found in the last user message. All keys optional. */
export interface FakeDirective {
  /** Exact usage numbers to report. Missing keys fall back to the deterministic defaults. */
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    total_tokens?: number; // default prompt_tokens + completion_tokens
    cached_tokens?: number;
    cache_write_tokens?: number; // → prompt_tokens_details.cache_write_tokens (key only present when given)
    reasoning_tokens?: number;
  };
  /** Reply text (replaces "Hello from <model>."). */
  text?: string;
  /** Answer with this HTTP status and an OpenAI error body (status >= 400). */
  status?: number;
  /** Error message string or partial `{message, type, param, code}`. Used for the HTTP error and for stream_error_after_chunks. */
  error?: string | { message?: string; type?: string; param?: string | null; code?: string | null };
  /** Wait before sending response headers. */
  delay_ms?: number;
  /** Wait between SSE events. */
  chunk_delay_ms?: number;
  /** Assistant tool calls; `arguments` may be an object (JSON-stringified) or a string (sent verbatim). */
  tool_calls?: { name: string; arguments?: unknown }[];
  /** Never send usage (non-stream: no `usage` key; stream: no usage chunk and no `usage` keys). */
  no_usage?: boolean;
  /** Send `"usage": null` where usage belongs (non-stream: the body's key; stream: every chunk and the usage chunk). */
  usage_null?: boolean;
  /** Send the first n SSE events then stall forever without closing. Non-stream: send headers, stall the body. */
  hang_after_chunks?: number;
  /** Send the first n SSE events, then `data: {"error":{...}}` and close (no [DONE]). */
  stream_error_after_chunks?: number;
  /** Chat streams: send the first n SSE events, then (20 ms later) drop the connection: the body never ends properly. */
  drop_after_chunks?: number;
  /** Override finish_reason. */
  finish_reason?: string;
  /** Extra response headers (e.g. {"retry-after":"1"}). */
  headers?: Record<string, string>;
  /**
   * Replaces this directive once a tool result follows the message holding it (a `tool` message in Chat, a
   * function_call_output item in Responses, a tool_result block in Messages): scripts a tool loop, e.g.
   * `{"tool_calls":[...], "after_tool_result":{"text":"done"}}` asks for the call, then answers text.
   */
  after_tool_result?: FakeDirective;
}

export interface ToolCallSpec {
  id: string;
  name: string;
  arguments: string;
}

/** Everything needed to render one reply, in either the non-stream or stream form. */
export interface ChatReplySpec {
  id: string;
  created: number;
  model: string;
  /** Assistant content; null when the reply only has tool calls. */
  text: string | null;
  toolCalls: ToolCallSpec[];
  finishReason: string;
  /** null → omit usage entirely (no_usage), or send it as null (usageNull). */
  usage: OpenAIUsage | null;
  usageNull?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Deterministic token counting (exported so tests can compute expected usage / costs)
// ---------------------------------------------------------------------------------------------

/** Text of one message's `content`: a string, or the concatenated `text` of array parts (other parts ignored). */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    let s = "";
    for (const part of content) {
      if (part && typeof part === "object" && typeof (part as any).text === "string") s += (part as any).text;
    }
    return s;
  }
  return "";
}

/**
 * Prompt tokens for a Chat Completions request body:
 *
 *   prompt_tokens = ceil(C / 4) + 3 * M
 *
 * where M = messages.length and C = total JS string length (UTF-16 code units) of every message's text content:
 * a string `content` counts fully; an array `content` counts the `text` field of each part that has one
 * (`{type:"text"}` parts); images/audio/files, `tool_calls`, `name`, `tools`, etc. count 0.
 * The `[[fake ...]]` directive text itself is part of the content and IS counted.
 */
export function countPromptTokens(body: any): number {
  const messages = body?.messages;
  if (!Array.isArray(messages)) return 0;
  let chars = 0;
  for (const m of messages) chars += messageText(m?.content).length;
  return Math.ceil(chars / 4) + 3 * messages.length;
}

/** Number of whitespace-separated words (no regex: this is on the hot path). */
export function countWords(text: string): number {
  let n = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const ws = c === 32 || (c >= 9 && c <= 13) || c === 160 || c === 0x2028 || c === 0x2029 || c === 0xfeff;
    if (ws) inWord = false;
    else if (!inWord) {
      inWord = true;
      n++;
    }
  }
  return n;
}

/**
 * Completion tokens for a reply:
 *
 *   completion_tokens = words(text) + 1 + Σ over tool calls ceil((name.length + arguments.length) / 4)
 *
 * words(text) = number of whitespace-separated words (0 for null/empty text).
 * Default reply "Hello from gpt-4o." → 3 + 1 = 4.
 */
export function countCompletionTokens(text: string | null, toolCalls?: { name: string; arguments: string }[]): number {
  let n = (text ? countWords(text) : 0) + 1;
  if (toolCalls) for (const tc of toolCalls) n += Math.ceil((tc.name.length + tc.arguments.length) / 4);
  return n;
}

/** Default reply text. */
export function defaultReplyText(model: string): string {
  return `Hello from ${model}.`;
}

export function makeUsage(
  prompt: number,
  completion: number,
  extra?: { cached_tokens?: number; cache_write_tokens?: number; reasoning_tokens?: number; total_tokens?: number },
): OpenAIUsage {
  const promptDetails: OpenAIUsage["prompt_tokens_details"] = { cached_tokens: extra?.cached_tokens ?? 0, audio_tokens: 0 };
  if (extra?.cache_write_tokens !== undefined) promptDetails.cache_write_tokens = extra.cache_write_tokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: extra?.total_tokens ?? prompt + completion,
    prompt_tokens_details: promptDetails,
    completion_tokens_details: {
      reasoning_tokens: extra?.reasoning_tokens ?? 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/**
 * The usage the fake reports for `body` (exactly what both the non-stream response and the stream usage chunk carry,
 * unless `no_usage`). Directive `usage` keys override the defaults one by one.
 */
export function computeUsage(body: any, directive?: FakeDirective | null): OpenAIUsage {
  const text = replyText(body, directive);
  const toolCalls = directive?.tool_calls ? normalizeToolCalls(directive.tool_calls) : undefined;
  const u = directive?.usage ?? {};
  const prompt = u.prompt_tokens ?? countPromptTokens(body);
  const completion = u.completion_tokens ?? countCompletionTokens(text, toolCalls);
  return makeUsage(prompt, completion, u);
}

// ---------------------------------------------------------------------------------------------
// Directive parsing: `[[fake {json}]]` in the LAST user message's text
// ---------------------------------------------------------------------------------------------

const DIRECTIVE_OPEN = "[[fake";

/** Finds and parses the directive. Returns null when absent. Throws Error on malformed JSON. */
export function parseDirective(body: any): FakeDirective | null {
  const messages = body?.messages;
  if (!Array.isArray(messages)) return null;
  let text: string | null = null;
  let at = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "user") {
      text = messageText(messages[i].content);
      at = i;
      break;
    }
  }
  if (!text) return null;
  const directive = parseDirectiveText(text);
  const after = directive?.after_tool_result;
  if (after && typeof after === "object" && messages.slice(at + 1).some((message: any) => message?.role === "tool")) return after;
  return directive;
}

/** Parses the `[[fake {json}]]` directive in a text (null when absent; throws on malformed JSON). */
export function parseDirectiveText(text: string): FakeDirective | null {
  const start = text.indexOf(DIRECTIVE_OPEN);
  if (start < 0) return null;
  const jsonStart = start + DIRECTIVE_OPEN.length;
  // The JSON may itself contain "]]" (nested arrays), so try every "]]" until the slice parses.
  let end = text.indexOf("]]", jsonStart);
  let lastErr: unknown = null;
  while (end >= 0) {
    const slice = text.slice(jsonStart, end).trim();
    if (slice === "") return {};
    try {
      const parsed = JSON.parse(slice);
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("directive must be a JSON object");
      return parsed as FakeDirective;
    } catch (e) {
      lastErr = e;
    }
    end = text.indexOf("]]", end + 1);
  }
  throw new Error(`malformed [[fake ...]] directive: ${lastErr instanceof Error ? lastErr.message : "missing ]]"}`);
}

// ---------------------------------------------------------------------------------------------
// Reply construction
// ---------------------------------------------------------------------------------------------

let idCounter = 0;
const ID_PREFIX = Math.random().toString(36).slice(2, 8);

export function newCompletionId(): string {
  return `chatcmpl-fake${ID_PREFIX}${(++idCounter).toString(36)}`;
}

let callCounter = 0;
export function newToolCallId(): string {
  return `call_fake${ID_PREFIX}${(++callCounter).toString(36)}`;
}

export function normalizeToolCalls(calls: { name: string; arguments?: unknown }[]): ToolCallSpec[] {
  return calls.map((c, i) => ({
    id: (c as any).id ?? `call_fake${i}`,
    name: String(c.name),
    arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}),
  }));
}

/** Reply text: directive `text`, else null when the directive has tool_calls, else "Hello from <model>.". */
export function replyText(body: any, directive?: FakeDirective | null): string | null {
  if (directive?.text !== undefined) return directive.text;
  if (directive?.tool_calls && directive.tool_calls.length > 0) return null;
  return defaultReplyText(String(body?.model ?? ""));
}

/** Builds the full reply spec for a request (fresh ids; tool call ids are `call_…`). */
export function buildReplySpec(body: any, directive: FakeDirective | null, created: number): ChatReplySpec {
  const model = String(body?.model ?? "");
  const text = replyText(body, directive);
  const toolCalls = directive?.tool_calls ? normalizeToolCalls(directive.tool_calls).map((tc) => ({ ...tc, id: newToolCallId() })) : [];
  const finishReason = directive?.finish_reason ?? (toolCalls.length > 0 ? "tool_calls" : "stop");
  const usage = directive?.no_usage || directive?.usage_null ? null : computeUsage(body, directive);
  return { id: newCompletionId(), created, model, text, toolCalls, finishReason, usage, usageNull: directive?.usage_null === true };
}

/** Non-stream `chat.completion` object. */
export function buildChatCompletion(spec: ChatReplySpec): Record<string, unknown> {
  const message: Record<string, unknown> = { role: "assistant", content: spec.text, refusal: null, annotations: [] };
  if (spec.toolCalls.length > 0) {
    message.tool_calls = spec.toolCalls.map((tc) => ({
      id: tc.id,
      type: "function",
      function: { name: tc.name, arguments: tc.arguments },
    }));
  }
  const out: Record<string, unknown> = {
    id: spec.id,
    object: "chat.completion",
    created: spec.created,
    model: spec.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: spec.finishReason }],
  };
  if (spec.usage) out.usage = spec.usage;
  else if (spec.usageNull) out.usage = null;
  out.service_tier = "default";
  out.system_fingerprint = SYSTEM_FINGERPRINT;
  return out;
}

export const SYSTEM_FINGERPRINT = "fp_fake0001";

/** Splits text into stream pieces by words, keeping the whitespace in front of each word. "a b" → ["a", " b"]. */
export function splitTextForStream(text: string): string[] {
  const out: string[] = [];
  let cur = "";
  let seenNonWs = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    const ws = ch === " " || ch === "\n" || ch === "\t" || ch === "\r";
    if (ws && seenNonWs) {
      out.push(cur);
      cur = "";
      seenNonWs = false;
    }
    cur += ch;
    if (!ws) seenNonWs = true;
  }
  if (cur) out.push(cur);
  return out;
}

/** Splits a tool-call arguments string into up to 3 fragments (never empty fragments). */
export function splitArguments(args: string): string[] {
  if (args.length <= 4) return args ? [args] : [];
  const step = Math.ceil(args.length / 3);
  const out: string[] = [];
  for (let i = 0; i < args.length; i += step) out.push(args.slice(i, i + step));
  return out;
}

// Memo: text → JSON strings of the content choices (`{"index":0,"delta":{"content":...},...}`), so the default
// "Hello from <model>." reply is rendered once per model.
const contentChoiceCache = new Map<string, string[]>();
const CONTENT_CACHE_MAX = 4096;

function contentChoices(text: string): string[] {
  let c = contentChoiceCache.get(text);
  if (c) return c;
  c = splitTextForStream(text).map((piece) => choiceJson({ content: piece }, null));
  if (contentChoiceCache.size >= CONTENT_CACHE_MAX) contentChoiceCache.clear();
  contentChoiceCache.set(text, c);
  return c;
}

function choiceJson(delta: unknown, finishReason: string | null): string {
  return `{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finishReason === null ? "null" : JSON.stringify(finishReason)}}`;
}

const ROLE_CHOICE_TEXT = choiceJson({ role: "assistant", content: "", refusal: null }, null);

export const SSE_DONE = "data: [DONE]\n\n";

/**
 * SSE events (`data: {chunk}\n\n` strings) for a streamed reply, in order, ending with `data: [DONE]\n\n`.
 *
 * Order (api.openai.com): role chunk `delta:{role:"assistant",content:"",refusal:null}` → content chunks (one per word,
 * leading whitespace kept) → tool-call fragments (first: index,id,type,function{name,arguments:""}; then argument
 * fragments `{index,function:{arguments}}`) → final `delta:{}` + finish_reason → [usage chunk `choices:[]`] → [DONE].
 * When the reply has tool calls but no text, the role chunk is `{role:"assistant",content:null}` merged with the first
 * fragment of the first call, as OpenAI does.
 * With includeUsage (and usage not null) every chunk carries `"usage":null` and a usage chunk precedes [DONE];
 * otherwise chunks have no `usage` key.
 */
export function buildStreamEvents(spec: ChatReplySpec, includeUsage: boolean): string[] {
  const withUsage = includeUsage && (spec.usage !== null || spec.usageNull === true);
  const head =
    `data: {"id":"${spec.id}","object":"chat.completion.chunk","created":${spec.created},"model":${JSON.stringify(spec.model)},` +
    `"service_tier":"default","system_fingerprint":"${SYSTEM_FINGERPRINT}","choices":[`;
  const tail = withUsage ? `],"usage":null}\n\n` : `]}\n\n`;
  const events: string[] = [];

  const hasTools = spec.toolCalls.length > 0;
  if (spec.text !== null || !hasTools) {
    events.push(head + ROLE_CHOICE_TEXT + tail);
    if (spec.text) for (const c of contentChoices(spec.text)) events.push(head + c + tail);
  }
  spec.toolCalls.forEach((tc, index) => {
    const first = { index, id: tc.id, type: "function", function: { name: tc.name, arguments: "" } };
    if (spec.text === null && index === 0) {
      events.push(head + choiceJson({ role: "assistant", content: null, tool_calls: [first], refusal: null }, null) + tail);
    } else {
      events.push(head + choiceJson({ tool_calls: [first] }, null) + tail);
    }
    for (const frag of splitArguments(tc.arguments)) {
      events.push(head + choiceJson({ tool_calls: [{ index, function: { arguments: frag } }] }, null) + tail);
    }
  });
  events.push(head + choiceJson({}, spec.finishReason) + tail);
  if (withUsage) events.push(head + `],"usage":${JSON.stringify(spec.usage)}}\n\n`);
  events.push(SSE_DONE);
  return events;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

const DEFAULT_ERRORS: Record<number, { message: string; type: string; code: string | null }> = {
  400: { message: "Invalid request.", type: "invalid_request_error", code: null },
  401: { message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key" },
  403: { message: "You are not allowed to access this resource.", type: "invalid_request_error", code: "unsupported_country_region_territory" },
  404: { message: "The model does not exist or you do not have access to it.", type: "invalid_request_error", code: "model_not_found" },
  409: { message: "Conflict.", type: "invalid_request_error", code: null },
  422: { message: "Unprocessable entity.", type: "invalid_request_error", code: null },
  429: { message: "Rate limit reached for requests. Please try again in 1s.", type: "requests", code: "rate_limit_exceeded" },
  500: { message: "The server had an error while processing your request. Sorry about that!", type: "server_error", code: null },
  502: { message: "Bad gateway.", type: "server_error", code: null },
  503: { message: "The engine is currently overloaded, please try again later.", type: "server_error", code: null },
};

/** OpenAI error body. `err` may be a message string or a partial error object; defaults depend on status. */
export function buildErrorBody(status: number, err?: FakeDirective["error"]): OpenAIErrorBody {
  const d = DEFAULT_ERRORS[status] ?? (status >= 500 ? DEFAULT_ERRORS[500]! : DEFAULT_ERRORS[400]!);
  const e = typeof err === "string" ? { message: err } : (err ?? {});
  return {
    error: {
      message: e.message ?? d.message,
      type: e.type ?? d.type,
      param: e.param ?? null,
      code: e.code !== undefined ? e.code : d.code,
    },
  };
}

/** Mid-stream error event: `data: {"error":{...}}\n\n` (openai-node throws APIError on it). */
export function buildStreamErrorEvent(err?: FakeDirective["error"]): string {
  return `data: ${JSON.stringify(buildErrorBody(500, err))}\n\n`;
}

export const INVALID_API_KEY_BODY: OpenAIErrorBody = {
  error: { message: "Incorrect API key provided", type: "invalid_request_error", param: null, code: "invalid_api_key" },
};
export const INVALID_API_KEY_JSON = JSON.stringify(INVALID_API_KEY_BODY);

// ---------------------------------------------------------------------------------------------
// Models list
// ---------------------------------------------------------------------------------------------

export const FAKE_MODELS = ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3-mini", "gpt-5"];

export function buildModelObject(id: string): Record<string, unknown> {
  return { id, object: "model", created: 1700000000, owned_by: "fake-upstream" };
}

export const MODELS_LIST_JSON = JSON.stringify({ object: "list", data: FAKE_MODELS.map(buildModelObject) });
