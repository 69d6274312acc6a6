import { describe, expect, it } from "bun:test";
import type { CanonicalChatRequest } from "../../../src/core/canonical.ts";
import { openaiChatTranslation, toChatToolId } from "../../../src/formats/openai-chat/translation/index.ts";

const { fromCanonical, toCanonical } = openaiChatTranslation;

function request(partial: Partial<CanonicalChatRequest>): CanonicalChatRequest {
  return { model: "client-model", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: false, ...partial };
}

describe("openai-chat fromCanonical", () => {
  it("names the upstream model, puts the system prompt first and asks for usage on streams", () => {
    const body = fromCanonical(request({ system: "Be brief.", stream: true, maxOutputTokens: 300, stop: ["END"] }), "gpt-up");
    expect(body).toEqual({
      model: "gpt-up",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
      max_completion_tokens: 300,
      stop: ["END"],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(fromCanonical(request({}), "gpt-up")).toEqual({ model: "gpt-up", messages: [{ role: "user", content: "hi" }] });
  });

  it("sends tool results as tool messages and their images in a following user message", () => {
    const body = fromCanonical(
      request({
        messages: [
          { role: "user", content: [{ type: "text", text: "screenshot please" }] },
          { role: "assistant", content: [{ type: "tool_call", id: "toolu_01", name: "screenshot", arguments: "{}" }] },
          {
            role: "user",
            content: [
              {
                type: "tool_result",
                toolCallId: "toolu_01",
                content: [
                  { type: "text", text: "captured" },
                  { type: "image", source: { kind: "base64", mediaType: "image/png", data: "AAAA" } },
                ],
              },
              { type: "text", text: "what do you see?" },
            ],
          },
        ],
      }),
      "up",
    );
    expect(body.messages).toEqual([
      { role: "user", content: "screenshot please" },
      { role: "assistant", content: null, tool_calls: [{ id: "toolu_01", type: "function", function: { name: "screenshot", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "toolu_01", content: "captured" },
      {
        role: "user",
        content: [
          { type: "text", text: "Image output of tool call toolu_01:" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
          { type: "text", text: "what do you see?" },
        ],
      },
    ]);
  });

  it("prefixes failed tool results with Error:", () => {
    const body = fromCanonical(
      request({
        messages: [
          { role: "assistant", content: [{ type: "tool_call", id: "c1", name: "ls", arguments: "{}" }] },
          { role: "user", content: [{ type: "tool_result", toolCallId: "c1", content: [{ type: "text", text: "no such dir" }], isError: true }] },
        ],
      }),
      "up",
    );
    expect((body.messages as any[])[1]).toEqual({ role: "tool", tool_call_id: "c1", content: "Error: no such dir" });
  });

  it("maps invalid or long tool ids deterministically, the same on the call and on its result", () => {
    const longId = "toolu_" + "x".repeat(60);
    const foreignId = "Bash:0";
    const history = request({
      messages: [
        {
          role: "assistant",
          content: [
            { type: "tool_call", id: longId, name: "a", arguments: "{}" },
            { type: "tool_call", id: foreignId, name: "b", arguments: "{}" },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", toolCallId: longId, content: [{ type: "text", text: "1" }] },
            { type: "tool_result", toolCallId: foreignId, content: [{ type: "text", text: "2" }] },
          ],
        },
      ],
    });
    const first = fromCanonical(history, "up").messages as any[];
    const again = fromCanonical(history, "up").messages as any[];
    expect(again).toEqual(first);
    const [callA, callB] = first[0].tool_calls;
    for (const id of [callA.id, callB.id]) expect(id).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
    expect(first[1].tool_call_id).toBe(callA.id);
    expect(first[2].tool_call_id).toBe(callB.id);
    expect(callB.id.startsWith("Bash_0_")).toBe(true);
    // Valid ids pass unchanged; ids that sanitise alike stay distinct.
    expect(toChatToolId("call_abc123")).toBe("call_abc123");
    expect(toChatToolId("Bash:0")).not.toBe(toChatToolId("Bash;0"));
    expect(toChatToolId(longId)).toBe(callA.id);
  });

  it("drops reasoning produced by another model", () => {
    const body = fromCanonical(
      request({
        messages: [
          { role: "user", content: [{ type: "text", text: "q" }] },
          { role: "assistant", content: [{ type: "reasoning", text: "theirs", origin: { format: "anthropic-messages", model: "claude-x" } }, { type: "text", text: "a" }] },
        ],
      }),
      "deepseek-flash",
    );
    expect((body.messages as any[])[1]).toEqual({ role: "assistant", content: "a" });
  });

  it("sends reasoning text as reasoning_content but never a signature", () => {
    const body = fromCanonical(
      request({
        messages: [
          { role: "user", content: [{ type: "text", text: "q" }] },
          {
            role: "assistant",
            content: [
              { type: "reasoning", text: "thinking...", signature: "SIG-SECRET", origin: { format: "anthropic-messages", model: "up" } },
              { type: "reasoning", text: "", redactedData: "REDACTED-BLOB" },
              { type: "text", text: "answer" },
            ],
          },
        ],
      }),
      "up",
    );
    expect((body.messages as any[])[1]).toEqual({ role: "assistant", content: "answer", reasoning_content: "thinking..." });
    expect(JSON.stringify(body)).not.toContain("SIG-SECRET");
    expect(JSON.stringify(body)).not.toContain("REDACTED-BLOB");
  });

  it("sends tools nested, tool_choice and parallel_tool_calls only with tools, json_schema nested, effort from a budget", () => {
    const body = fromCanonical(
      request({
        tools: [{ name: "ls", description: "list", parameters: { type: "object", properties: {} } }],
        toolChoice: { type: "tool", name: "ls" },
        parallelToolCalls: false,
        responseFormat: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true },
        reasoning: { budgetTokens: 10_000 },
        temperature: 0.5,
        topP: 0.8,
        topK: 40,
        user: "u",
      }),
      "up",
    );
    expect(body).toMatchObject({
      tools: [{ type: "function", function: { name: "ls", description: "list", parameters: { type: "object", properties: {} } } }],
      tool_choice: { type: "function", function: { name: "ls" } },
      parallel_tool_calls: false,
      response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: true } },
      reasoning_effort: "medium",
      temperature: 0.5,
      top_p: 0.8,
      user: "u",
    });
    expect(body.top_k).toBeUndefined();
    const noTools = fromCanonical(request({ toolChoice: { type: "auto" }, parallelToolCalls: true }), "up");
    expect(noTools.tool_choice).toBeUndefined();
    expect(noTools.parallel_tool_calls).toBeUndefined();
  });

  it("round-trips a chat request through the canonical form", () => {
    const client = {
      model: "client-model",
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "https://x.test/a.png" } }] },
        {
          role: "assistant",
          content: "calling",
          reasoning_content: "hmm",
          tool_calls: [{ id: "call_1", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
        },
        { role: "tool", tool_call_id: "call_1", content: "ok" },
        { role: "user", content: "thanks" },
      ],
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { a: { type: "number" } } } } }],
      tool_choice: "auto",
      parallel_tool_calls: true,
      max_completion_tokens: 64,
      temperature: 1,
      stop: ["x"],
      response_format: { type: "json_object" },
      reasoning_effort: "low",
      user: "me",
      stream: true,
    };
    const { stream: _stream, ...rest } = client;
    expect(fromCanonical(toCanonical(client), "client-model")).toEqual({ ...rest, stream: true, stream_options: { include_usage: true } });
  });
});
