import type { CanonicalPart, CanonicalResponse } from "../../../core/canonical.ts";
import { finishFromStopReason } from "../stream-decoder.ts";
import { readMessagesUsage } from "../usage.ts";
import { ANTHROPIC_MESSAGES } from "../signature.ts";

/** An Anthropic answer in canonical form; thinking keeps its signature, bound to the model that signed it. */
export function decodeMessagesResponse(body: Record<string, unknown>): CanonicalResponse {
  const model = typeof body.model === "string" ? body.model : "";
  const origin = { format: ANTHROPIC_MESSAGES, model };
  const content: CanonicalPart[] = [];
  for (const block of Array.isArray(body.content) ? (body.content as Record<string, unknown>[]) : []) {
    switch (block?.type) {
      case "text":
        if (typeof block.text === "string" && block.text !== "") content.push({ type: "text", text: block.text });
        break;
      case "thinking":
        content.push({
          type: "reasoning",
          text: typeof block.thinking === "string" ? block.thinking : "",
          ...(typeof block.signature === "string" && block.signature !== "" ? { signature: block.signature } : {}),
          origin,
        });
        break;
      case "redacted_thinking":
        if (typeof block.data === "string") content.push({ type: "reasoning", text: "", redactedData: block.data, origin });
        break;
      case "tool_use":
        content.push({
          type: "tool_call",
          id: String(block.id ?? ""),
          name: String(block.name ?? ""),
          arguments: JSON.stringify(block.input && typeof block.input === "object" ? block.input : {}),
        });
        break;
    }
  }
  const sawTool = content.some((part) => part.type === "tool_call");
  return {
    id: typeof body.id === "string" ? body.id : "",
    model,
    content,
    finishReason: finishFromStopReason(body.stop_reason, sawTool),
    usage: readMessagesUsage(body.usage),
  };
}
