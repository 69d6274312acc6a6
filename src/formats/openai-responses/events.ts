import type { FinishReason, StreamEvent } from "../../core/canonical.ts";
import { readResponsesUsage } from "./usage.ts";
import { canonicalToolName, wrapCustomInput } from "./tools.ts";
import { RESPONSES_FORMAT } from "./reasoning-state.ts";
import { isJsonObject, objectOf, type JsonObject } from "../json.ts";

type Json = JsonObject;

interface ToolItem {
  index: number;
  custom: boolean;
  /**
   * Arguments already reported (some upstreams send them only in the `.done` events:
   * docs/wire-formats.md#openai-responses).
   */
  reported: boolean;
  input: string;
}

/** What one Responses stream event from an upstream carries, in canonical events. */
export interface ResponsesEventReader {
  read(event: Json): StreamEvent[];
  /** Whether a terminal event (completed, incomplete, failed, error) was read. */
  readonly finished: boolean;
}

/**
 * Reads Responses stream events (docs/wire-formats.md#openai-responses) as canonical events: the relay's view for
 * metering and plugins, and the stream decoder's whole job. Tool calls are numbered 0.. in the order their items
 * are added; arguments that only come in `.done` events are reported from there.
 */
export function createResponsesEventReader(): ResponsesEventReader {
  const tools = new Map<string, ToolItem>();
  let toolCount = 0;
  let finished = false;
  let model = "";

  function toolItem(item: unknown, events: StreamEvent[]): ToolItem | undefined {
    if (!isJsonObject(item) || (item.type !== "function_call" && item.type !== "custom_tool_call")) return undefined;
    const key = String(item.id ?? item.call_id ?? "");
    let tool = tools.get(key);
    if (!tool) {
      tool = { index: toolCount++, custom: item.type === "custom_tool_call", reported: false, input: "" };
      tools.set(key, tool);
      const name = canonicalToolName(String(item.name ?? ""), item.namespace);
      events.push({ type: "tool_call_start", index: tool.index, id: String(item.call_id ?? key), name });
    }
    return tool;
  }

  function report(tool: ToolItem | undefined, args: unknown, events: StreamEvent[]): void {
    if (!tool || tool.reported) return;
    tool.reported = true;
    const text = tool.custom ? wrapCustomInput(args) : typeof args === "string" && args.trim() !== "" ? args : "{}";
    events.push({ type: "tool_call_delta", index: tool.index, arguments: text });
  }

  function terminal(response: unknown, events: StreamEvent[], finish: FinishReason | undefined): void {
    finished = true;
    const usage = readResponsesUsage(objectOf(response).usage);
    if (usage) events.push({ type: "usage", usage });
    if (finish) events.push({ type: "message_end", finishReason: finish });
  }

  return {
    get finished() {
      return finished;
    },
    read(event: Json): StreamEvent[] {
      const events: StreamEvent[] = [];
      switch (event?.type) {
        case "response.created": {
          const response = objectOf(event.response);
          if (typeof response.model === "string") model = response.model;
          events.push({
            type: "message_start",
            ...(typeof response.id === "string" ? { id: response.id } : {}),
            ...(typeof response.model === "string" ? { model: response.model } : {}),
          });
          break;
        }
        case "response.output_text.delta":
        case "response.refusal.delta":
          if (typeof event.delta === "string" && event.delta !== "") events.push({ type: "text_delta", text: event.delta });
          break;
        case "response.reasoning_summary_text.delta":
        case "response.reasoning_text.delta":
          if (typeof event.delta === "string" && event.delta !== "") events.push({ type: "reasoning_delta", text: event.delta });
          break;
        case "response.output_item.added":
          toolItem(event.item, events);
          break;
        case "response.function_call_arguments.delta": {
          const tool = tools.get(String(event.item_id));
          if (tool && !tool.custom && typeof event.delta === "string" && event.delta !== "") {
            // Deltas count as reported only once one arrived; an empty call still gets "{}" at its end.
            tool.reported = true;
            events.push({ type: "tool_call_delta", index: tool.index, arguments: event.delta });
          }
          break;
        }
        case "response.function_call_arguments.done":
          report(tools.get(String(event.item_id)), event.arguments, events);
          break;
        case "response.custom_tool_call_input.delta": {
          const tool = tools.get(String(event.item_id));
          if (tool && typeof event.delta === "string") tool.input += event.delta;
          break;
        }
        case "response.output_item.done": {
          const item = objectOf(event.item);
          if (item.type === "reasoning" && typeof item.encrypted_content === "string" && item.encrypted_content !== "") {
            // OpenAI's encrypted reasoning, bound to this format and model: client encoders tag it with the origin.
            const signature: StreamEvent & { origin: { format: string; model: string } } = {
              type: "reasoning_signature",
              signature: item.encrypted_content,
              origin: { format: RESPONSES_FORMAT, model },
            };
            events.push(signature);
          }
          const tool = toolItem(item, events);
          if (tool) report(tool, tool.custom ? (typeof item.input === "string" ? item.input : tool.input) : item.arguments, events);
          break;
        }
        case "response.completed":
          terminal(event.response, events, toolCount > 0 ? "tool_calls" : "stop");
          break;
        case "response.incomplete": {
          const reason = objectOf(objectOf(event.response).incomplete_details).reason;
          terminal(event.response, events, reason === "content_filter" ? "content_filter" : "length");
          break;
        }
        case "response.failed": {
          terminal(event.response, events, undefined);
          const error = objectOf(objectOf(event.response).error);
          events.push({ type: "error", message: String(error.message ?? "upstream response failed"), ...(error.code ? { code: String(error.code) } : {}) });
          break;
        }
        case "error":
          finished = true;
          events.push({ type: "error", message: String(event.message ?? objectOf(event.error).message ?? "upstream stream error"), ...(event.code ? { code: String(event.code) } : {}) });
          break;
      }
      return events;
    },
  };
}
