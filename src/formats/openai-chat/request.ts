import { Type, type Static } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { InvalidRequestError } from "../../core/errors.ts";
import type { CanonicalRequest } from "../../core/canonical.ts";

const ContentPart = Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true });

const Message = Type.Object(
  {
    role: Type.Union([
      Type.Literal("system"),
      Type.Literal("developer"),
      Type.Literal("user"),
      Type.Literal("assistant"),
      Type.Literal("tool"),
      Type.Literal("function"),
    ]),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart), Type.Null()])),
  },
  { additionalProperties: true },
);

const FunctionTool = Type.Object(
  {
    type: Type.String({ minLength: 1 }),
    function: Type.Optional(
      Type.Object({ name: Type.String({ minLength: 1 }), parameters: Type.Optional(Type.Object({}, { additionalProperties: true })) }, { additionalProperties: true }),
    ),
  },
  { additionalProperties: true },
);

/** The chat-completions request fields the gateway checks; every other field passes through. */
export const ChatCompletionRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    messages: Type.Array(Message, { minItems: 1 }),
    stream: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    stream_options: Type.Optional(Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }, { additionalProperties: true }), Type.Null()])),
    max_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    max_completion_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    tools: Type.Optional(Type.Array(FunctionTool)),
    response_format: Type.Optional(Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true })),
    n: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1 }), Type.Null()])),
  },
  { additionalProperties: true },
);
export type ChatCompletionRequest = Static<typeof ChatCompletionRequest>;

const check = TypeCompiler.Compile(ChatCompletionRequest);

/** Validates a chat-completions body and summarizes it for plugins. */
export function decodeChatRequest(body: unknown): CanonicalRequest {
  if (!check.Check(body)) throw invalid(body);
  const request = body as ChatCompletionRequest;
  const cacheKey = (request as Record<string, unknown>).prompt_cache_key;
  return {
    ...(typeof cacheKey === "string" && cacheKey !== "" ? { cacheKey } : {}),
    model: request.model,
    stream: request.stream === true,
    maxOutputTokens: request.max_completion_tokens ?? request.max_tokens ?? undefined,
    clientWantsStreamUsage: request.stream_options?.include_usage === true,
    uses: {
      tools: (request.tools?.length ?? 0) > 0,
      images: request.messages.some((message) => Array.isArray(message.content) && message.content.some((part) => part.type === "image_url")),
      jsonOutput: request.response_format !== undefined && request.response_format.type !== "text",
      reasoning: typeof (request as Record<string, unknown>).reasoning_effort === "string" && (request as Record<string, unknown>).reasoning_effort !== "none",
    },
  };
}

function invalid(body: unknown): InvalidRequestError {
  const first = check.Errors(body).First()!;
  const param = first.path.replace(/^\//, "").replaceAll("/", ".");
  const value = first.value === undefined ? "missing" : JSON.stringify(first.value)?.slice(0, 60);
  const hint = param === "n" ? "only n=1 is supported" : first.message;
  return new InvalidRequestError(`invalid request: '${param || "body"}' ${hint} (got ${value})`, { param: param || undefined });
}
