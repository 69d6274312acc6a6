import type { GatewayContext } from "../../../core/context.ts";
import type { StreamEncoder } from "../../../core/format.ts";
import type { FinishReason, StreamEvent, Usage } from "../../../core/canonical.ts";
import { anthropicErrorType } from "../errors.ts";
import { redact } from "../../../core/secrets.ts";
import { toAnthropicToolId } from "../ids.ts";
import { writeMessagesUsage } from "../usage.ts";
import { messageIdFor, stopReasonFor } from "./encode-response.ts";
import { wrapForeignSignature, type ReasoningOrigin } from "../signature.ts";
import { parseArguments } from "./history.ts";

interface ToolCall {
  /** The canonical tool index (the id's fallback). */
  key: number;
  id: string;
  name: string;
  args: string;
  /** new: only fragments seen; live: its block is open and streams; pending: waits for the live one; done: emitted. */
  state: "new" | "live" | "pending" | "done";
}

/**
 * Canonical events -> Anthropic SSE (docs/wire-formats.md#streams): message_start (with an input estimate) and ping
 * first; blocks numbered 0,1,2… in start order, each a start, its deltas and a stop, never overlapping and never
 * an empty text block; exactly one message_delta (stop_reason from the blocks emitted, full usage), then
 * message_stop. Reasoning streams live in a thinking block closed by a signature_delta: a gateway envelope
 * of its origin and of the upstream's own signature, if any (see signature.ts). The first tool call streams
 * live; calls that start while it is open are buffered and emitted whole after it, so interleaved parallel
 * fragments never land in a closed block.
 */
export function createMessagesStreamEncoder(ctx: GatewayContext): StreamEncoder {
  const fallbackIdPrefix = "toolu_" + ctx.requestId.replace(/^gen-/, "").slice(-16) + "_";
  const tools = new Map<number, ToolCall>();
  const pending: ToolCall[] = [];
  let started = false;
  let closed = false;
  let nextIndex = 0;
  let open: { kind: "text" | "thinking" | "tool"; index: number; tool?: ToolCall; signature?: string; origin?: ReasoningOrigin } | null = null;
  let emittedTools = 0;
  let finish: FinishReason | undefined;
  let usage: Usage | undefined;

  const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

  function start(): string {
    if (started) return "";
    started = true;
    const estimate = (ctx as { promptTokenBound?: number }).promptTokenBound ?? 0;
    const message = {
      id: messageIdFor(ctx),
      type: "message",
      role: "assistant",
      model: ctx.request.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: estimate, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
    };
    return frame("message_start", { type: "message_start", message }) + frame("ping", { type: "ping" });
  }

  function blockStart(block: Record<string, unknown>): { index: number; out: string } {
    const index = nextIndex++;
    return { index, out: frame("content_block_start", { type: "content_block_start", index, content_block: block }) };
  }
  const blockDelta = (index: number, delta: Record<string, unknown>) => frame("content_block_delta", { type: "content_block_delta", index, delta });
  const blockStop = (index: number) => frame("content_block_stop", { type: "content_block_stop", index });

  function toolStart(tool: ToolCall): { index: number; out: string } {
    if (!tool.id) tool.id = fallbackIdPrefix + tool.key;
    emittedTools++;
    return blockStart({ type: "tool_use", id: toAnthropicToolId(tool.id), name: tool.name, input: {} });
  }

  function closeOpen(): string {
    if (!open) return "";
    let out = "";
    if (open.tool) open.tool.state = "done";
    if (open.kind === "thinking") {
      // The event names no origin yet: the upstream model is known, its format only when the event says it.
      const origin = open.origin ?? { format: "unknown", model: ctx.target?.upstreamModel ?? "" };
      out += blockDelta(open.index, { type: "signature_delta", signature: wrapForeignSignature(open.signature, origin) });
    }
    out += blockStop(open.index);
    open = null;
    return out;
  }

  function openBlock(kind: "text" | "thinking", block: Record<string, unknown>): string {
    const out = settle();
    const opened = blockStart(block);
    open = { kind, index: opened.index };
    return out + opened.out;
  }

  function flushPending(): string {
    let out = "";
    for (const tool of pending.splice(0)) {
      tool.state = "done";
      const { index, out: startOut } = toolStart(tool);
      out += startOut;
      if (tool.args !== "") out += blockDelta(index, { type: "input_json_delta", partial_json: JSON.stringify(parseArguments(tool.args)) });
      out += blockStop(index);
    }
    return out;
  }

  /** Ends whatever is in progress: the open block, then buffered tool calls. */
  const settle = () => closeOpen() + flushPending();

  function onToolStart(event: Extract<StreamEvent, { type: "tool_call_start" }>): string {
    let tool = tools.get(event.index);
    if (!tool) tools.set(event.index, (tool = { key: event.index, id: "", name: "", args: "", state: "new" }));
    else if (tool.state !== "new") return "";
    tool.id = event.id;
    tool.name = event.name;
    if (open?.tool?.state === "live") {
      tool.state = "pending";
      pending.push(tool);
      return "";
    }
    let out = settle();
    const opened = toolStart(tool);
    out += opened.out;
    tool.state = "live";
    open = { kind: "tool", index: opened.index, tool };
    if (tool.args !== "") out += blockDelta(opened.index, { type: "input_json_delta", partial_json: tool.args });
    return out;
  }

  function onToolDelta(event: Extract<StreamEvent, { type: "tool_call_delta" }>): string {
    if (event.arguments === "") return "";
    let tool = tools.get(event.index);
    if (!tool) tools.set(event.index, (tool = { key: event.index, id: "", name: "", args: "", state: "new" }));
    if (tool.state === "live" && open?.tool === tool) return blockDelta(open.index, { type: "input_json_delta", partial_json: event.arguments });
    // A fragment after its block closed cannot be placed any more (upstreams do not do this in practice).
    if (tool.state !== "done") tool.args += event.arguments;
    return "";
  }

  function encode(event: StreamEvent): string {
    if (closed) return "";
    switch (event.type) {
      case "message_start":
        return start();
      case "text_delta": {
        if (event.text === "") return "";
        let out = start();
        if (open?.kind !== "text") out += openBlock("text", { type: "text", text: "" });
        return out + blockDelta(open!.index, { type: "text_delta", text: event.text });
      }
      case "reasoning_delta": {
        if (event.text === "") return "";
        let out = start();
        if (open?.kind !== "thinking") out += openBlock("thinking", { type: "thinking", thinking: "", signature: "" });
        return out + blockDelta(open!.index, { type: "thinking_delta", thinking: event.text });
      }
      case "reasoning_signature": {
        // The signature ends its reasoning block (a lone signature gets an empty thinking block).
        let out = start();
        if (open?.kind !== "thinking") out += openBlock("thinking", { type: "thinking", thinking: "", signature: "" });
        open!.signature = event.signature;
        open!.origin = (event as { origin?: ReasoningOrigin }).origin;
        return out + closeOpen();
      }
      case "tool_call_start":
        return start() + onToolStart(event);
      case "tool_call_delta":
        return start() + onToolDelta(event);
      case "usage":
        usage = event.usage;
        return "";
      case "message_end":
        finish = event.finishReason;
        return start() + settle();
      case "error": {
        closed = true;
        const error = { type: anthropicErrorType(event.status ?? 502), message: redact(event.message), ...(event.code ? { code: event.code } : {}) };
        return frame("error", { type: "error", error });
      }
    }
  }

  return {
    encode,
    end(): string {
      if (closed) return "";
      closed = true;
      let out = start() + settle();
      const final = usage ?? { inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 };
      const delta = { stop_reason: stopReasonFor(finish, emittedTools > 0), stop_sequence: null };
      out += frame("message_delta", { type: "message_delta", delta, usage: writeMessagesUsage(final) });
      return out + frame("message_stop", { type: "message_stop" });
    },
  };
}
