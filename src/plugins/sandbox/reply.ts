/** The sandbox's simulated upstream: deterministic OpenAI chat answers, streamed or not. Pure. */
import { exampleFor } from "./json-example.ts";
import { sandboxToolCall, type ChatTool } from "./tool-call.ts";

interface ChatMessage {
  role: string;
  content?: unknown;
}

interface ChatBody {
  model: string;
  messages: ChatMessage[];
  tools?: ChatTool[];
  tool_choice?: unknown;
  response_format?: { type: string; json_schema?: { schema?: unknown } };
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
}

export interface SandboxReply {
  id: string;
  model: string;
  text: string | null;
  toolCall: { id: string; name: string; arguments: string } | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** A rough, deterministic token count: one token per 4 characters, plus 4 per message. */
export function sandboxTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join(" ");
  return "";
}

/**
 * Answers with a call of an offered tool (arguments valid against its schema, see tool-call.ts) when the
 * user spoke last and no tool result came back since the assistant's last turn; otherwise with text, echoing
 * the user's words or the tool's output, as JSON valid against `response_format` when one is asked for.
 */
export function sandboxReply(body: ChatBody, id: string): SandboxReply {
  const prompt = body.messages.reduce((sum, message) => sum + 4 + sandboxTokens(textOf(message.content)), 0);
  const sinceAssistant = body.messages.slice(body.messages.findLastIndex((message) => message.role === "assistant") + 1);
  const toolResult = sinceAssistant.findLast((message) => message.role === "tool");
  const call = !toolResult && sinceAssistant.some((message) => message.role === "user") ? sandboxToolCall(body.tools, body.tool_choice) : null;
  if (call) {
    const completion = 8 + sandboxTokens(call.arguments);
    return {
      id,
      model: body.model,
      text: null,
      toolCall: { id: `call_${id.slice(-24)}`, ...call },
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    };
  }
  const echo = textOf((toolResult ?? body.messages.at(-1))?.content).slice(0, 300);
  const words = `Sandbox reply from ${body.model}. ${toolResult ? "The tool returned" : "You said"}: ${echo}`;
  const text = structured(body.response_format, words) ?? words;
  const completion = sandboxTokens(text);
  return { id, model: body.model, text, toolCall: null, usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
}

/** The answer as JSON when the request asks for JSON: valid against its json_schema, or an object holding the words. */
function structured(format: ChatBody["response_format"], words: string): string | undefined {
  if (format?.type === "json_schema") return JSON.stringify(exampleFor(format.json_schema?.schema ?? {}));
  if (format?.type === "json_object") return JSON.stringify({ reply: words });
  return undefined;
}

export function sandboxCompletion(reply: SandboxReply) {
  const message = reply.toolCall
    ? { role: "assistant", content: null, refusal: null, tool_calls: [{ id: reply.toolCall.id, type: "function", function: { name: reply.toolCall.name, arguments: reply.toolCall.arguments } }] }
    : { role: "assistant", content: reply.text, refusal: null };
  return {
    id: reply.id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: reply.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: reply.toolCall ? "tool_calls" : "stop" }],
    usage: reply.usage,
  };
}

/** The chunks of a streamed answer, as SSE text, ending with the usage chunk when asked and [DONE]. */
export function sandboxStreamFrames(reply: SandboxReply, includeUsage: boolean): string[] {
  const base = { id: reply.id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: reply.model };
  const usageField = includeUsage ? { usage: null } : {};
  const chunk = (delta: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...usageField })}\n\n`;
  const frames = [chunk({ role: "assistant", content: "" })];
  if (reply.toolCall) {
    frames.push(chunk({ tool_calls: [{ index: 0, id: reply.toolCall.id, type: "function", function: { name: reply.toolCall.name, arguments: "" } }] }));
    frames.push(chunk({ tool_calls: [{ index: 0, function: { arguments: reply.toolCall.arguments } }] }));
    frames.push(chunk({}, "tool_calls"));
  } else {
    for (const word of reply.text!.match(/\S+\s*/g) ?? []) frames.push(chunk({ content: word }));
    frames.push(chunk({}, "stop"));
  }
  if (includeUsage) frames.push(`data: ${JSON.stringify({ ...base, choices: [], usage: reply.usage })}\n\n`);
  frames.push("data: [DONE]\n\n");
  return frames;
}
