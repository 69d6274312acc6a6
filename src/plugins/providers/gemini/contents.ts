import { InvalidRequestError } from "../../../core/errors.ts";
import type { CanonicalImagePart, CanonicalMessage, CanonicalPart, CanonicalTextPart } from "../../../core/canonical.ts";
import { GEMINI_FORMAT_NAME } from "./parts.ts";
import { decodeGeminiCallId, modelTag, normalizeModel } from "./tool-ids.ts";

type Json = Record<string, unknown>;
type ToolCallPart = Extract<CanonicalPart, { type: "tool_call" }>;
type ToolResultPart = Extract<CanonicalPart, { type: "tool_result" }>;
type ReasoningPart = Extract<CanonicalPart, { type: "reasoning" }>;

export interface GeminiContent {
  role: "user" | "model";
  parts: Json[];
}

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s;
const IMAGE_TYPES: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  heic: "image/heic",
  heif: "image/heif",
};

/**
 * Canonical messages -> Gemini `contents` (docs/wire-formats.md: Google Gemini and Translation rules). Roles are user
 * and model; consecutive turns of one role are merged (parallel function responses must share a turn).
 * Thought signatures go back only to the model that issued them: in the tool-call id for function
 * calls, in reasoning parts whose origin is this format and model; anything foreign is dropped.
 */
export function geminiContents(messages: CanonicalMessage[], upstreamModel: string): GeminiContent[] {
  const target = { model: normalizeModel(upstreamModel), tag: modelTag(upstreamModel) };
  const names = toolNames(messages);
  const contents: GeminiContent[] = [];
  for (const message of messages) {
    const parts = message.role === "assistant" ? modelParts(message.content, target) : userParts(message.content, names);
    if (parts.length === 0) continue;
    const role = message.role === "assistant" ? "model" : "user";
    const last = contents[contents.length - 1];
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  }
  return contents;
}

/** Tool-call id -> function name: Gemini matches a functionResponse to its call by name. */
function toolNames(messages: CanonicalMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const message of messages) {
    for (const part of message.content) if (part.type === "tool_call") names.set(part.id, part.name);
  }
  return names;
}

function modelParts(content: CanonicalPart[], target: { model: string; tag: string }): Json[] {
  const parts: Json[] = [];
  for (const part of content) {
    if (part.type === "text") {
      if (part.text !== "") parts.push({ text: part.text });
    } else if (part.type === "reasoning") {
      const thought = thoughtPart(part, target.model);
      if (thought) parts.push(thought);
    } else if (part.type === "tool_call") {
      parts.push(functionCallPart(part, target.tag));
    } else if (part.type === "image") {
      parts.push(imagePart(part));
    }
  }
  return parts;
}

/** A thought replayed byte for byte to the model that produced it; any other reasoning is dropped. */
function thoughtPart(part: ReasoningPart, model: string): Json | undefined {
  if (part.origin?.format !== GEMINI_FORMAT_NAME || normalizeModel(part.origin.model) !== model) return undefined;
  if (part.text === "" && !part.signature) return undefined;
  const thought: Json = { text: part.text, thought: true };
  if (part.signature) thought.thoughtSignature = part.signature;
  return thought;
}

function functionCallPart(part: ToolCallPart, tag: string): Json {
  const state = decodeGeminiCallId(part.id);
  const call: Json = { name: part.name, args: argumentsObject(part.arguments) };
  if (state?.geminiId) call.id = state.geminiId;
  const out: Json = { functionCall: call };
  if (state?.signature && state.signature.modelTag === tag) out.thoughtSignature = state.signature.value;
  return out;
}

/** Tool results first (Gemini wants the responses to a turn's calls together), then their images, then the rest. */
function userParts(content: CanonicalPart[], names: Map<string, string>): Json[] {
  const responses: Json[] = [];
  const resultImages: Json[] = [];
  const rest: Json[] = [];
  for (const part of content) {
    if (part.type === "tool_result") {
      responses.push(functionResponsePart(part, names));
      for (const item of part.content) if (item.type === "image") resultImages.push(imagePart(item));
    } else if (part.type === "text") {
      if (part.text !== "") rest.push({ text: part.text });
    } else if (part.type === "image") {
      rest.push(imagePart(part));
    }
  }
  return [...responses, ...resultImages, ...rest];
}

function functionResponsePart(part: ToolResultPart, names: Map<string, string>): Json {
  const name = names.get(part.toolCallId);
  if (name === undefined) {
    throw new InvalidRequestError(
      `invalid request: the tool result for call "${part.toolCallId}" has no matching tool call earlier in the conversation (Gemini matches tool results to calls by function name)`,
      { param: "messages" },
    );
  }
  const text = part.content
    .filter((item): item is CanonicalTextPart => item.type === "text")
    .map((item) => item.text)
    .join("");
  const response: Json = { name, response: responseObject(text, part.isError === true) };
  const geminiId = decodeGeminiCallId(part.toolCallId)?.geminiId;
  if (geminiId) response.id = geminiId;
  return { functionResponse: response };
}

/** `response` must be an object: a JSON object result as is, anything else wrapped (errors under `error`). */
function responseObject(text: string, isError: boolean): Json {
  if (isError) return { error: text };
  const parsed = parseJson(text);
  return isPlainObject(parsed) ? parsed : { result: text };
}

/**
 * Base64 images (and data URLs) go inline; other URLs go as fileData (Gemini fetches them: Files API
 * and Cloud Storage URIs, YouTube and public http(s) URLs). Nothing is downloaded here.
 */
function imagePart(part: CanonicalImagePart): Json {
  const source = part.source;
  if (source.kind === "base64") return { inlineData: { mimeType: source.mediaType, data: source.data } };
  const [, mediaType, data] = DATA_URL.exec(source.url) ?? [];
  if (mediaType !== undefined && data !== undefined) return { inlineData: { mimeType: mediaType, data } };
  const mimeType = imageTypeOf(source.url);
  return { fileData: mimeType ? { mimeType, fileUri: source.url } : { fileUri: source.url } };
}

function imageTypeOf(url: string): string | undefined {
  const path = url.split(/[?#]/)[0] ?? url;
  const extension = path.slice(path.lastIndexOf(".") + 1).toLowerCase();
  return IMAGE_TYPES[extension];
}

/** Tool-call arguments as the object Gemini wants: "" is {}, a non-object value is wrapped, bad JSON is {}. */
export function argumentsObject(text: string): Json {
  if (text.trim() === "") return {};
  const parsed = parseJson(text);
  if (isPlainObject(parsed)) return parsed;
  return parsed === undefined ? {} : { value: parsed };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isPlainObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
