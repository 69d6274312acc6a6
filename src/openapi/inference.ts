import { Type, type TSchema } from "@sinclair/typebox";
import { ChatCompletionRequest } from "../formats/openai-chat/request.ts";
import { CountTokensRequest, MessagesRequest } from "../formats/anthropic-messages/request.ts";
import { ResponsesRequest } from "../formats/openai-responses/request.ts";
import { DEFAULT_QUALITY, DEFAULT_SIZE, IMAGE_QUALITIES, IMAGE_SIZES, MAX_IMAGES, MAX_PROMPT_CHARS } from "../formats/openai-images/tokens.ts";
import { AnthropicErrorBody, ErrorBody, clientOperation, component, inferenceOperation, parameter } from "./operation.ts";

/**
 * The inference routes' docs. Request schemas are the ones the formats validate with (fields not named
 * pass through to the upstream); answers are the main fields of each wire format as the gateway writes them.
 */

const Open = { additionalProperties: true } as const;
const Int = Type.Integer({ minimum: 0 });
const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);

// OpenAI chat completions

const ChatUsage = Type.Object(
  {
    prompt_tokens: Int,
    completion_tokens: Int,
    total_tokens: Int,
    prompt_tokens_details: Type.Optional(Type.Object({ cached_tokens: Type.Optional(Int) }, Open)),
    completion_tokens_details: Type.Optional(Type.Object({ reasoning_tokens: Type.Optional(Int) }, Open)),
  },
  Open,
);
const ToolCall = Type.Object({
  id: Type.String(),
  type: Type.Literal("function"),
  function: Type.Object({ name: Type.String(), arguments: Type.String({ description: "JSON text" }) }),
});
const FinishReason = Type.Union(["stop", "length", "tool_calls", "content_filter"].map((reason) => Type.Literal(reason)));

const ChatCompletion = component(
  "ChatCompletion",
  Type.Object(
    {
      id: Type.String(),
      object: Type.Literal("chat.completion"),
      created: Type.Integer({ description: "Unix seconds" }),
      model: Type.String({ description: "The model id as the request named it" }),
      choices: Type.Array(
        Type.Object({
          index: Int,
          message: Type.Object(
            {
              role: Type.Literal("assistant"),
              content: Nullable(Type.String()),
              reasoning_content: Type.Optional(Type.String({ description: "The model's reasoning text, when it shows any" })),
              tool_calls: Type.Optional(Type.Array(ToolCall)),
            },
            Open,
          ),
          finish_reason: FinishReason,
        }),
      ),
      usage: ChatUsage,
    },
    { ...Open, description: "A chat completion (non-streaming answer)." },
  ),
);

component(
  "ChatCompletionChunk",
  Type.Object(
    {
      id: Type.String(),
      object: Type.Literal("chat.completion.chunk"),
      created: Type.Integer(),
      model: Type.String(),
      choices: Type.Array(
        Type.Object({
          index: Int,
          delta: Type.Object(
            { role: Type.Optional(Type.Literal("assistant")), content: Type.Optional(Nullable(Type.String())), reasoning_content: Type.Optional(Type.String()), tool_calls: Type.Optional(Type.Array(Type.Object({ index: Int }, Open))) },
            Open,
          ),
          finish_reason: Type.Union([FinishReason, Type.Null()]),
        }),
      ),
      usage: Type.Optional(Type.Union([ChatUsage, Type.Null()], { description: "In the last chunk, when stream_options.include_usage is true" })),
    },
    { ...Open, description: "One `data:` frame of a streaming chat completion." },
  ),
);

export const chatCompletionsDocs = inferenceOperation({
  summary: "Chat completions (OpenAI format), streaming or not",
  description:
    "Any catalog chat model, whatever its provider, in the OpenAI chat-completions format. The body is checked for the fields listed; " +
    "other fields pass through to the upstream. Errors: the Error shape; after the first streamed byte, an error is an in-stream `data: {error}` frame.",
  tags: ["inference"],
  request: component("ChatCompletionRequest", ChatCompletionRequest),
  response: ChatCompletion,
  stream: {
    description: "Server-sent events: each `data:` frame is a ChatCompletionChunk; the last is `data: [DONE]`.",
    example:
      'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\ndata: [DONE]\n\n',
  },
  errorBody: ErrorBody,
});

// Anthropic messages

const MessagesUsage = Type.Object(
  { input_tokens: Int, output_tokens: Int, cache_creation_input_tokens: Type.Optional(Int), cache_read_input_tokens: Type.Optional(Int) },
  Open,
);
const Message = component(
  "Message",
  Type.Object(
    {
      id: Type.String(),
      type: Type.Literal("message"),
      role: Type.Literal("assistant"),
      model: Type.String(),
      content: Type.Array(
        Type.Object({ type: Type.String({ description: "text, thinking, redacted_thinking, tool_use, …" }) }, { ...Open, description: "A content block" }),
      ),
      stop_reason: Type.Union(["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"].map((reason) => Type.Literal(reason))),
      stop_sequence: Nullable(Type.String()),
      usage: MessagesUsage,
    },
    { ...Open, description: "A Messages answer (non-streaming)." },
  ),
);

const ANTHROPIC_HEADERS = [
  parameter("header", "anthropic-version", "Accepted, not required (e.g. 2023-06-01)"),
  parameter("header", "anthropic-beta", "Beta flags, passed on to Anthropic upstreams"),
];

export const messagesDocs = inferenceOperation({
  summary: "Messages (Anthropic format) for every model family, streaming or not",
  description:
    "Any catalog chat model in the Anthropic Messages format (Claude Code and the Anthropic SDKs). Errors: Anthropic's shape (AnthropicError); " +
    "after the first streamed byte, an `event: error` frame.",
  tags: ["inference"],
  headers: ANTHROPIC_HEADERS,
  request: component("MessagesRequest", MessagesRequest),
  response: Message,
  stream: {
    description:
      "Server-sent events, Anthropic's: message_start, content_block_start, content_block_delta (text_delta, thinking_delta, input_json_delta), " +
      "content_block_stop, message_delta (stop_reason, usage), message_stop; ping at times; error on failure.",
    example:
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":0}}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n' +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
  },
  errorBody: AnthropicErrorBody,
});

export const countTokensDocs = clientOperation({
  summary: "Input tokens of a Messages request: an upper bound (exact o200k for OpenAI models)",
  description: "Never under-counts, so clients compact their context in time. Nothing is sent upstream or billed; the call counts against the key's requests per minute.",
  tags: ["inference"],
  parameters: ANTHROPIC_HEADERS,
  request: component("CountTokensRequest", CountTokensRequest),
  response: component("TokenCount", Type.Object({ input_tokens: Int })),
  errors: [400, 403, 413, 429, 500, 503],
  errorBody: AnthropicErrorBody,
});

// OpenAI responses

const ResponseObject = component(
  "Response",
  Type.Object(
    {
      id: Type.String(),
      object: Type.Literal("response"),
      created_at: Type.Integer({ description: "Unix seconds" }),
      status: Type.Union(["completed", "incomplete", "failed"].map((status) => Type.Literal(status))),
      model: Type.String(),
      output: Type.Array(Type.Object({ type: Type.String({ description: "message, reasoning, function_call, custom_tool_call" }) }, Open)),
      usage: Type.Union([
        Type.Object(
          {
            input_tokens: Int,
            output_tokens: Int,
            total_tokens: Int,
            input_tokens_details: Type.Optional(Type.Object({ cached_tokens: Int }, Open)),
            output_tokens_details: Type.Optional(Type.Object({ reasoning_tokens: Int }, Open)),
          },
          Open,
        ),
        Type.Null(),
      ]),
      error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
      incomplete_details: Type.Union([Type.Object({ reason: Type.String() }), Type.Null()]),
    },
    { ...Open, description: "A Responses answer (non-streaming)." },
  ),
);

export const responsesDocs = inferenceOperation({
  summary: "Responses (OpenAI Responses API, as Codex CLI uses it), streaming or not",
  description:
    "Stateless: send the whole conversation in `input` every turn (previous_response_id and conversation are refused with a 400). " +
    "Errors: the Error shape; after the first streamed byte, a `response.failed` event with the error in response.error.",
  tags: ["inference"],
  request: component("ResponsesRequest", ResponsesRequest),
  response: ResponseObject,
  stream: {
    description:
      "Server-sent events, each with a sequence_number: response.created, response.in_progress, response.output_item.added, " +
      "response.output_text.delta, response.reasoning_summary_text.delta, response.function_call_arguments.delta, response.output_item.done, " +
      "then response.completed, response.incomplete or response.failed (the Response, usage included).",
    example:
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}\n\n' +
      'event: response.completed\ndata: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}}\n\n',
  },
  errorBody: ErrorBody,
});

// OpenAI images

const ImageGenerationRequest = component(
  "ImageGenerationRequest",
  Type.Object(
    {
      model: Type.String({ minLength: 1, description: "An image model's id (GET /v1/models: output_modalities has image)" }),
      prompt: Type.String({ minLength: 1, maxLength: MAX_PROMPT_CHARS }),
      size: Type.Optional(Type.Union(IMAGE_SIZES.map((size) => Type.Literal(size)), { default: DEFAULT_SIZE })),
      quality: Type.Optional(Type.Union(IMAGE_QUALITIES.map((quality) => Type.Literal(quality)), { default: DEFAULT_QUALITY })),
      n: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_IMAGES, default: 1 })),
      response_format: Type.Optional(Type.Literal("b64_json", { description: "Only b64_json: no hosted URL is kept" })),
      stream: Type.Optional(Type.Literal(false, { description: "Not supported: the images come in one JSON answer" })),
    },
    { ...Open, description: "The fields checked by POST /v1/images/generations (formats/openai-images/request.ts); null takes the default." },
  ),
);

const ImagesResponse = component(
  "ImagesResponse",
  Type.Object(
    {
      created: Type.Integer({ description: "Unix seconds" }),
      data: Type.Array(Type.Object({ b64_json: Type.String({ description: "A base64 PNG" }), revised_prompt: Type.Optional(Type.String()) })),
      usage: Type.Optional(
        Type.Object({ input_tokens: Int, output_tokens: Int, total_tokens: Int, input_tokens_details: Type.Optional(Type.Object({}, Open)) }, Open),
      ),
    },
    Open,
  ),
);

export const imagesDocs = inferenceOperation({
  summary: "Image generation (OpenAI Images format): base64 PNG in data[].b64_json, billed by tokens",
  description: "Image models only; chat models are a 400 here. Never streams.",
  tags: ["inference"],
  request: ImageGenerationRequest,
  response: ImagesResponse,
  errorBody: ErrorBody,
});
