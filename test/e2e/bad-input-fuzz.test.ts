import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.stop();
});

/** Values of every JSON type and a few shapes that look almost right. */
const VALUES: unknown[] = [
  null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, "", "x", "gpt-6-luna", "\u0000", "\uD800", [], {}, [null], [{}],
  { type: "text" },
  { type: "image_url", image_url: null },
  { type: "image_url", image_url: { url: 5 } },
  { role: "user" },
  { role: "user", content: null },
  { role: "tool", content: "x" },
  { role: "assistant", tool_calls: [{}] },
  { role: "assistant", tool_calls: [{ id: 1, type: "function", function: { name: 5, arguments: {} } }] },
];
const FIELDS = [
  "model", "messages", "stream", "max_tokens", "max_completion_tokens", "tools", "tool_choice", "response_format", "stream_options",
  "n", "temperature", "reasoning_effort", "stop", "user", "seed", "logprobs", "top_logprobs", "parallel_tool_calls", "metadata", "modalities",
];

/** A deterministic stream of chat bodies with one to three fields replaced by something odd. */
function* oddBodies(count: number): Generator<Record<string, unknown>> {
  let seed = 1;
  const random = (n: number) => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) % n;
  const pick = () => VALUES[random(VALUES.length)];
  for (let i = 0; i < count; i++) {
    const body: Record<string, unknown> = { model: "gpt-6-luna", messages: [{ role: "user", content: "hi" }] };
    for (let changes = 1 + random(3); changes > 0; changes--) {
      const field = FIELDS[random(FIELDS.length)]!;
      const shape = random(4);
      if (field === "messages" && shape === 0) body.messages = [{ role: "user", content: [pick(), pick()] }];
      else if (field === "messages" && shape === 1) body.messages = [pick(), { role: "user", content: "x" }];
      else if (field === "tools" && shape < 2) body.tools = [{ type: "function", function: { name: pick(), parameters: pick() } }];
      else body[field] = pick();
    }
    yield body;
  }
}

describe("odd request bodies", () => {
  it("never get a 5xx on chat completions, Messages or Responses: each is answered or refused as the client's fault", async () => {
    const { key } = await t.newAccountWithKey({ credit: 100 });
    const serverErrors: string[] = [];
    const statuses = new Set<number>();
    for (const body of oddBodies(600)) {
      const sent: [string, unknown][] = [
        ["/v1/chat/completions", body],
        ["/v1/messages", { ...body, max_tokens: body.max_tokens ?? 10 }],
        ["/v1/responses", { model: body.model, input: body.messages, stream: body.stream, tools: body.tools, max_output_tokens: body.max_tokens }],
      ];
      for (const [path, payload] of sent) {
        const response = await fetch(`${t.url}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "anthropic-version": "2023-06-01" },
          body: JSON.stringify(payload),
        });
        const text = await response.text();
        statuses.add(response.status);
        if (response.status >= 500) serverErrors.push(`${path} ${response.status} ${JSON.stringify(payload).slice(0, 200)} -> ${text.slice(0, 200)}`);
      }
    }
    expect(serverErrors).toEqual([]);
    // Both outcomes occur: the mix is neither all refused nor all served.
    expect(statuses.has(200) && statuses.has(400)).toBe(true);
  }, 120_000);
});
