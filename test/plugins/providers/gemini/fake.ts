/**
 * Google Gemini generateContent wire format for the fake upstream (https://ai.google.dev/api/generate-content).
 *
 *   POST /v1beta/models/{model}:generateContent
 *   POST /v1beta/models/{model}:streamGenerateContent?alt=sse   (without alt=sse: one JSON array)
 *
 * Requires `x-goog-api-key` (or `?key=`). Validates requests the way Gemini does where translators go
 * wrong: roles, part shapes, object `args`/`response`, the OpenAPI schema subset of function parameters
 * and responseSchema, thinking options per model generation, and thought signatures (issued per model,
 * required on replayed function calls of models after 2.x, refused when another model issued them).
 *
 * Scenario control: `[[fake {json}]]` in the text of the LAST user content (see GeminiFakeDirective).
 */
import { controlledStream, jsonResponse, sleep, type Ctx } from "../../../fake-upstream/server.ts";
import { registerFake } from "../../../fake-upstream/registry.ts";
import { countWords, defaultReplyText, splitTextForStream } from "../../../fake-upstream/openai.ts";

type Json = Record<string, any>;

/** `[[fake {...}]]` directive in the last user content. All keys optional. */
export interface GeminiFakeDirective {
  /** Reply text (default "Hello from <model>."; none when tool_calls are given). */
  text?: string;
  /** Thought summary: counted as thoughtsTokenCount; sent as a thought part when includeThoughts is on. */
  thinking?: string;
  /** functionCall parts; `arguments` an object (default {}); `id` sets functionCall.id. */
  tool_calls?: { name: string; arguments?: Json; id?: string }[];
  /** Exact usageMetadata numbers (defaults: see computeGeminiUsage). */
  usage?: Partial<GeminiUsageMetadata>;
  /** Override finishReason (e.g. "MAX_TOKENS", "SAFETY"). */
  finish_reason?: string;
  /** Block the prompt: no candidates, promptFeedback.blockReason = this. */
  prompt_blocked?: string;
  /** Answer with this HTTP status and a Google error body. */
  status?: number;
  /** Error message or `{message, status}`; used for `status` and for stream_error_after_chunks. */
  error?: string | { message?: string; status?: string };
  /** Force thought signatures on (true) or off (false); default: models after 2.x, or 2.x with a thinking budget. */
  signatures?: boolean;
  no_usage?: boolean;
  delay_ms?: number;
  chunk_delay_ms?: number;
  hang_after_chunks?: number;
  stream_error_after_chunks?: number;
  headers?: Record<string, string>;
}

export interface GeminiUsageMetadata {
  promptTokenCount: number;
  candidatesTokenCount: number;
  thoughtsTokenCount: number;
  cachedContentTokenCount: number;
  toolUsePromptTokenCount: number;
}

const STATUS_NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};
const DEFAULT_MESSAGES: Record<string, string> = {
  INVALID_ARGUMENT: "Request contains an invalid argument.",
  PERMISSION_DENIED: "The caller does not have permission",
  NOT_FOUND: "Requested entity was not found.",
  RESOURCE_EXHAUSTED: "Resource has been exhausted (e.g. check quota).",
  INTERNAL: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
  UNAVAILABLE: "The model is overloaded. Please try again later.",
  DEADLINE_EXCEEDED: "Deadline expired before operation could complete.",
};

/** A Google error body (docs/wire-formats.md#google-gemini). */
export function geminiErrorBody(status: number, error?: GeminiFakeDirective["error"]): Json {
  const e = typeof error === "string" ? { message: error } : (error ?? {});
  const name = e.status ?? STATUS_NAMES[status] ?? (status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT");
  return { error: { code: status, message: e.message ?? DEFAULT_MESSAGES[name] ?? "Error.", status: name } };
}

function geminiError(status: number, error?: GeminiFakeDirective["error"], headers?: Record<string, string>): Response {
  return jsonResponse(status, JSON.stringify(geminiErrorBody(status, error)), headers);
}

class RequestError extends Error {}
const invalid = (message: string): never => {
  throw new RequestError(message);
};

// ---------------------------------------------------------------------------------------------
// Token counting (exported so tests can compute expected usage and costs)
// ---------------------------------------------------------------------------------------------

/** Tokens Gemini bills per image (an image up to 384 px on both sides). */
export const IMAGE_TOKENS = 258;

/**
 * promptTokenCount = ceil(C / 4) + 3 * N + 258 * images, where N = contents (+1 with a systemInstruction)
 * and C = the characters of every text part, plus name + JSON of each functionCall.args and
 * functionResponse.response. The directive text itself counts.
 */
export function countGeminiPromptTokens(body: any): number {
  const contents: any[] = Array.isArray(body?.contents) ? body.contents : [];
  const all = body?.systemInstruction ? [body.systemInstruction, ...contents] : contents;
  let chars = 0;
  let images = 0;
  for (const content of all) {
    for (const part of Array.isArray(content?.parts) ? content.parts : []) {
      if (typeof part?.text === "string") chars += part.text.length;
      if (part?.functionCall) chars += String(part.functionCall.name ?? "").length + JSON.stringify(part.functionCall.args ?? {}).length;
      if (part?.functionResponse) chars += String(part.functionResponse.name ?? "").length + JSON.stringify(part.functionResponse.response ?? {}).length;
      if (part?.inlineData || part?.fileData) images++;
    }
  }
  return Math.ceil(chars / 4) + 3 * all.length + IMAGE_TOKENS * images;
}

/** candidatesTokenCount = words(text) + 1 + Σ ceil((name + JSON(args)) / 4); thoughts = words(thinking). */
export function computeGeminiUsage(body: any, model: string, directive?: GeminiFakeDirective | null): GeminiUsageMetadata {
  const r = reply(body, directive ?? null, model);
  let candidates = (r.text ? countWords(r.text) : 0) + 1;
  for (const call of r.calls) candidates += Math.ceil((call.name.length + JSON.stringify(call.args).length) / 4);
  return {
    promptTokenCount: countGeminiPromptTokens(body),
    candidatesTokenCount: candidates,
    thoughtsTokenCount: directive?.thinking ? countWords(directive.thinking) : 0,
    cachedContentTokenCount: 0,
    toolUsePromptTokenCount: 0,
    ...directive?.usage,
  };
}

function usageMetadata(usage: GeminiUsageMetadata): Json {
  const out: Json = { promptTokenCount: usage.promptTokenCount, candidatesTokenCount: usage.candidatesTokenCount };
  const total = usage.promptTokenCount + usage.candidatesTokenCount + usage.thoughtsTokenCount + usage.toolUsePromptTokenCount;
  if (usage.cachedContentTokenCount) out.cachedContentTokenCount = usage.cachedContentTokenCount;
  if (usage.toolUsePromptTokenCount) out.toolUsePromptTokenCount = usage.toolUsePromptTokenCount;
  if (usage.thoughtsTokenCount) out.thoughtsTokenCount = usage.thoughtsTokenCount;
  out.totalTokenCount = total;
  out.promptTokensDetails = [{ modality: "TEXT", tokenCount: usage.promptTokenCount }];
  return out;
}

// ---------------------------------------------------------------------------------------------
// Directive
// ---------------------------------------------------------------------------------------------

/** The directive in the last user content's text parts; null when absent. Throws on malformed JSON. */
export function parseGeminiDirective(body: any): GeminiFakeDirective | null {
  const contents: any[] = Array.isArray(body?.contents) ? body.contents : [];
  const last = [...contents].reverse().find((content) => content?.role === "user");
  const text = (Array.isArray(last?.parts) ? last.parts : []).map((part: any) => (typeof part?.text === "string" ? part.text : "")).join("");
  const start = text.indexOf("[[fake");
  if (start < 0) return null;
  let end = text.indexOf("]]", start);
  while (end >= 0) {
    try {
      const slice = text.slice(start + "[[fake".length, end).trim();
      return slice === "" ? {} : (JSON.parse(slice) as GeminiFakeDirective);
    } catch {
      end = text.indexOf("]]", end + 1);
    }
  }
  throw new Error("malformed [[fake ...]] directive");
}

// ---------------------------------------------------------------------------------------------
// Thought signatures: base64 of "sig:<model>:<n>", so a replay to another model is detectable
// ---------------------------------------------------------------------------------------------

let signatureCounter = 0;

export function issueSignature(model: string): string {
  return Buffer.from(`sig:${model}:${++signatureCounter}:${Math.random().toString(36).slice(2, 10)}`).toString("base64");
}

/** The model a fake signature was issued for (undefined when it is not one of ours). */
export function signatureModel(signature: string): string | undefined {
  const text = Buffer.from(signature, "base64").toString("utf8");
  return text.startsWith("sig:") ? text.split(":")[1] : undefined;
}

/** Models after 2.x think always and require signatures on replayed calls (as Gemini 3 does). */
function alwaysThinks(model: string): boolean {
  return !/^gemini-[12](?:[.-]|$)/.test(model);
}

function signsCalls(model: string, body: any, directive: GeminiFakeDirective | null): boolean {
  if (directive?.signatures !== undefined) return directive.signatures;
  const budget = body?.generationConfig?.thinkingConfig?.thinkingBudget;
  return alwaysThinks(model) || (typeof budget === "number" && budget !== 0);
}

// ---------------------------------------------------------------------------------------------
// Request validation (what real Gemini refuses)
// ---------------------------------------------------------------------------------------------

const TOP_LEVEL = new Set(["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent", "labels"]);
const GENERATION = new Set([
  "temperature", "topP", "topK", "maxOutputTokens", "stopSequences", "candidateCount", "seed", "presencePenalty", "frequencyPenalty",
  "responseMimeType", "responseSchema", "responseJsonSchema", "thinkingConfig", "responseModalities", "mediaResolution",
]);
const THINKING = new Set(["thinkingBudget", "includeThoughts", "thinkingLevel"]);
const PART_DATA = ["text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"];
const SCHEMA_KEYS = new Set([
  "type", "format", "title", "description", "nullable", "enum", "items", "properties", "required", "anyOf", "minItems", "maxItems",
  "minimum", "maximum", "minLength", "maxLength", "pattern", "minProperties", "maxProperties", "propertyOrdering", "default", "example",
]);
const SCHEMA_TYPES = new Set(["string", "number", "integer", "boolean", "array", "object", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"]);

function unknownKeys(object: Json, allowed: Set<string>, where: string): void {
  for (const key of Object.keys(object)) {
    if (!allowed.has(key)) invalid(`Invalid JSON payload received. Unknown name "${key}" at '${where}': Cannot find field.`);
  }
}

function checkSchema(schema: any, where: string): void {
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) invalid(`${where}: must be an object`);
  unknownKeys(schema, SCHEMA_KEYS, where);
  if (schema.type !== undefined && !SCHEMA_TYPES.has(schema.type)) invalid(`Invalid value at '${where}.type': ${JSON.stringify(schema.type)}`);
  const type = String(schema.type ?? "").toLowerCase();
  if (schema.properties !== undefined) {
    if (type !== "object") invalid(`* GenerateContentRequest.${where}.properties: only allowed for OBJECT type`);
    if (Object.keys(schema.properties).length === 0) invalid(`* GenerateContentRequest.${where}.properties: should be non-empty for OBJECT type`);
    for (const [name, sub] of Object.entries(schema.properties)) checkSchema(sub, `${where}.properties[${name}]`);
  }
  for (const name of schema.required ?? []) {
    if (!schema.properties || !(name in schema.properties)) invalid(`* GenerateContentRequest.${where}.required[${name}]: property is not defined`);
  }
  if (type === "array") {
    if (!schema.items) invalid(`* GenerateContentRequest.${where}.items: missing field.`);
    checkSchema(schema.items, `${where}.items`);
  }
  if (schema.enum !== undefined && !schema.enum.every((value: unknown) => typeof value === "string")) invalid(`Invalid value at '${where}.enum': only strings`);
  for (const [index, branch] of (schema.anyOf ?? []).entries()) checkSchema(branch, `${where}.any_of[${index}]`);
}

function checkPart(part: any, role: string, where: string): void {
  if (!part || typeof part !== "object") invalid(`${where}: must be an object`);
  const kinds = PART_DATA.filter((key) => part[key] !== undefined);
  if (kinds.length !== 1) invalid(`* GenerateContentRequest.${where}.data: required oneof field 'data' must have one initialized field`);
  if (part.inlineData) {
    if (typeof part.inlineData.mimeType !== "string" || !part.inlineData.mimeType) invalid(`${where}.inline_data.mime_type: required`);
    if (typeof part.inlineData.data !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(part.inlineData.data)) {
      invalid(`Invalid value at '${where}.inline_data.data' (TYPE_BYTES), Base64 decoding failed`);
    }
  }
  if (part.fileData && typeof part.fileData.fileUri !== "string") invalid(`${where}.file_data.file_uri: required`);
  if (part.functionCall) {
    if (role !== "model") invalid(`${where}: functionCall parts belong to model turns`);
    const args = part.functionCall.args;
    if (args !== undefined && (typeof args !== "object" || args === null || Array.isArray(args))) invalid(`Invalid value at '${where}.function_call.args' (type.googleapis.com/google.protobuf.Struct)`);
  }
  if (part.functionResponse) {
    const response = part.functionResponse.response;
    if (typeof part.functionResponse.name !== "string" || !part.functionResponse.name) invalid(`* GenerateContentRequest.${where}.function_response.name: Name cannot be empty.`);
    if (typeof response !== "object" || response === null || Array.isArray(response)) invalid(`Invalid value at '${where}.function_response.response' (type.googleapis.com/google.protobuf.Struct)`);
  }
}

/**
 * Gemini 3-style signature rules: any signature must be this model's; the first call of each model step
 * in the current turn (after the last user content with text) needs one.
 */
function checkSignatures(body: any, model: string): void {
  const contents = body.contents as any[];
  let turnStart = 0;
  contents.forEach((content, index) => {
    if (content.role === "user" && content.parts.some((part: any) => typeof part.text === "string")) turnStart = index;
  });
  contents.forEach((content, index) => {
    let firstCall = index > turnStart;
    for (const part of content.parts) {
      if (typeof part.thoughtSignature === "string" && signatureModel(part.thoughtSignature) !== model) {
        invalid(`Corrupted thought signature. (contents[${index}] carries a signature that was not issued for ${model})`);
      }
      if (part.functionCall && firstCall) {
        firstCall = false;
        if (alwaysThinks(model) && typeof part.thoughtSignature !== "string") {
          invalid(`Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly. Additional data, function call \`default_api:${part.functionCall.name}\`, position ${index + 1}.`);
        }
      }
    }
  });
}

export function validateGeminiRequest(body: any, model: string): void {
  if (!body || typeof body !== "object" || Array.isArray(body)) invalid("Invalid JSON payload received.");
  unknownKeys(body, TOP_LEVEL, "");
  if (!Array.isArray(body.contents) || body.contents.length === 0) invalid("* GenerateContentRequest.contents: contents is not specified");
  body.contents.forEach((content: any, index: number) => {
    if (content?.role !== "user" && content?.role !== "model") invalid(`Please use a valid role: user, model. (contents[${index}].role = ${JSON.stringify(content?.role)})`);
    if (!Array.isArray(content.parts) || content.parts.length === 0) invalid(`* GenerateContentRequest.contents[${index}].parts: contents.parts must not be empty.`);
    content.parts.forEach((part: any, p: number) => checkPart(part, content.role, `contents[${index}].parts[${p}]`));
  });
  for (const [t, tool] of (body.tools ?? []).entries()) {
    for (const [f, declaration] of (tool.functionDeclarations ?? []).entries()) {
      const where = `tools[${t}].function_declarations[${f}]`;
      if (!/^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$/.test(declaration.name ?? "")) invalid(`* GenerateContentRequest.${where}.name: Invalid function name.`);
      if (declaration.parameters !== undefined) checkSchema(declaration.parameters, `${where}.parameters`);
    }
  }
  const mode = body.toolConfig?.functionCallingConfig?.mode;
  if (mode !== undefined && !["AUTO", "ANY", "NONE", "VALIDATED"].includes(mode)) invalid(`Invalid value at 'tool_config.function_calling_config.mode'`);
  const config = body.generationConfig;
  if (config !== undefined) {
    unknownKeys(config, GENERATION, "generation_config");
    if (config.thinkingConfig) {
      unknownKeys(config.thinkingConfig, THINKING, "generation_config.thinking_config");
      if (config.thinkingConfig.thinkingLevel !== undefined && !alwaysThinks(model)) invalid("Thinking level is not supported for this model.");
    }
    if (config.responseSchema !== undefined) checkSchema(config.responseSchema, "generation_config.response_schema");
  }
  checkSignatures(body, model);
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

interface Reply {
  text: string | null;
  thinking: string | null;
  calls: { name: string; args: Json; id?: string }[];
}

function reply(body: any, directive: GeminiFakeDirective | null, model: string): Reply {
  const calls = (directive?.tool_calls ?? []).map((call) => {
    const out: Reply["calls"][number] = { name: String(call.name), args: call.arguments ?? {} };
    if (call.id) out.id = call.id;
    return out;
  });
  const text = directive?.text !== undefined ? directive.text : calls.length > 0 ? null : defaultReplyText(model);
  const thinking = directive?.thinking && body?.generationConfig?.thinkingConfig?.includeThoughts === true ? directive.thinking : null;
  return { text, thinking, calls };
}

/** The model part of `/v1beta/models/{model}:{method}`. */
export function geminiModelFromPath(path: string): { model: string; method: string } | null {
  const match = /^\/v1beta\/models\/([^/:?]+):([A-Za-z]+)/.exec(path);
  return match ? { model: decodeURIComponent(match[1]!), method: match[2]! } : null;
}

function candidate(parts: Json[], finishReason?: string): Json {
  const out: Json = { content: { parts, role: "model" }, index: 0 };
  if (finishReason) out.finishReason = finishReason;
  return out;
}

let responseCounter = 0;

/** Non-stream chunks (one) or stream chunks (many) of a reply, as GenerateContentResponse objects. */
function buildChunks(body: any, model: string, directive: GeminiFakeDirective | null, stream: boolean): Json[] {
  const responseId = `fakeGem${(++responseCounter).toString(36)}`;
  const head = { modelVersion: model, responseId };
  const usage = directive?.no_usage ? null : usageMetadata(computeGeminiUsage(body, model, directive));
  if (directive?.prompt_blocked) {
    const blocked: Json = { promptFeedback: { blockReason: directive.prompt_blocked }, ...head };
    if (usage) blocked.usageMetadata = { promptTokenCount: usage.promptTokenCount, totalTokenCount: usage.promptTokenCount };
    return [blocked];
  }
  const r = reply(body, directive, model);
  const signed = signsCalls(model, body, directive);
  const finish = directive?.finish_reason ?? "STOP";
  const thoughtParts = r.thinking ? (stream ? splitTextForStream(r.thinking) : [r.thinking]).map((text) => ({ text, thought: true })) : [];
  const textParts: Json[] = r.text ? (stream ? splitTextForStream(r.text) : [r.text]).map((text) => ({ text })) : [];
  const callParts: Json[] = r.calls.map((call) => ({ functionCall: call.id ? { id: call.id, name: call.name, args: call.args } : { name: call.name, args: call.args } }));
  if (signed && callParts.length > 0) callParts[0]!.thoughtSignature = issueSignature(model);
  else if (signed && textParts.length > 0) textParts[textParts.length - 1]!.thoughtSignature = issueSignature(model);

  if (!stream) {
    const chunk: Json = { candidates: [candidate([...thoughtParts, ...textParts, ...callParts], finish)], ...head };
    if (usage) chunk.usageMetadata = usage;
    return [chunk];
  }
  // Streams: incremental parts; partial usage on the way; newer models send calls, then the finish apart.
  const partial = usage ? { promptTokenCount: usage.promptTokenCount, totalTokenCount: usage.promptTokenCount } : undefined;
  const chunks: Json[] = [...thoughtParts, ...textParts].map((part) => ({ candidates: [candidate([part])], ...head }));
  if (callParts.length > 0) chunks.push({ candidates: [candidate(callParts)], ...head });
  if (callParts.length > 0 || chunks.length === 0) chunks.push({ candidates: [candidate([{ text: "" }], finish)], ...head });
  else chunks[chunks.length - 1]!.candidates[0].finishReason = finish;
  chunks.forEach((chunk, index) => {
    const usageNow = index === chunks.length - 1 ? usage : partial;
    if (usageNow) chunk.usageMetadata = usageNow;
  });
  return chunks;
}

const SSE_HEADERS = { "content-type": "text/event-stream" };

/** POST /v1beta/models/{model}:generateContent | :streamGenerateContent */
export async function geminiModels(ctx: Ctx): Promise<Response> {
  const route = geminiModelFromPath(ctx.path);
  if (!route || (route.method !== "generateContent" && route.method !== "streamGenerateContent")) {
    return geminiError(404, { message: `Method not found: ${ctx.path}`, status: "NOT_FOUND" });
  }
  const key = ctx.req.headers.get("x-goog-api-key") ?? new URL(ctx.req.url).searchParams.get("key");
  if (!key) {
    return geminiError(403, {
      message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    });
  }
  if (ctx.jsonError) return geminiError(400, "Invalid JSON payload received. Unexpected token.");
  const { model } = route;
  let directive: GeminiFakeDirective | null;
  try {
    directive = parseGeminiDirective(ctx.body);
    validateGeminiRequest(ctx.body, model);
  } catch (error) {
    return geminiError(400, (error as Error).message);
  }
  if (directive?.delay_ms) await sleep(directive.delay_ms, ctx.signal);
  if ((directive?.status ?? 0) >= 400 || (directive?.error !== undefined && directive.stream_error_after_chunks === undefined)) {
    return geminiError(directive!.status ?? 500, directive!.error, directive!.headers);
  }
  const stream = route.method === "streamGenerateContent";
  const chunks = buildChunks(ctx.body, model, directive, stream);
  if (!stream) return jsonResponse(200, JSON.stringify(chunks[0]), directive?.headers);
  if (!ctx.path.includes("alt=sse")) return jsonResponse(200, JSON.stringify(chunks), directive?.headers);
  const events = [...chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`), ""];
  const body = controlledStream(events, {
    chunkDelayMs: directive?.chunk_delay_ms,
    hangAfter: directive?.hang_after_chunks,
    errorAfter: directive?.hang_after_chunks === undefined ? directive?.stream_error_after_chunks : undefined,
    errorEvent: `data: ${JSON.stringify(geminiErrorBody(500, directive?.error))}\n\n`,
    signal: ctx.signal,
  });
  return new Response(body, { status: 200, headers: { ...SSE_HEADERS, ...directive?.headers } });
}

registerFake("gemini", [{ method: "POST", path: "/v1beta/models/", prefix: true, handler: geminiModels }]);
