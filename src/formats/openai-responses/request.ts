import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import type { ValueError } from "@sinclair/typebox/errors";
import { InvalidRequestError } from "../../core/errors.ts";
import type { CanonicalRequest } from "../../core/canonical.ts";
import { declaresTools } from "./tools.ts";

const Open = { additionalProperties: true } as const;
const Nullable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

/** One input item: its own fields are checked per type (ITEM_CHECKS) so errors name the exact field. */
const InputItem = Type.Object({ type: Type.Optional(Type.String({ minLength: 1 })) }, Open);

const Tool = Type.Object({ type: Type.String({ minLength: 1 }) }, Open);

/**
 * The Responses request fields the gateway checks (docs/wire-formats.md#openai-responses); every other field passes
 * through.
 */
export const ResponsesRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    input: Type.Union([Type.String(), Type.Array(InputItem)]),
    instructions: Nullable(Type.String()),
    tools: Nullable(Type.Array(Tool)),
    tool_choice: Nullable(Type.Union([Type.String({ minLength: 1 }), Type.Object({ type: Type.String({ minLength: 1 }) }, Open)])),
    parallel_tool_calls: Nullable(Type.Boolean()),
    max_output_tokens: Nullable(Type.Integer({ minimum: 1 })),
    reasoning: Nullable(Type.Object({ effort: Nullable(Type.String()), summary: Nullable(Type.String()) }, Open)),
    text: Nullable(Type.Object({ format: Nullable(Type.Object({ type: Type.String({ minLength: 1 }) }, Open)) }, Open)),
    stream: Nullable(Type.Boolean()),
    store: Nullable(Type.Boolean()),
    include: Nullable(Type.Array(Type.String())),
    previous_response_id: Nullable(Type.String()),
    temperature: Nullable(Type.Number()),
    top_p: Nullable(Type.Number()),
  },
  Open,
);
export type ResponsesRequest = Static<typeof ResponsesRequest>;

const Role = Type.Union([Type.Literal("user"), Type.Literal("assistant"), Type.Literal("system"), Type.Literal("developer")]);
const Part = Type.Object({ type: Type.String({ minLength: 1 }) }, Open);

/** Per item type: the fields a translator relies on. Unknown types pass (the upstream or toCanonical decides). */
const ITEM_SCHEMAS: Record<string, TSchema> = {
  message: Type.Object({ role: Role, content: Type.Union([Type.String(), Type.Array(Part)]) }, Open),
  function_call: Type.Object({ call_id: Type.String({ minLength: 1 }), name: Type.String({ minLength: 1 }), arguments: Type.String() }, Open),
  function_call_output: Type.Object({ call_id: Type.String({ minLength: 1 }), output: Type.Union([Type.String(), Type.Array(Part)]) }, Open),
  custom_tool_call: Type.Object({ call_id: Type.String({ minLength: 1 }), name: Type.String({ minLength: 1 }), input: Type.String() }, Open),
  custom_tool_call_output: Type.Object({ call_id: Type.String({ minLength: 1 }), output: Type.Union([Type.String(), Type.Array(Part)]) }, Open),
  reasoning: Type.Object({ summary: Type.Optional(Type.Array(Part)), encrypted_content: Nullable(Type.String()) }, Open),
  // Codex declares its tools in an input item for OpenAI model names (namespaces included).
  additional_tools: Type.Object({ tools: Type.Array(Tool) }, Open),
};
const ITEM_CHECKS: Record<string, TypeCheck<TSchema>> = Object.fromEntries(
  Object.entries(ITEM_SCHEMAS).map(([type, schema]) => [type, TypeCompiler.Compile(schema)]),
);

const check = TypeCompiler.Compile(ResponsesRequest);

/** Fields that need responses stored server-side: a stateless gateway refuses them rather than dropping them. */
const STATEFUL_FIELDS = ["previous_response_id", "conversation"] as const;

/** Validates a Responses body and summarizes it for plugins. */
export function decodeResponsesRequest(body: unknown): CanonicalRequest {
  if (!check.Check(body)) throw invalid(check, body, "");
  const request = body as ResponsesRequest & Record<string, unknown>;
  for (const field of STATEFUL_FIELDS) {
    if (request[field] !== undefined && request[field] !== null && request[field] !== "") {
      throw new InvalidRequestError(
        `'${field}' is not supported: this gateway does not store responses (store:false semantics). Send the whole conversation in 'input' on every turn, as Codex does.`,
        { param: field },
      );
    }
  }
  if (request.background === true) {
    throw new InvalidRequestError("'background' responses are not supported: this gateway does not store responses", { param: "background" });
  }
  const items = typeof request.input === "string" ? [] : (request.input as Record<string, unknown>[]);
  items.forEach(checkItem);
  const format = request.text?.format?.type;
  const cacheKey = request.prompt_cache_key;
  return {
    ...(typeof cacheKey === "string" && cacheKey !== "" ? { cacheKey } : {}),
    model: request.model,
    stream: request.stream === true,
    maxOutputTokens: request.max_output_tokens ?? undefined,
    // The Responses API always reports usage (response.completed carries it).
    clientWantsStreamUsage: true,
    uses: {
      tools: declaresTools(request),
      images: items.some(hasImage),
      jsonOutput: format === "json_schema" || format === "json_object",
      // Codex sends a reasoning effort on every turn, whatever the model: a hint, not a requirement.
      reasoning: false,
    },
  };
}

/** Checks one input item against the schema of its type (a message may omit `type`). */
function checkItem(item: Record<string, unknown>, index: number): void {
  const type = typeof item.type === "string" ? item.type : "role" in item ? "message" : undefined;
  if (type === undefined) {
    throw new InvalidRequestError(`invalid request: 'input.${index}' has neither a 'type' nor a 'role'`, { param: `input.${index}` });
  }
  const itemCheck = ITEM_CHECKS[type];
  if (itemCheck && !itemCheck.Check(item)) throw invalid(itemCheck, item, `input.${index}.`);
}

function hasImage(item: Record<string, unknown>): boolean {
  const content = item.content ?? item.output;
  return Array.isArray(content) && content.some((part) => (part as { type?: unknown })?.type === "input_image");
}

function invalid(schema: TypeCheck<TSchema>, value: unknown, prefix: string): InvalidRequestError {
  const first = deepest(schema.Errors(value).First()!);
  const param = prefix + first.path.replace(/^\//, "").replaceAll("/", ".");
  const shown = first.value === undefined ? "missing" : JSON.stringify(first.value)?.slice(0, 60);
  const name = param.replace(/\.$/, "") || "body";
  return new InvalidRequestError(`invalid request: '${name}' ${first.message} (got ${shown})`, { param: name === "body" ? undefined : name });
}

/** A union's error names the union; the error of its closest variant names the field actually at fault. */
function deepest(error: ValueError): ValueError {
  let best = error;
  for (const variant of error.errors ?? []) {
    const inner = variant.First();
    if (inner && inner.path.length > best.path.length) best = deepest(inner);
  }
  return best;
}
