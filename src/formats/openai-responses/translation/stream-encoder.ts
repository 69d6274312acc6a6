import type { GatewayContext } from "../../../core/context.ts";
import type { StreamEncoder } from "../../../core/format.ts";
import { sseFrame } from "../../../core/sse.ts";
import type { FinishReason, StreamEvent, Usage } from "../../../core/canonical.ts";
import { failedCode, failedMessage } from "../errors.ts";
import { encryptedContentFor } from "../reasoning-state.ts";
import { clientTools, type ClientTool } from "../tools.ts";
import { messageItem, outputText, reasoningItem, responseIds, responseObject, statusFor, toolCallItem } from "./output.ts";

type Json = Record<string, unknown>;

/** The text or reasoning item being streamed (one at a time). */
interface OpenItem {
  kind: "message" | "reasoning";
  outputIndex: number;
  id: string;
  text: string;
  /** Reasoning: a summary part was opened (only once text arrives). */
  partOpen: boolean;
  encrypted?: string;
}

interface ToolState {
  outputIndex: number;
  ids: { fc: string; ctc: string };
  call: { id: string; name: string; arguments: string };
  tool: ClientTool | undefined;
  open: boolean;
}

/**
 * Canonical events -> Responses stream events (docs/wire-formats.md#streams, docs/wire-formats.md#what-codex-needs):
 * response.created and response.in_progress first; every output item opened with output_item.added and
 * closed with output_item.done (Codex only keeps done items); a sequence_number on every event; the
 * terminal response.completed / response.incomplete carries the whole output and the usage (with
 * total_tokens) once the upstream stream ended, since usage may follow the finish; an error is a
 * response.failed with the error inside `response.error`. No [DONE].
 */
export function createResponsesStreamEncoder(ctx: GatewayContext): StreamEncoder {
  const ids = responseIds(ctx);
  const tools = clientTools(ctx.body);
  const createdAt = Math.floor(Date.now() / 1000);
  const output: Json[] = [];
  const calls = new Map<number, ToolState>();
  let sequence = 0;
  let started = false;
  let terminal = false;
  let current: OpenItem | undefined;
  let usage: Usage | undefined;
  let finish: FinishReason | undefined;

  function emit(type: string, payload: Json): string {
    return sseFrame(JSON.stringify({ type, sequence_number: sequence++, ...payload }), type);
  }

  function response(status: string, extra: { error?: Json; incomplete_details?: Json | null } = {}): Json {
    return responseObject(ctx, ids, createdAt, { status, output: output.filter(Boolean), usage, ...extra });
  }

  function start(): string {
    if (started) return "";
    started = true;
    const initial = response("in_progress");
    return emit("response.created", { response: initial }) + emit("response.in_progress", { response: initial });
  }

  function open(kind: OpenItem["kind"]): string {
    // Tool items stay open: an upstream may still stream their arguments (items close by output_index, in any order).
    let out = closeCurrent();
    const outputIndex = output.length;
    output.push(undefined as never);
    current = { kind, outputIndex, id: ids.item(kind === "message" ? "msg" : "rs", outputIndex), text: "", partOpen: false };
    if (kind === "message") {
      out += emit("response.output_item.added", { output_index: outputIndex, item: messageItem(current.id, "", "in_progress") });
      out += emit("response.content_part.added", { item_id: current.id, output_index: outputIndex, content_index: 0, part: outputText("") });
    } else {
      out += emit("response.output_item.added", { output_index: outputIndex, item: reasoningItem(current.id, "") });
    }
    return out;
  }

  function closeCurrent(): string {
    const item = current;
    if (!item) return "";
    current = undefined;
    const at = { item_id: item.id, output_index: item.outputIndex };
    let out = "";
    if (item.kind === "message") {
      out += emit("response.output_text.done", { ...at, content_index: 0, text: item.text, logprobs: [] });
      out += emit("response.content_part.done", { ...at, content_index: 0, part: outputText(item.text) });
      output[item.outputIndex] = messageItem(item.id, item.text, "completed");
    } else {
      if (item.partOpen) {
        const part = { type: "summary_text", text: item.text };
        out += emit("response.reasoning_summary_text.done", { ...at, summary_index: 0, text: item.text });
        out += emit("response.reasoning_summary_part.done", { ...at, summary_index: 0, part });
      }
      output[item.outputIndex] = reasoningItem(item.id, item.text, item.encrypted);
    }
    return out + emit("response.output_item.done", { output_index: item.outputIndex, item: output[item.outputIndex] });
  }

  function text(delta: string): string {
    if (delta === "") return ""; // never open an empty text item
    let out = current?.kind === "message" ? "" : open("message");
    current!.text += delta;
    out += emit("response.output_text.delta", { item_id: current!.id, output_index: current!.outputIndex, content_index: 0, delta, logprobs: [] });
    return out;
  }

  function reasoning(delta: string): string {
    if (delta === "") return "";
    // A signed reasoning block is complete: the next one is its own item (signatures are per block).
    let out = current?.kind === "reasoning" && current.encrypted === undefined ? "" : open("reasoning");
    const item = current!;
    const at = { item_id: item.id, output_index: item.outputIndex, summary_index: 0 };
    if (!item.partOpen) {
      item.partOpen = true;
      out += emit("response.reasoning_summary_part.added", { ...at, part: { type: "summary_text", text: "" } });
    }
    item.text += delta;
    return out + emit("response.reasoning_summary_text.delta", { ...at, delta });
  }

  function signature(event: Extract<StreamEvent, { type: "reasoning_signature" }>): string {
    const out = current?.kind === "reasoning" && current.encrypted === undefined ? "" : open("reasoning");
    // The event names no origin yet: the upstream model is known, its format only when the event says it.
    const origin = (event as { origin?: { format: string; model: string } }).origin ?? { format: "", model: ctx.target?.upstreamModel ?? "" };
    current!.encrypted = encryptedContentFor({ type: "reasoning", text: current!.text, signature: event.signature, origin });
    return out;
  }

  function toolStart(event: Extract<StreamEvent, { type: "tool_call_start" }>): string {
    let out = closeCurrent();
    const outputIndex = output.length;
    output.push(undefined as never);
    const state: ToolState = {
      outputIndex,
      ids: { fc: ids.item("fc", outputIndex), ctc: ids.item("ctc", outputIndex) },
      call: { id: event.id, name: event.name, arguments: "" },
      tool: tools.get(event.name),
      open: true,
    };
    calls.set(event.index, state);
    out += emit("response.output_item.added", { output_index: outputIndex, item: toolCallItem(state.ids, state.call, state.tool, "in_progress") });
    return out;
  }

  function toolDelta(event: Extract<StreamEvent, { type: "tool_call_delta" }>): string {
    const state = calls.get(event.index);
    if (!state?.open || event.arguments === "") return "";
    state.call.arguments += event.arguments;
    // Custom tools stream `{"input": ...}` JSON: their raw input is only known whole, at the end.
    if (state.tool?.kind === "custom") return "";
    return emit("response.function_call_arguments.delta", { item_id: state.ids.fc, output_index: state.outputIndex, delta: event.arguments });
  }

  function closeTool(state: ToolState): string {
    state.open = false;
    const item = toolCallItem(state.ids, state.call, state.tool, "completed");
    output[state.outputIndex] = item;
    const at = { item_id: item.id, output_index: state.outputIndex };
    let out = "";
    if (item.type === "custom_tool_call") {
      if (item.input !== "") out += emit("response.custom_tool_call_input.delta", { ...at, delta: item.input });
      out += emit("response.custom_tool_call_input.done", { ...at, input: item.input });
    } else {
      out += emit("response.function_call_arguments.done", { ...at, name: item.name, arguments: item.arguments });
    }
    return out + emit("response.output_item.done", { output_index: state.outputIndex, item });
  }

  function closeTools(): string {
    let out = "";
    for (const state of calls.values()) if (state.open) out += closeTool(state);
    return out;
  }

  function fail(message: string, status?: number, code?: string): string {
    terminal = true;
    const failed = failedCode({ status, code, message });
    return emit("response.failed", { response: response("failed", { error: { code: failed, message: failedMessage(message, failed) } }) });
  }

  return {
    encode(event: StreamEvent): string {
      if (terminal) return "";
      const head = start();
      switch (event.type) {
        case "text_delta":
          return head + text(event.text);
        case "reasoning_delta":
          return head + reasoning(event.text);
        case "reasoning_signature":
          return head + signature(event);
        case "tool_call_start":
          return head + toolStart(event);
        case "tool_call_delta":
          return head + toolDelta(event);
        case "usage":
          usage = event.usage;
          return head;
        case "message_end":
          finish = event.finishReason;
          return head + closeCurrent() + closeTools();
        case "error":
          return head + fail(event.message, event.status, event.code);
        default:
          return head;
      }
    },
    end(): string {
      if (terminal) return "";
      const head = start() + closeCurrent() + closeTools();
      if (finish === undefined) return head + fail("upstream stream ended before the response finished");
      terminal = true;
      const settled = statusFor(finish);
      if (settled.status === "failed") return head + fail("the upstream model stopped with an error");
      const type = settled.status === "incomplete" ? "response.incomplete" : "response.completed";
      return head + emit(type, { response: response(settled.status, { incomplete_details: settled.incomplete_details }) });
    },
  };
}
