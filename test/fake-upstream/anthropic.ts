/**
 * Anthropic Messages wire format for the fake upstream (https://docs.anthropic.com/en/api/messages).
 *
 *   POST /v1/messages   (non-stream JSON, or SSE with `event:` lines when stream is true)
 *
 * Requires `x-api-key` and `anthropic-version`. Validates requests the way Anthropic does where translators
 * go wrong (docs/wire-formats.md#anthropic-messages): required max_tokens, non-empty text, tool ids
 * `^[a-zA-Z0-9_-]+$`, tool_use answered by tool_result first in the next user message, thinking signatures issued by
 * this fake for this very model, thinking budget rules, temperature with top_p, unknown top-level fields.
 *
 * Scenario control: `[[fake {json}]]` in the text of the LAST user message (see AnthropicFakeDirective).
 */
import { controlledStream, sleep, type Ctx } from "./server.ts";
import { registerFake } from "./registry.ts";
import { countWords, defaultReplyText, splitArguments, splitTextForStream } from "./openai.ts";

type Json = Record<string, any>;

/** `[[fake {...}]]` directive in the last user message. All keys optional. */
export interface AnthropicFakeDirective {
  /** Reply text (default "Hello from <model>."; none when tool_calls are given). */
  text?: string;
  /** A thinking block before the text (only when the request enables thinking), signed for the model. */
  thinking?: string;
  /** A redacted_thinking block with this data (only when the request enables thinking). */
  redacted_thinking?: string;
  /** tool_use blocks; `arguments` an object (default {}) or a raw JSON string; `id` overrides the toolu_ id. */
  tool_calls?: { name: string; arguments?: unknown; id?: string }[];
  /**
   * Exact usage (input_tokens EXCLUDES cache reads and writes, as Anthropic reports it). `cache_creation` (the writes
   * by lifetime) is reported only when given; `cache_creation_input_tokens` then defaults to its sum. In a stream it
   * is in message_start (message_delta repeats the totals without it), or only in message_delta with
   * usage_in_delta_only.
   */
  usage?: Partial<AnthropicUsage>;
  /**
   * Stream: message_start reports no cache tokens; they (and input_tokens) arrive only in message_delta, as from some
   * Anthropic-compatible upstreams.
   */
  usage_in_delta_only?: boolean;
  /** Override stop_reason. */
  stop_reason?: string;
  /** Answer with this HTTP status and an Anthropic error body. */
  status?: number;
  /** Error message or `{type, message}`; used for `status` and for stream_error_after_chunks. */
  error?: string | { type?: string; message?: string };
  delay_ms?: number;
  chunk_delay_ms?: number;
  hang_after_chunks?: number;
  stream_error_after_chunks?: number;
  headers?: Record<string, string>;
  /**
   * Replaces this directive once a later user message carries tool_result blocks (and no directive of its own):
   * `{"tool_calls":[...], "after_tool_result":{"text":"done"}}` asks for the call, then answers text.
   */
  after_tool_result?: AnthropicFakeDirective;
}

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The writes by cache lifetime (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). */
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

const KNOWN_FIELDS = new Set([
  "model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k", "tools",
  "tool_choice", "thinking", "metadata", "service_tier", "output_config", "container", "mcp_servers", "context_management",
  "inference_geo", "cache_control",
]);
const TOOL_ID = /^[a-zA-Z0-9_-]+$/;

let counter = 0;
const RUN = Math.random().toString(36).slice(2, 8);

function headers(contentType: string, extra?: Record<string, string>): Record<string, string> {
  return { "content-type": contentType, "request-id": `req_fake${RUN}${(++counter).toString(36)}`, ...extra };
}

export function anthropicErrorBody(status: number, error?: AnthropicFakeDirective["error"]): Json {
  const given = typeof error === "string" ? { message: error } : (error ?? {});
  const type = given.type ?? ERROR_TYPES[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
  return { type: "error", error: { type, message: given.message ?? (type === "overloaded_error" ? "Overloaded" : `fake ${type}`) }, request_id: `req_fake${RUN}` };
}

function anthropicError(status: number, error?: AnthropicFakeDirective["error"], extra?: Record<string, string>): Response {
  return new Response(JSON.stringify(anthropicErrorBody(status, error)), { status, headers: headers("application/json", extra) });
}

const invalid = (message: string) => anthropicError(400, { type: "invalid_request_error", message });

// ---------------------------------------------------------------------------------------------
// Token counting (exported so tests can compute expected usage and costs)
// ---------------------------------------------------------------------------------------------

/** Text of a message's content (string, or the `text` of text blocks and of tool_result text blocks). */
export function anthropicMessageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let text = "";
  for (const block of content) {
    if (typeof block?.text === "string") text += block.text;
    else if (block?.type === "tool_result") text += anthropicMessageText(block.content);
  }
  return text;
}

/**
 * input_tokens (uncached) for a body: ceil(C / 4) + 3 × M, where C counts the characters of the system text
 * and of every message's text (tool_result texts included) and M is the number of messages.
 */
export function countAnthropicInputTokens(body: any): number {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  let chars = anthropicMessageText(body?.system).length;
  for (const message of messages) chars += anthropicMessageText(message?.content).length;
  return Math.ceil(chars / 4) + 3 * messages.length;
}

/** output_tokens: words(text) + words(thinking) + 1 + Σ ceil((name + arguments JSON) / 4) per tool call. */
export function computeAnthropicUsage(body: any, directive?: AnthropicFakeDirective | null): AnthropicUsage {
  const reply = replyOf(body, directive ?? null);
  let output = countWords(reply.text ?? "") + countWords(reply.thinking ?? "") + 1;
  for (const call of reply.toolCalls) output += Math.ceil((call.name.length + call.arguments.length) / 4);
  const given = directive?.usage ?? {};
  const split = given.cache_creation;
  const usage: AnthropicUsage = {
    input_tokens: given.input_tokens ?? countAnthropicInputTokens(body),
    output_tokens: given.output_tokens ?? output,
    cache_creation_input_tokens: given.cache_creation_input_tokens ?? (split ? (split.ephemeral_5m_input_tokens ?? 0) + (split.ephemeral_1h_input_tokens ?? 0) : 0),
    cache_read_input_tokens: given.cache_read_input_tokens ?? 0,
  };
  if (split) usage.cache_creation = { ephemeral_5m_input_tokens: split.ephemeral_5m_input_tokens ?? 0, ephemeral_1h_input_tokens: split.ephemeral_1h_input_tokens ?? 0 };
  return usage;
}

// ---------------------------------------------------------------------------------------------
// Directive, signatures, reply
// ---------------------------------------------------------------------------------------------

export function parseAnthropicDirective(body: any): AnthropicFakeDirective | null {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  const users = messages.filter((message: any) => message?.role === "user");
  const last = users.at(-1);
  const own = parseAnthropicDirectiveText(last ? anthropicMessageText(last.content) : "");
  if (own || !Array.isArray(last?.content) || !last.content.some((block: any) => block?.type === "tool_result")) return own;
  // The last user message only answers tool calls: the directive that asked for them may say what comes next.
  for (let i = users.length - 2; i >= 0; i--) {
    const earlier = parseAnthropicDirectiveText(anthropicMessageText(users[i].content));
    if (earlier) return earlier.after_tool_result && typeof earlier.after_tool_result === "object" ? earlier.after_tool_result : null;
  }
  return null;
}

function parseAnthropicDirectiveText(text: string): AnthropicFakeDirective | null {
  const start = text.indexOf("[[fake");
  if (start < 0) return null;
  let end = text.indexOf("]]", start);
  while (end >= 0) {
    try {
      const parsed = JSON.parse(text.slice(start + 6, end).trim() || "{}");
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed;
    } catch {}
    end = text.indexOf("]]", end + 1);
  }
  throw new Error("malformed [[fake ...]] directive");
}

/** The signature this fake issues for a thinking block of `model` (what it accepts back from that model only). */
export function issueAnthropicSignature(model: string): string {
  return `sigfake.${Buffer.from(model).toString("base64url")}.${Buffer.from(String(++counter)).toString("base64url")}`;
}

function signedFor(signature: unknown, model: string): boolean {
  return typeof signature === "string" && signature.startsWith(`sigfake.${Buffer.from(model).toString("base64url")}.`);
}

interface Reply {
  text: string | null;
  thinking: string | null;
  redacted: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
}

function thinkingOn(body: any): boolean {
  return body?.thinking?.type === "enabled" || body?.thinking?.type === "adaptive";
}

function replyOf(body: any, directive: AnthropicFakeDirective | null): Reply {
  const toolCalls = (directive?.tool_calls ?? []).map((call, index) => ({
    id: call.id ?? `toolu_fake${RUN}${index}`,
    name: String(call.name),
    arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {}),
  }));
  const text = directive?.text !== undefined ? directive.text : toolCalls.length > 0 ? null : defaultReplyText(String(body?.model ?? ""));
  return {
    text,
    thinking: thinkingOn(body) ? (directive?.thinking ?? null) : null,
    redacted: thinkingOn(body) ? (directive?.redacted_thinking ?? null) : null,
    toolCalls,
  };
}

// ---------------------------------------------------------------------------------------------
// Validation: what Anthropic refuses
// ---------------------------------------------------------------------------------------------

/** The beta that lets `messages` carry `role: "system"` turns (Claude Code 2.1.x sends them). */
export const MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-2026-04-07";

/**
 * The Anthropic-style 400 message for a body, or null when the body is acceptable.
 * `options.midConversationSystem`: the request enabled MID_CONVERSATION_SYSTEM_BETA (system messages allowed).
 */
export function validateAnthropicBody(body: any, options: { midConversationSystem?: boolean } = {}): string | null {
  if (!body || typeof body !== "object" || Array.isArray(body)) return "body: Input should be a valid dictionary";
  for (const key of Object.keys(body)) if (!KNOWN_FIELDS.has(key)) return `${key}: Extra inputs are not permitted`;
  if (typeof body.model !== "string" || body.model === "") return "model: Field required";
  if (body.max_tokens === undefined) return "max_tokens: Field required";
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) return "max_tokens: Input should be a valid integer greater than 0";
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "messages: Field required";
  if (body.stop_sequences !== undefined && !Array.isArray(body.stop_sequences)) return "stop_sequences: Input should be a valid list";
  if (body.temperature !== undefined && body.top_p !== undefined) return "`temperature` and `top_p` cannot both be specified for this model. Please use only one.";
  if (thinkingOn(body) && body.thinking.type === "enabled") {
    if (!(body.thinking.budget_tokens >= 1024)) return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024";
    if (body.thinking.budget_tokens >= body.max_tokens) return "`max_tokens` must be greater than `thinking.budget_tokens`";
  }
  if (thinkingOn(body) && (body.tool_choice?.type === "any" || body.tool_choice?.type === "tool")) {
    return "Thinking may not be enabled when tool_choice forces tool use.";
  }
  return validateMessages(body.messages, body.model, thinkingOn(body), options.midConversationSystem === true);
}

function validateMessages(messages: any[], model: string, thinking: boolean, systemAllowed = false): string | null {
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (systemAllowed && message?.role === "system") {
      const text = anthropicMessageText(message.content);
      const textOnly = typeof message.content === "string" || (Array.isArray(message.content) && message.content.every((block: any) => block?.type === "text"));
      if (!textOnly || text === "") return `messages.${i}: system messages must have non-empty text content`;
      continue;
    }
    if (message?.role !== "user" && message?.role !== "assistant") return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (message.content === "") return `messages.${i}: text content blocks must be non-empty`;
    if (!Array.isArray(message.content)) continue;
    if (message.content.length === 0) return `messages.${i}: all messages must have non-empty content`;
    let seenOther = false;
    for (let j = 0; j < message.content.length; j++) {
      const block = message.content[j];
      const where = `messages.${i}.content.${j}`;
      if (block?.type === "text" && (typeof block.text !== "string" || block.text === "")) return `${where}: text content blocks must be non-empty`;
      if (block?.type === "tool_use" && !TOOL_ID.test(String(block.id))) return `${where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'`;
      if (block?.type === "tool_result") {
        if (!TOOL_ID.test(String(block.tool_use_id))) return `${where}.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'`;
        if (seenOther) return `${where}: tool_result blocks must come first in the user message`;
      } else seenOther = true;
      if (block?.type === "thinking" && !signedFor(block.signature, model)) return `${where}: Invalid \`signature\` in \`thinking\` block`;
    }
  }
  return validatePairing(messages, thinking);
}

function validatePairing(messages: any[], thinking: boolean): string | null {
  const blocks = (message: any): any[] => (Array.isArray(message?.content) ? message.content : []);
  for (let i = 0; i < messages.length; i++) {
    const ids = blocks(messages[i]).filter((block) => block?.type === "tool_use").map((block) => block.id);
    if (messages[i].role === "user") {
      const previous = i > 0 ? blocks(messages[i - 1]).filter((block) => block?.type === "tool_use").map((block) => block.id) : [];
      for (const result of blocks(messages[i]).filter((block) => block?.type === "tool_result")) {
        if (!previous.includes(result.tool_use_id)) return `messages.${i}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${result.tool_use_id}`;
      }
      continue;
    }
    if (ids.length === 0 || i === messages.length - 1) continue;
    const answered = blocks(messages[i + 1]).filter((block) => block?.type === "tool_result").map((block) => block.tool_use_id);
    const missing = ids.filter((id) => !answered.includes(id));
    if (missing.length > 0) return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}`;
    if (thinking && i === messages.length - 2) {
      const first = blocks(messages[i])[0]?.type;
      if (first !== "thinking" && first !== "redacted_thinking") {
        return `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`;
      }
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

function contentBlocks(reply: Reply, model: string): Json[] {
  const blocks: Json[] = [];
  if (reply.thinking !== null) blocks.push({ type: "thinking", thinking: reply.thinking, signature: issueAnthropicSignature(model) });
  if (reply.redacted !== null) blocks.push({ type: "redacted_thinking", data: reply.redacted });
  if (reply.text) blocks.push({ type: "text", text: reply.text });
  for (const call of reply.toolCalls) blocks.push({ type: "tool_use", id: call.id, name: call.name, input: JSON.parse(call.arguments || "{}") });
  return blocks;
}

function stopReasonOf(reply: Reply, directive: AnthropicFakeDirective | null): string {
  return directive?.stop_reason ?? (reply.toolCalls.length > 0 ? "tool_use" : "end_turn");
}

export function buildAnthropicMessage(body: any, directive: AnthropicFakeDirective | null): Json {
  const reply = replyOf(body, directive);
  return {
    id: `msg_fake${RUN}${(++counter).toString(36)}`,
    type: "message",
    role: "assistant",
    model: body.model,
    content: contentBlocks(reply, body.model),
    stop_reason: stopReasonOf(reply, directive),
    stop_sequence: null,
    usage: { ...computeAnthropicUsage(body, directive), service_tier: "standard" },
  };
}

const event = (name: string, data: Json) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * SSE events of a streamed reply (https://docs.anthropic.com/en/api/messages-streaming), ending with message_stop.
 */
export function buildAnthropicStreamEvents(body: any, directive: AnthropicFakeDirective | null): string[] {
  const message = buildAnthropicMessage(body, directive);
  const usage = message.usage as AnthropicUsage;
  const split = usage.cache_creation ? { cache_creation: usage.cache_creation } : {};
  const startUsage = directive?.usage_in_delta_only
    ? { input_tokens: usage.input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 }
    : { input_tokens: usage.input_tokens, cache_creation_input_tokens: usage.cache_creation_input_tokens, cache_read_input_tokens: usage.cache_read_input_tokens, ...split, output_tokens: 1 };
  const events = [event("message_start", { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: startUsage } })];
  (message.content as Json[]).forEach((block, index) => {
    const delta = (payload: Json) => events.push(event("content_block_delta", { type: "content_block_delta", index, delta: payload }));
    if (block.type === "thinking") {
      events.push(event("content_block_start", { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } }));
      for (const piece of splitTextForStream(block.thinking)) delta({ type: "thinking_delta", thinking: piece });
      delta({ type: "signature_delta", signature: block.signature });
    } else if (block.type === "redacted_thinking") {
      events.push(event("content_block_start", { type: "content_block_start", index, content_block: block }));
    } else if (block.type === "text") {
      events.push(event("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }));
      if (index === 0) events.push(event("ping", { type: "ping" }));
      for (const piece of splitTextForStream(block.text)) delta({ type: "text_delta", text: piece });
    } else {
      events.push(event("content_block_start", { type: "content_block_start", index, content_block: { ...block, input: {} } }));
      delta({ type: "input_json_delta", partial_json: "" });
      for (const piece of splitArguments(JSON.stringify(block.input))) delta({ type: "input_json_delta", partial_json: piece });
    }
    events.push(event("content_block_stop", { type: "content_block_stop", index }));
  });
  const { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens } = usage;
  const finalUsage = { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, ...(directive?.usage_in_delta_only ? split : {}), output_tokens };
  events.push(event("message_delta", { type: "message_delta", delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: finalUsage }));
  events.push(event("message_stop", { type: "message_stop" }));
  return events;
}

export function anthropicStreamErrorEvent(error?: AnthropicFakeDirective["error"]): string {
  const body = anthropicErrorBody(529, error ?? { type: "overloaded_error", message: "Overloaded" });
  return event("error", { type: "error", error: body.error });
}

// ---------------------------------------------------------------------------------------------
// Handler
// ---------------------------------------------------------------------------------------------

/** POST /v1/messages */
export async function handleAnthropicMessages(ctx: Ctx): Promise<Response> {
  if (!ctx.req.headers.get("x-api-key")?.trim()) return anthropicError(401, { type: "authentication_error", message: "x-api-key header is required" });
  if (!ctx.req.headers.get("anthropic-version")) return invalid("anthropic-version: header is required");
  if (ctx.jsonError) return invalid("There was an error parsing the body of your request");
  const betas = (ctx.req.headers.get("anthropic-beta") ?? "").split(",").map((beta) => beta.trim());
  const problem = validateAnthropicBody(ctx.body, { midConversationSystem: betas.includes(MID_CONVERSATION_SYSTEM_BETA) });
  if (problem) return invalid(problem);
  const body = ctx.body;
  let directive: AnthropicFakeDirective | null = null;
  try {
    directive = ctx.rawBody.includes("[[fake") ? parseAnthropicDirective(body) : null;
  } catch (error) {
    return invalid(`fake upstream: ${(error as Error).message}`);
  }
  const extra = directive?.headers;
  if (directive?.delay_ms) await sleep(directive.delay_ms, ctx.signal);
  const status = directive?.status ?? 0;
  if (status >= 400 || (directive?.error !== undefined && directive.stream_error_after_chunks === undefined)) {
    return anthropicError(status >= 400 ? status : 500, directive?.error, extra);
  }
  if (body.stream !== true) return new Response(JSON.stringify(buildAnthropicMessage(body, directive)), { status: 200, headers: headers("application/json", extra) });
  const events = buildAnthropicStreamEvents(body, directive);
  const sse = headers("text/event-stream; charset=utf-8", extra);
  const controlled = directive && (directive.chunk_delay_ms || directive.hang_after_chunks !== undefined || directive.stream_error_after_chunks !== undefined);
  if (!controlled) return new Response(events.join(""), { status: 200, headers: sse });
  const stream = controlledStream(events, {
    chunkDelayMs: directive!.chunk_delay_ms,
    hangAfter: directive!.hang_after_chunks,
    errorAfter: directive!.hang_after_chunks === undefined ? directive!.stream_error_after_chunks : undefined,
    errorEvent: anthropicStreamErrorEvent(directive!.error),
    signal: ctx.signal,
  });
  return new Response(stream, { status: 200, headers: sse });
}

registerFake("anthropic", [{ method: "POST", path: "/v1/messages", handler: handleAnthropicMessages }]);
