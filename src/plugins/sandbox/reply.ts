/** The sandbox's simulated upstream: deterministic OpenAI chat answers, streamed or not. Pure. */

interface ChatMessage {
  role: string;
  content?: unknown;
}

interface ChatBody {
  model: string;
  messages: ChatMessage[];
  tools?: { type: string; function?: { name: string } }[];
  tool_choice?: unknown;
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

/** Answers with a tool call when tools are offered and the last turn is the user's; otherwise with text. */
export function sandboxReply(body: ChatBody, id: string): SandboxReply {
  const prompt = body.messages.reduce((sum, message) => sum + 4 + sandboxTokens(textOf(message.content)), 0);
  const last = body.messages[body.messages.length - 1];
  const tool = body.tools?.find((candidate) => candidate.type === "function" && candidate.function?.name);
  if (tool && last?.role === "user" && body.tool_choice !== "none") {
    const args = JSON.stringify({ input: textOf(last.content).slice(0, 80) });
    const completion = 8 + sandboxTokens(args);
    return {
      id,
      model: body.model,
      text: null,
      toolCall: { id: `call_${id.slice(-24)}`, name: tool.function!.name, arguments: args },
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    };
  }
  const echo = textOf(last?.content).slice(0, 120);
  const text = `Sandbox reply from ${body.model}. You said: ${echo}`;
  const completion = sandboxTokens(text);
  return { id, model: body.model, text, toolCall: null, usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
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
