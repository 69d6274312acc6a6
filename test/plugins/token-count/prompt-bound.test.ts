import { beforeAll, describe, expect, it } from "bun:test";
import { countPromptTokens, countTextTokens, IMAGE_TOKEN_BOUND, loadTokenizer, toolPromptOverhead } from "../../../src/plugins/token-count/count.ts";

/**
 * Issue 24, defect 2 (b): the prompt bound counts every part the upstream bills, so the hold built on
 * it is a real upper bound: tools and their schemas with the keys the model reads, the upstream's own
 * tool prompt, Responses input items' framing, images at the image bound, documents of unseen size.
 */

beforeAll(async () => {
  await loadTokenizer();
});

const o200k = (text: string) => countTextTokens(text, true);
const user = (content: unknown) => ({ role: "user", content });

describe("prompt bound", () => {
  it("counts the property names of tool schemas (text the model reads), not only their values", () => {
    const name = "the_destination_city_for_which_the_weather_forecast_is_requested";
    const tool = (property: string) => ({
      type: "function",
      function: { name: "get_weather", parameters: { type: "object", properties: { [property]: { type: "string" } }, required: [property] } },
    });
    const long = countPromptTokens({ messages: [user("hi")], tools: [tool(name)] }, true);
    const short = countPromptTokens({ messages: [user("hi")], tools: [tool("c")] }, true);
    // The long name appears twice (as a key and in `required`): both are billed.
    expect(long - short).toBeGreaterThanOrEqual(2 * (o200k(name) - o200k("c")));
  });

  it("counts Responses output schemas (text.format) and Anthropic output_format with their keys", () => {
    const schema = { type: "object", properties: { a_property_name_the_model_must_read: { type: "integer", minimum: 123456789 } } };
    const bare = countPromptTokens({ input: "hi" }, true);
    expect(countPromptTokens({ input: "hi", text: { format: { type: "json_schema", name: "answer", schema } } }, true) - bare).toBeGreaterThanOrEqual(
      o200k("a_property_name_the_model_must_read") + o200k("123456789"),
    );
    expect(countPromptTokens({ messages: [user("hi")], output_format: { type: "json_schema", schema } }, true)).toBeGreaterThan(countPromptTokens({ messages: [user("hi")] }, true));
  });

  it("counts the keys of a Messages tool call's input object (JSON the model wrote and reads back)", () => {
    const key = "an_argument_name_that_is_rather_long_to_be_noticed";
    const call = (name: string) => ({ role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: { [name]: 1 } }] });
    expect(countPromptTokens({ messages: [user("hi"), call(key)] }, true) - countPromptTokens({ messages: [user("hi"), call("k")] }, true)).toBe(o200k(key) - o200k("k"));
  });

  it("adds the upstream's tool prompt once per request and a little per tool (Anthropic's alone is ~350 tokens)", () => {
    expect(toolPromptOverhead({ messages: [] })).toBe(0);
    expect(toolPromptOverhead({ tools: [] })).toBe(0);
    expect(toolPromptOverhead({ tools: [{ name: "a" }] })).toBeGreaterThanOrEqual(350);
    expect(toolPromptOverhead({ tools: [{ name: "a" }, { name: "b" }] })).toBeGreaterThan(toolPromptOverhead({ tools: [{ name: "a" }] }));
  });

  it("counts the tools Codex declares in additional_tools input items, a namespace's tools one by one, like top-level tools", () => {
    const flat = { tools: [{ name: "exec" }, { name: "wait" }, { name: "clock_now" }] };
    const codex = {
      input: [
        { type: "additional_tools", tools: [{ type: "namespace", name: "functions", tools: [{ name: "exec" }, { name: "wait" }] }, { name: "clock_now" }] },
        { role: "user", content: "hi" },
      ],
    };
    expect(toolPromptOverhead(codex)).toBe(toolPromptOverhead(flat));
    expect(toolPromptOverhead({ input: [{ role: "user", content: "hi" }] })).toBe(0);
  });

  it("frames every Responses input item like a message", () => {
    const items = (n: number) => Array.from({ length: n }, () => ({ role: "user", content: [{ type: "input_text", text: "x" }] }));
    expect(countPromptTokens({ input: items(10) }, true) - countPromptTokens({ input: items(1) }, true)).toBeGreaterThanOrEqual(9 * (4 + o200k("x")));
  });

  it("counts every image part at the image bound, in each client format", () => {
    const base = countPromptTokens({ messages: [user([{ type: "text", text: "look" }])] }, true);
    const chat = countPromptTokens({ messages: [user([{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "https://x/y.png" } }])] }, true);
    const messages = countPromptTokens({ messages: [user([{ type: "text", text: "look" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBOR" } }])] }, true);
    const responses = countPromptTokens({ input: [user([{ type: "input_text", text: "look" }, { type: "input_image", image_url: "https://x/y.png" }])] }, true);
    expect(chat - base).toBe(IMAGE_TOKEN_BOUND);
    expect(messages - base).toBe(IMAGE_TOKEN_BOUND);
    expect(responses).toBeGreaterThanOrEqual(IMAGE_TOKEN_BOUND);
    expect(countPromptTokens({ messages: [user([{ type: "image_url", image_url: { url: "u" } }])] }, true, { imageTokens: 2_000 })).toBeLessThan(chat - 2_000);
  });

  it("counts a document or file whose size it cannot see as the model's whole context window; a text document as its text", () => {
    const pdf = { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0xLjQK" } };
    const file = { type: "file", file: { file_id: "file-abc" } };
    const inputFile = { type: "input_file", file_id: "file-abc" };
    const limits = { contextLength: 200_000 };
    expect(countPromptTokens({ messages: [user([pdf])] }, true, limits)).toBeGreaterThanOrEqual(200_000);
    expect(countPromptTokens({ messages: [user([file])] }, true, limits)).toBeGreaterThanOrEqual(200_000);
    expect(countPromptTokens({ input: [user([inputFile])] }, true, limits)).toBeGreaterThanOrEqual(200_000);
    const text = { type: "document", source: { type: "text", media_type: "text/plain", data: "a short note" } };
    expect(countPromptTokens({ messages: [user([text])] }, true, limits)).toBeLessThan(100);
  });

  it("keeps a plain conversation's bound as before: the hot path counts messages only", () => {
    const body = { messages: [{ role: "system", content: "be brief" }, user("Hello there, how are you?")] };
    expect(countPromptTokens(body, true)).toBe(8 + 2 * 4 + o200k("be brief") + 1 + o200k("Hello there, how are you?") + 1);
  });
});
