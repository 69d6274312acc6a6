import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import { InvalidRequestError } from "../../core/errors.ts";
import type { CanonicalRequest } from "../../core/canonical.ts";

/** A content block: its `type` is checked, the rest passes through (new block types keep working). */
const Block = Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true });

/**
 * A turn. `system` is a mid-conversation system message (beta mid-conversation-system-2026-04-07, sent by
 * Claude Code 2.1.x): relayed as is to Anthropic, hoisted into the system prompt for other upstreams.
 * It may not open the conversation (that is the top-level `system` field): see leadingSystem.
 */
const Message = Type.Object(
  {
    role: Type.Union([Type.Literal("user"), Type.Literal("assistant"), Type.Literal("system")], { error: 'must be "user", "assistant" or "system"' }),
    content: Type.Union([Type.String(), Type.Array(Block)], { error: "must be a string or an array of content blocks" }),
  },
  { additionalProperties: true },
);

const SystemBlock = Type.Object({ type: Type.Literal("text"), text: Type.String() }, { additionalProperties: true });

/** A custom tool (`input_schema`) or a server tool (`type`, e.g. web_search_20250305): both carry a name. */
const Tool = Type.Object(
  { name: Type.String({ minLength: 1 }), input_schema: Type.Optional(Type.Object({}, { additionalProperties: true })) },
  { additionalProperties: true },
);

/** The fields both /v1/messages and /v1/messages/count_tokens check; every other field passes through. */
const commonFields = {
  model: Type.String({ minLength: 1 }),
  messages: Type.Array(Message, { minItems: 1 }),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(SystemBlock)], { error: "must be a string or an array of text blocks" })),
  tools: Type.Optional(Type.Array(Tool)),
  tool_choice: Type.Optional(Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true })),
  thinking: Type.Optional(
    Type.Object({ type: Type.String({ minLength: 1 }), budget_tokens: Type.Optional(Type.Integer({ minimum: 1 })) }, { additionalProperties: true }),
  ),
  output_config: Type.Optional(Type.Object({}, { additionalProperties: true })),
  metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
  temperature: Type.Optional(Type.Number({ minimum: 0 })),
  top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  top_k: Type.Optional(Type.Integer({ minimum: 0 })),
  stop_sequences: Type.Optional(Type.Array(Type.String())),
};

/** A Messages request (POST /v1/messages). `max_tokens` is required, as Anthropic requires it. */
export const MessagesRequest = Type.Object(
  { ...commonFields, max_tokens: Type.Integer({ minimum: 1 }), stream: Type.Optional(Type.Boolean()) },
  { additionalProperties: true },
);
export type MessagesRequest = Static<typeof MessagesRequest>;

/** A count_tokens request: the same shape without `max_tokens` (and without `stream`). */
export const CountTokensRequest = Type.Object(commonFields, { additionalProperties: true });
export type CountTokensRequest = Static<typeof CountTokensRequest>;

const checkMessages = TypeCompiler.Compile(MessagesRequest);
const checkCountTokens = TypeCompiler.Compile(CountTokensRequest);

/** Validates a Messages body and summarizes it for plugins (throws InvalidRequestError naming the field). */
export function decodeMessagesRequest(body: unknown): CanonicalRequest {
  if (!checkMessages.Check(body)) throw invalid(checkMessages, body);
  const request = body as MessagesRequest;
  leadingSystem(request);
  return {
    model: request.model,
    stream: request.stream === true,
    maxOutputTokens: request.max_tokens,
    // A Messages stream always carries usage (message_start / message_delta): nothing to ask for.
    clientWantsStreamUsage: true,
    uses: featuresUsed(request),
  };
}

/** Validates a count_tokens body (throws InvalidRequestError naming the field). */
export function validateCountTokensRequest(body: unknown): CountTokensRequest {
  if (!checkCountTokens.Check(body)) throw invalid(checkCountTokens, body);
  leadingSystem(body as CountTokensRequest);
  return body as CountTokensRequest;
}

/** A system message only goes between turns; the conversation starts with a user or assistant turn. */
function leadingSystem(request: CountTokensRequest): void {
  if (request.messages[0]?.role !== "system") return;
  throw new InvalidRequestError('messages.0.role: must be "user" or "assistant" (got "system"); a system message may only follow other turns, use the top-level `system` field', {
    param: "messages.0.role",
  });
}

/** The features the capabilities plugin checks against the model. */
function featuresUsed(request: MessagesRequest): NonNullable<CanonicalRequest["uses"]> {
  const thinking = request.thinking?.type;
  const format = (request.output_config as { format?: unknown } | undefined)?.format;
  return {
    tools: (request.tools?.length ?? 0) > 0,
    images: request.messages.some((message) => Array.isArray(message.content) && message.content.some(hasImage)),
    jsonOutput: format !== undefined && format !== null,
    reasoning: thinking !== undefined && thinking !== "disabled",
  };
}

/** An image block, also inside a tool_result. */
function hasImage(block: { type: string; content?: unknown }): boolean {
  if (block.type === "image") return true;
  return block.type === "tool_result" && Array.isArray(block.content) && block.content.some((inner) => inner?.type === "image");
}

/** The first schema violation as Anthropic words it: `<field>: <problem>`. */
function invalid(check: TypeCheck<TSchema>, body: unknown): InvalidRequestError {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return new InvalidRequestError("request body must be a JSON object");
  const first = check.Errors(body).First()!;
  const param = first.path.replace(/^\//, "").replaceAll("/", ".");
  if (first.value === undefined) return new InvalidRequestError(`${param}: Field required`, { param });
  const custom = typeof first.schema.error === "string" ? first.schema.error : first.message;
  const got = JSON.stringify(first.value)?.slice(0, 60);
  return new InvalidRequestError(`${param || "body"}: ${custom} (got ${got})`, { param: param || undefined });
}
