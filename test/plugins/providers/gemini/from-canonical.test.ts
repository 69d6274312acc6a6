import { describe, expect, it } from "bun:test";
import type { CanonicalChatRequest, CanonicalMessage } from "../../../../src/core/canonical.ts";
import { gemini, encodeGeminiCallId, GEMINI_FORMAT_NAME } from "../../../../src/plugins/providers/gemini/codec.ts";
import { InvalidRequestError } from "../../../../src/core/errors.ts";
import { validateGeminiRequest, issueSignature } from "./fake.ts";

const fromCanonical = gemini.translation!.fromCanonical;

function request(partial: Partial<CanonicalChatRequest>): CanonicalChatRequest {
  return { model: "client-model", messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], stream: false, ...partial };
}

const user = (text: string): CanonicalMessage => ({ role: "user", content: [{ type: "text", text }] });

describe("gemini fromCanonical", () => {
  it("puts the system prompt in systemInstruction and maps sampling and limits to generationConfig", () => {
    const body = fromCanonical(
      request({ system: "Be brief.", maxOutputTokens: 300, temperature: 0.2, topP: 0.9, topK: 40, stop: ["END"], user: "u-1", parallelToolCalls: false }),
      "gemini-2.5-flash-lite",
    );
    expect(body).toEqual({
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      systemInstruction: { parts: [{ text: "Be brief." }] },
      generationConfig: { maxOutputTokens: 300, temperature: 0.2, topP: 0.9, topK: 40, stopSequences: ["END"] },
    });
    expect(fromCanonical(request({}), "m")).toEqual({ contents: [{ role: "user", parts: [{ text: "hi" }] }] });
  });

  it("names assistant turns model, merges consecutive turns and skips empty text", () => {
    const body = fromCanonical(
      request({
        messages: [
          user("one"),
          user("two"),
          { role: "assistant", content: [{ type: "text", text: "" }, { type: "text", text: "answer" }] },
          { role: "assistant", content: [{ type: "reasoning", text: "foreign", origin: { format: "anthropic-messages", model: "claude" } }] },
          user("three"),
        ],
      }),
      "m",
    );
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "one" }, { text: "two" }] },
      { role: "model", parts: [{ text: "answer" }] },
      { role: "user", parts: [{ text: "three" }] },
    ]);
  });

  it("declares tools with sanitised schemas and maps tool_choice to functionCallingConfig", () => {
    const tools = [
      {
        name: "get_weather",
        description: "Weather for a city.",
        parameters: { type: "object", additionalProperties: false, properties: { city: { type: "string" } }, required: ["city"] },
      },
      { name: "now", parameters: { type: "object", properties: {} } },
    ];
    const body = fromCanonical(request({ tools, toolChoice: { type: "auto" } }), "m");
    expect(body.tools).toEqual([
      {
        functionDeclarations: [
          {
            name: "get_weather",
            description: "Weather for a city.",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          },
          { name: "now" },
        ],
      },
    ]);
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "AUTO" } });
    const config = (choice: CanonicalChatRequest["toolChoice"]) => (fromCanonical(request({ tools, toolChoice: choice }), "m").toolConfig as any).functionCallingConfig;
    expect(config({ type: "none" })).toEqual({ mode: "NONE" });
    expect(config({ type: "required" })).toEqual({ mode: "ANY" });
    expect(config({ type: "tool", name: "now" })).toEqual({ mode: "ANY", allowedFunctionNames: ["now"] });
    expect(fromCanonical(request({ toolChoice: { type: "required" } }), "m").toolConfig).toBeUndefined();
    expect(() => validateGeminiRequest(body, "m")).not.toThrow();
  });

  it("refuses a tool name Gemini would refuse, with a 400 naming the tool", () => {
    expect(() => fromCanonical(request({ tools: [{ name: "1st-tool", parameters: {} }] }), "m")).toThrow(InvalidRequestError);
    expect(() => fromCanonical(request({ tools: [{ name: "mcp__fs__read.file:v2", parameters: {} }] }), "m")).not.toThrow();
  });

  it("replays a tool call turn: args as objects, results as functionResponse objects named after their call", () => {
    const callId = encodeGeminiCallId({ model: "gemini-2.5-flash-lite", seed: "r1\n0" });
    const body = fromCanonical(
      request({
        messages: [
          user("weather?"),
          {
            role: "assistant",
            content: [
              { type: "text", text: "Checking." },
              { type: "tool_call", id: callId, name: "get_weather", arguments: '{"city":"Paris"}' },
              { type: "tool_call", id: "call_from_openai", name: "now", arguments: "" },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", toolCallId: callId, content: [{ type: "text", text: '{"temp":21}' }] },
              {
                type: "tool_result",
                toolCallId: "call_from_openai",
                content: [
                  { type: "text", text: "12:00" },
                  { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
                ],
              },
              { type: "text", text: "and then?" },
            ],
          },
        ],
      }),
      "gemini-2.5-flash-lite",
    );
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "weather?" }] },
      {
        role: "model",
        parts: [{ text: "Checking." }, { functionCall: { name: "get_weather", args: { city: "Paris" } } }, { functionCall: { name: "now", args: {} } }],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { name: "get_weather", response: { temp: 21 } } },
          { functionResponse: { name: "now", response: { result: "12:00" } } },
          { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } },
          { text: "and then?" },
        ],
      },
    ]);
    expect(() => validateGeminiRequest(body, "gemini-2.5-flash-lite")).not.toThrow();
  });

  it("wraps error results and non-object arguments, and refuses a result without its call", () => {
    const body = fromCanonical(
      request({
        messages: [
          { role: "assistant", content: [{ type: "tool_call", id: "t1", name: "f", arguments: "[1,2]" }, { type: "tool_call", id: "t2", name: "g", arguments: "not json" }] },
          {
            role: "user",
            content: [
              { type: "tool_result", toolCallId: "t1", content: [{ type: "text", text: "boom" }], isError: true },
              { type: "tool_result", toolCallId: "t2", content: [{ type: "text", text: "[1]" }] },
            ],
          },
        ],
      }),
      "m",
    );
    expect((body.contents as any)[0].parts).toEqual([{ functionCall: { name: "f", args: { value: [1, 2] } } }, { functionCall: { name: "g", args: {} } }]);
    expect((body.contents as any)[1].parts).toEqual([
      { functionResponse: { name: "f", response: { error: "boom" } } },
      { functionResponse: { name: "g", response: { result: "[1]" } } },
    ]);
    const orphan = request({ messages: [{ role: "user", content: [{ type: "tool_result", toolCallId: "nowhere", content: [] }] }] });
    expect(() => fromCanonical(orphan, "m")).toThrow(/no matching tool call/);
  });

  it("replays a thought signature only to the model that issued it", () => {
    const signature = issueSignature("gemini-4-carbon");
    const callId = encodeGeminiCallId({ model: "gemini-4-carbon", signature, geminiId: "fc1", seed: "r" });
    const messages: CanonicalMessage[] = [
      user("go"),
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "Thinking about it.", signature: "thought-sig", origin: { format: GEMINI_FORMAT_NAME, model: "gemini-4-carbon" } },
          { type: "tool_call", id: callId, name: "f", arguments: "{}" },
        ],
      },
      { role: "user", content: [{ type: "tool_result", toolCallId: callId, content: [{ type: "text", text: "ok" }] }] },
    ];
    const same = fromCanonical(request({ messages }), "gemini-4-carbon");
    expect((same.contents as any)[1].parts).toEqual([
      { text: "Thinking about it.", thought: true, thoughtSignature: "thought-sig" },
      { functionCall: { name: "f", args: {}, id: "fc1" }, thoughtSignature: signature },
    ]);
    expect((same.contents as any)[2].parts).toEqual([{ functionResponse: { name: "f", response: { result: "ok" }, id: "fc1" } }]);
    const replay = (parts: unknown[]) => ({ contents: [(same.contents as any)[0], { role: "model", parts }, (same.contents as any)[2]] });
    const signedCall = (same.contents as any)[1].parts[1];
    expect(() => validateGeminiRequest(replay([signedCall]), "gemini-4-carbon")).not.toThrow();
    // What Gemini would say otherwise (the fake mirrors it): the call needs its signature, from this model.
    expect(() => validateGeminiRequest(replay([{ functionCall: signedCall.functionCall }]), "gemini-4-carbon")).toThrow(/missing a thought_signature/);
    expect(() => validateGeminiRequest(replay([signedCall]), "gemini-4-argon")).toThrow(/Corrupted thought signature/);

    const other = fromCanonical(request({ messages }), "gemini-4-argon");
    expect((other.contents as any)[1].parts).toEqual([{ functionCall: { name: "f", args: {}, id: "fc1" } }]);
    expect(JSON.stringify(other)).not.toContain(signature);
    expect(JSON.stringify(other)).not.toContain("thought-sig");
  });

  it("sends data URLs and base64 images inline and other URLs as fileData, downloading nothing", () => {
    const body = fromCanonical(
      request({
        messages: [
          {
            role: "user",
            content: [
              { type: "image", source: { kind: "url", url: "data:image/jpeg;base64,/9j/4AAQ" } },
              { type: "image", source: { kind: "url", url: "https://example.com/cat.PNG?size=2" } },
              { type: "image", source: { kind: "url", url: "https://example.com/render" } },
              { type: "text", text: "describe" },
            ],
          },
        ],
      }),
      "m",
    );
    expect((body.contents as any)[0].parts).toEqual([
      { inlineData: { mimeType: "image/jpeg", data: "/9j/4AAQ" } },
      { fileData: { mimeType: "image/png", fileUri: "https://example.com/cat.PNG?size=2" } },
      { fileData: { fileUri: "https://example.com/render" } },
      { text: "describe" },
    ]);
  });

  it("asks for JSON with a sanitised responseSchema", () => {
    const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"], additionalProperties: false };
    const body = fromCanonical(request({ responseFormat: { type: "json_schema", name: "reply", schema, strict: true } }), "m");
    expect(body.generationConfig).toEqual({
      responseMimeType: "application/json",
      responseSchema: { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] },
    });
    expect(fromCanonical(request({ responseFormat: { type: "json_object" } }), "m").generationConfig).toEqual({ responseMimeType: "application/json" });
    expect(() => validateGeminiRequest(body, "m")).not.toThrow();
  });

  it("maps reasoning to a thinking budget on Gemini 2.x and a thinking level on later models", () => {
    const thinking = (reasoning: CanonicalChatRequest["reasoning"], model: string) => (fromCanonical(request({ reasoning }), model).generationConfig as any)?.thinkingConfig;
    expect(thinking({ effort: "low" }, "gemini-2.5-flash-lite")).toEqual({ thinkingBudget: 4096, includeThoughts: true });
    expect(thinking({ effort: "none" }, "gemini-2.5-flash-lite")).toEqual({ thinkingBudget: 0, includeThoughts: false });
    expect(thinking({ effort: "high" }, "gemini-4-carbon")).toEqual({ thinkingLevel: "high", includeThoughts: true });
    expect(thinking({ effort: "xhigh" }, "gemini-3.8-flash")).toEqual({ thinkingLevel: "high", includeThoughts: true });
    expect(thinking({ budgetTokens: 2000 }, "gemini-4-carbon")).toEqual({ thinkingBudget: 2000, includeThoughts: true });
    expect(thinking(undefined, "gemini-4-carbon")).toBeUndefined();
  });
});
