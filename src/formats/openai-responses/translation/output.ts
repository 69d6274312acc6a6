import type { GatewayContext } from "../../../core/context.ts";
import type { FinishReason, Usage } from "../../../core/canonical.ts";
import { writeResponsesUsage } from "../usage.ts";
import type { ClientTool } from "../tools.ts";
import { unwrapCustomInput } from "../tools.ts";

type Json = Record<string, unknown>;

/** Ids of one translated response: `resp_` and item ids derived from the gateway's request id (unique, stable). */
export interface ResponseIds {
  response: string;
  item(prefix: "msg" | "rs" | "fc" | "ctc", outputIndex: number): string;
}

export function responseIds(ctx: GatewayContext): ResponseIds {
  const hex = ctx.requestId.replace(/^gen-/, "");
  return { response: `resp_${hex}`, item: (prefix, outputIndex) => `${prefix}_${hex}_${outputIndex}` };
}

/**
 * The Responses status of a canonical finish (docs/wire-formats.md#finish-reasons): length and content filter are
 * incomplete, not failed.
 */
export function statusFor(finish: FinishReason): { status: string; incomplete_details: Json | null } {
  if (finish === "length") return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } };
  if (finish === "content_filter") return { status: "incomplete", incomplete_details: { reason: "content_filter" } };
  if (finish === "error") return { status: "failed", incomplete_details: null };
  return { status: "completed", incomplete_details: null };
}

/**
 * The response object for a Responses client: its own request settings echoed, the model as the
 * client named it. `usage` is null until known (in_progress events).
 */
export function responseObject(
  ctx: GatewayContext,
  ids: ResponseIds,
  createdAt: number,
  state: { status: string; output: Json[]; usage?: Usage; error?: Json | null; incomplete_details?: Json | null },
): Json {
  const body = ctx.body as Json;
  return {
    id: ids.response,
    object: "response",
    created_at: createdAt,
    status: state.status,
    background: false,
    error: state.error ?? null,
    incomplete_details: state.incomplete_details ?? null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: ctx.request.model,
    output: state.output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: body.reasoning ?? null,
    store: body.store ?? false,
    temperature: body.temperature ?? null,
    text: body.text ?? { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_p: body.top_p ?? null,
    truncation: body.truncation ?? "disabled",
    usage: state.usage ? writeResponsesUsage(state.usage) : null,
    metadata: body.metadata ?? {},
  };
}

export function messageItem(id: string, text: string, status: "in_progress" | "completed"): Json {
  return { type: "message", id, status, role: "assistant", content: status === "in_progress" ? [] : [outputText(text)] };
}

export function outputText(text: string): Json {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}

export function reasoningItem(id: string, summary: string, encrypted?: string): Json {
  const item: Json = { type: "reasoning", id, summary: summary === "" ? [] : [{ type: "summary_text", text: summary }] };
  if (encrypted !== undefined) item.encrypted_content = encrypted;
  return item;
}

/**
 * A tool call item in the shape the client declared: a `custom_tool_call` with the raw input for a
 * custom (freeform) tool (Codex's apply_patch fails on anything else: docs/wire-formats.md#what-codex-needs), a
 * `function_call` otherwise.
 */
export function toolCallItem(
  id: { fc: string; ctc: string },
  call: { id: string; name: string; arguments: string },
  tool: ClientTool | undefined,
  status: "in_progress" | "completed",
): Json {
  const namespace = tool?.namespace ? { namespace: tool.namespace } : {};
  const name = tool?.name ?? call.name;
  if (tool?.kind === "custom") {
    const input = status === "completed" ? unwrapCustomInput(call.arguments) : "";
    return { type: "custom_tool_call", id: id.ctc, status, call_id: call.id, name, ...namespace, input };
  }
  const args = status === "completed" && call.arguments.trim() === "" ? "{}" : call.arguments;
  return { type: "function_call", id: id.fc, status, call_id: call.id, name, ...namespace, arguments: args };
}
