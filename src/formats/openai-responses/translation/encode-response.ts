import type { GatewayContext } from "../../../core/context.ts";
import type { CanonicalResponse } from "../../../core/canonical.ts";
import { encryptedContentFor } from "../reasoning-state.ts";
import { clientTools } from "../tools.ts";
import { messageItem, reasoningItem, responseIds, responseObject, statusFor, toolCallItem } from "./output.ts";

type Json = Record<string, unknown>;

/**
 * A canonical answer as a Responses object (docs/wire-formats.md#openai-responses): each reasoning part a `reasoning`
 * item, each run of text a `message` item, each tool call a `function_call` (or `custom_tool_call`) item, in order.
 */
export function encodeResponsesResponse(response: CanonicalResponse, ctx: GatewayContext): unknown {
  const ids = responseIds(ctx);
  const tools = clientTools(ctx.body);
  const output: Json[] = [];
  let text: string | undefined;
  const flushText = () => {
    if (text !== undefined && text !== "") output.push(messageItem(ids.item("msg", output.length), text, "completed"));
    text = undefined;
  };
  for (const part of response.content) {
    if (part.type === "text") {
      text = (text ?? "") + part.text;
      continue;
    }
    flushText();
    if (part.type === "reasoning") {
      const encrypted = encryptedContentFor(part);
      if (part.text !== "" || encrypted !== undefined) output.push(reasoningItem(ids.item("rs", output.length), part.text, encrypted));
    } else if (part.type === "tool_call") {
      const index = output.length;
      output.push(toolCallItem({ fc: ids.item("fc", index), ctc: ids.item("ctc", index) }, part, tools.get(part.name), "completed"));
    }
  }
  flushText();
  // Tool calls end a completed response (Responses has no tool stop reason, no requires_action).
  const { status, incomplete_details } = statusFor(response.finishReason);
  const error = status === "failed" ? { code: "server_error", message: "the upstream model stopped with an error" } : null;
  return responseObject(ctx, ids, Math.floor(Date.now() / 1000), { status, output, usage: response.usage ?? ctx.usage, error, incomplete_details });
}
