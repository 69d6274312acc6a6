import { InvalidRequestError } from "../../../core/errors.ts";
import type { CanonicalChatRequest, CanonicalTool, CanonicalToolChoice } from "../../../core/canonical.ts";
import { geminiContents } from "./contents.ts";
import { geminiParameters, sanitizeGeminiSchema } from "./tool-schema.ts";
import { normalizeModel } from "./tool-ids.ts";

type Json = Record<string, unknown>;

/** Gemini's rule for function names (letters, digits, `_ . : -`, at most 64, starting with a letter or `_`). */
const FUNCTION_NAME = /^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$/;

/** Gemini 1.x/2.x take a thinking budget in tokens; later models a thinking level. */
const BUDGET_MODELS = /^gemini-[12](?:[.-]|$)/;
/**
 * Effort -> thinking budget (docs/wire-formats.md#sampling-and-limits heuristic; 24576 is Gemini 2.5 Flash's
 * maximum).
 */
const BUDGETS: Record<string, number> = { none: 0, minimal: 1024, low: 4096, medium: 8192, high: 16384, xhigh: 24576, max: 24576 };
/** Effort -> thinking level (Gemini 3+ cannot switch thinking off: none is its least). */
const LEVELS: Record<string, string> = { none: "minimal", minimal: "minimal", low: "low", medium: "medium", high: "high", xhigh: "high", max: "high" };

/**
 * A canonical request as a generateContent body (https://ai.google.dev/api/generate-content); the model goes in the
 * URL.
 */
export function geminiFromCanonical(request: CanonicalChatRequest, upstreamModel: string): Record<string, unknown> {
  const body: Json = { contents: geminiContents(request.messages, upstreamModel) };
  if (request.system) body.systemInstruction = { parts: [{ text: request.system }] };
  if (request.tools && request.tools.length > 0) {
    body.tools = [{ functionDeclarations: request.tools.map(functionDeclaration) }];
    if (request.toolChoice) body.toolConfig = { functionCallingConfig: functionCallingConfig(request.toolChoice) };
  }
  const generationConfig = generationConfigFor(request, upstreamModel);
  if (Object.keys(generationConfig).length > 0) body.generationConfig = generationConfig;
  return body;
}

function functionDeclaration(tool: CanonicalTool, index: number): Json {
  if (!FUNCTION_NAME.test(tool.name)) {
    throw new InvalidRequestError(
      `invalid request: tool name ${JSON.stringify(tool.name)} is not accepted by Gemini (letters, digits, _ . : - only, at most 64 characters, starting with a letter or _)`,
      { param: `tools.${index}` },
    );
  }
  const declaration: Json = { name: tool.name };
  if (tool.description) declaration.description = tool.description;
  const parameters = geminiParameters(tool.parameters);
  if (parameters) declaration.parameters = parameters;
  return declaration;
}

/**
 * tool_choice -> functionCallingConfig (docs/wire-formats.md#tools-and-tool-choice); parallel_tool_calls has no
 * Gemini equivalent.
 */
function functionCallingConfig(choice: CanonicalToolChoice): Json {
  switch (choice.type) {
    case "none":
      return { mode: "NONE" };
    case "required":
      return { mode: "ANY" };
    case "tool":
      return { mode: "ANY", allowedFunctionNames: [choice.name] };
    default:
      return { mode: "AUTO" };
  }
}

function generationConfigFor(request: CanonicalChatRequest, upstreamModel: string): Json {
  const config: Json = {};
  if (request.maxOutputTokens !== undefined) config.maxOutputTokens = request.maxOutputTokens;
  if (request.temperature !== undefined) config.temperature = request.temperature;
  if (request.topP !== undefined) config.topP = request.topP;
  if (request.topK !== undefined) config.topK = request.topK;
  if (request.stop && request.stop.length > 0) config.stopSequences = request.stop;
  const format = request.responseFormat;
  if (format) {
    config.responseMimeType = "application/json";
    if (format.type === "json_schema") {
      const schema = sanitizeGeminiSchema(format.schema);
      if (Object.keys(schema).length > 0) config.responseSchema = schema;
    }
  }
  const thinking = thinkingConfig(request.reasoning, upstreamModel);
  if (thinking) config.thinkingConfig = thinking;
  return config;
}

/**
 * Reasoning -> thinkingConfig: a token budget as is; an effort as a budget (Gemini 1.x/2.x) or a level
 * (later models), unknown efforts passed through. Thought summaries are asked for whenever thinking is on.
 */
export function thinkingConfig(reasoning: CanonicalChatRequest["reasoning"], upstreamModel: string): Json | undefined {
  if (!reasoning) return undefined;
  if (reasoning.budgetTokens !== undefined) {
    return { thinkingBudget: reasoning.budgetTokens, includeThoughts: reasoning.budgetTokens !== 0 };
  }
  const effort = reasoning.effort?.toLowerCase();
  if (!effort) return undefined;
  if (BUDGET_MODELS.test(normalizeModel(upstreamModel))) {
    const budget = BUDGETS[effort] ?? -1;
    return { thinkingBudget: budget, includeThoughts: budget !== 0 };
  }
  return { thinkingLevel: LEVELS[effort] ?? effort, includeThoughts: effort !== "none" };
}
