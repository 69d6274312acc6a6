import type { CanonicalChatRequest, CanonicalToolChoice } from "../../../core/canonical.ts";
import { cacheControlField, repairHistory, thinkingWouldBeRejected, toAnthropicMessages } from "./history.ts";
import { enforceBreakpointRules } from "../cache.ts";

/** max_tokens when the client set none; the provider replaces it with the model's maximum or the budget's cap. */
export const DEFAULT_MAX_TOKENS = 8192;
/** Anthropic's smallest thinking budget. */
export const MIN_THINKING_BUDGET = 1024;

/** A common effort -> thinking budget heuristic (docs/wire-formats.md#sampling-and-limits). */
const EFFORT_BUDGET: Record<string, number> = {
  minimal: 1024,
  low: 4096,
  medium: 8192,
  high: 16384,
  xhigh: 32768,
  max: 65536,
};

const JSON_OBJECT_INSTRUCTION = "Respond with a single valid JSON object and nothing else.";

/** A canonical request as an Anthropic Messages body (for an Anthropic upstream). */
export function canonicalToMessages(request: CanonicalChatRequest, upstreamModel: string): Record<string, unknown> {
  const budget = thinkingBudget(request.reasoning);
  const maxTokens = request.maxOutputTokens ?? DEFAULT_MAX_TOKENS + (budget ?? 0);
  const messages = repairHistory(toAnthropicMessages(request.messages, upstreamModel));
  const body: Record<string, unknown> = { model: upstreamModel, max_tokens: maxTokens, messages };

  const jsonInstruction = request.responseFormat?.type === "json_object" ? JSON_OBJECT_INSTRUCTION : undefined;
  if (request.systemParts?.some((part) => part.cacheControl)) {
    // Blocks, so that each breakpoint stays where the client put it (docs/wire-formats.md#prompt-caching).
    const blocks: Record<string, unknown>[] = request.systemParts
      .filter((part) => part.text !== "")
      .map((part) => (part.cacheControl ? { type: "text", text: part.text, cache_control: cacheControlField(part.cacheControl) } : { type: "text", text: part.text }));
    if (jsonInstruction) blocks.push({ type: "text", text: jsonInstruction });
    body.system = blocks;
  } else {
    const system = [request.system, jsonInstruction].filter(Boolean).join("\n\n");
    if (system) body.system = system;
  }

  if (budget !== undefined && !thinkingWouldBeRejected(messages)) body.thinking = { type: "enabled", budget_tokens: budget };
  fitThinkingBudget(body);
  const thinking = body.thinking !== undefined;

  if (request.tools?.length) {
    body.tools = request.tools.map((tool) => ({
      name: tool.name,
      ...(tool.description ? { description: tool.description } : {}),
      input_schema: tool.parameters && typeof tool.parameters === "object" ? tool.parameters : { type: "object", properties: {} },
      ...(tool.cacheControl ? { cache_control: cacheControlField(tool.cacheControl) } : {}),
    }));
    const choice = toolChoice(request.toolChoice, request.parallelToolCalls, thinking);
    if (choice) body.tool_choice = choice;
  }

  // Thinking takes no temperature or top_k, and top_p only from 0.95 (Anthropic); new models refuse temperature with
  // top_p (docs/wire-formats.md#anthropic-messages).
  if (request.temperature !== undefined && !thinking) body.temperature = Math.min(1, Math.max(0, request.temperature));
  if (request.topP !== undefined && body.temperature === undefined && (!thinking || request.topP >= 0.95)) body.top_p = request.topP;
  if (request.topK !== undefined && !thinking) body.top_k = request.topK;
  if (request.stop?.length) body.stop_sequences = [...request.stop];
  if (request.responseFormat?.type === "json_schema") body.output_config = { format: { type: "json_schema", schema: request.responseFormat.schema } };
  if (request.user) body.metadata = { user_id: request.user };
  if (request.stream) body.stream = true;
  enforceBreakpointRules(body);
  return body;
}

function thinkingBudget(reasoning: CanonicalChatRequest["reasoning"]): number | undefined {
  if (!reasoning) return undefined;
  if (reasoning.budgetTokens !== undefined) return reasoning.budgetTokens > 0 ? reasoning.budgetTokens : undefined;
  if (reasoning.effort === undefined || reasoning.effort === "none") return undefined;
  return EFFORT_BUDGET[reasoning.effort] ?? EFFORT_BUDGET.medium;
}

/**
 * Keeps `thinking.budget_tokens` below `max_tokens` (Anthropic's rule), lowering the budget rather than
 * raising max_tokens (the budget plugin reserved for the client's cap); drops thinking below the minimum.
 */
export function fitThinkingBudget(body: Record<string, unknown>): void {
  const thinking = body.thinking as { type?: string; budget_tokens?: number } | undefined;
  if (thinking?.type !== "enabled" || typeof thinking.budget_tokens !== "number") return;
  const maxTokens = Number(body.max_tokens);
  const budget = Math.min(thinking.budget_tokens, maxTokens - 1);
  if (budget < MIN_THINKING_BUDGET) delete body.thinking;
  else if (budget !== thinking.budget_tokens) body.thinking = { ...thinking, budget_tokens: budget };
}

/** docs/wire-formats.md#tools-and-tool-choice; forced tool use is not allowed with thinking: it becomes auto. */
function toolChoice(choice: CanonicalToolChoice | undefined, parallel: boolean | undefined, thinking: boolean): Record<string, unknown> | undefined {
  let mapped: Record<string, unknown> | undefined;
  switch (choice?.type) {
    case "none":
      return { type: "none" };
    case "required":
      mapped = thinking ? { type: "auto" } : { type: "any" };
      break;
    case "tool":
      mapped = thinking ? { type: "auto" } : { type: "tool", name: choice.name };
      break;
    case "auto":
      mapped = { type: "auto" };
      break;
  }
  if (parallel === false) return { ...(mapped ?? { type: "auto" }), disable_parallel_tool_use: true };
  return mapped;
}
