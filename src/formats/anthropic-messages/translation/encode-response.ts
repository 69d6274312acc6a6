import type { GatewayContext } from "../../../core/context.ts";
import { ZERO_USAGE, type CanonicalPart, type CanonicalResponse, type FinishReason } from "../../../core/canonical.ts";
import { toAnthropicToolId } from "../ids.ts";
import { ANTHROPIC_MESSAGES, wrapForeignSignature } from "../signature.ts";
import { writeMessagesUsage } from "../usage.ts";
import { parseArguments } from "./history.ts";

/** The Messages id of a translated answer: derived from the gateway's request id (x-gateway-request-id). */
export function messageIdFor(ctx: GatewayContext): string {
  return "msg_" + ctx.requestId.replace(/^gen-/, "");
}

/**
 * stop_reason from what was emitted (docs/wire-formats.md#finish-reasons): any tool_use block means tool_use, a tool
 * finish without one is end_turn.
 */
export function stopReasonFor(finish: FinishReason | undefined, sawTool: boolean): string {
  if (sawTool) return "tool_use";
  if (finish === "length") return "max_tokens";
  if (finish === "content_filter") return "refusal";
  return "end_turn";
}

/**
 * How reasoning reaches a Messages client (docs/wire-formats.md#reasoning-and-signatures): a thinking block.
 * Anthropic's own signature goes as it came; reasoning from elsewhere, signed or not, gets a gateway envelope
 * recording its origin (signature.ts), never a fabricated Anthropic signature. Redacted thinking exists only for
 * Anthropic.
 */
export function reasoningBlock(part: {
  text: string;
  signature?: string;
  redactedData?: string;
  origin?: { format: string; model: string };
}): Record<string, unknown> | null {
  const anthropic = part.origin?.format === ANTHROPIC_MESSAGES;
  if (part.redactedData) return anthropic ? { type: "redacted_thinking", data: part.redactedData } : null;
  if (anthropic && part.signature) return { type: "thinking", thinking: part.text, signature: part.signature };
  if (part.text === "" && !part.signature) return null;
  return { type: "thinking", thinking: part.text, signature: wrapForeignSignature(part.signature, part.origin) };
}

/** A canonical answer as a Messages response body. */
export function encodeMessagesResponse(response: CanonicalResponse, ctx: GatewayContext): Record<string, unknown> {
  const content: Record<string, unknown>[] = [];
  let sawTool = false;
  response.content.forEach((part: CanonicalPart, index) => {
    switch (part.type) {
      case "text":
        if (part.text !== "") content.push({ type: "text", text: part.text });
        break;
      case "reasoning": {
        const block = reasoningBlock(part);
        if (block) content.push(block);
        break;
      }
      case "tool_call":
        sawTool = true;
        content.push({ type: "tool_use", id: toAnthropicToolId(part.id || `call_${index}`), name: part.name, input: parseArguments(part.arguments) });
        break;
    }
  });
  return {
    id: messageIdFor(ctx),
    type: "message",
    role: "assistant",
    model: ctx.request.model,
    content,
    stop_reason: stopReasonFor(response.finishReason, sawTool),
    stop_sequence: null,
    usage: writeMessagesUsage(response.usage ?? ctx.usage ?? ZERO_USAGE), // none reported: what metering billed
  };
}
