import { expect, test } from "bun:test";
import { startFakeUpstream } from "./server.ts";
import { fakeRouteFor, registerFake, registeredVendors } from "./registry.ts";

test("the fake upstream's routes come from the vendors' modules, each registering its own", async () => {
  const fake = await startFakeUpstream();
  try {
    expect(registeredVendors().sort()).toEqual(["anthropic", "gemini", "openai-chat", "openai-images", "openai-responses"]);
    expect(fakeRouteFor("POST", "/v1beta/models/gemini-2.5-flash:generateContent")).toBeDefined();
    expect(fakeRouteFor("POST", "/v1/nothing")).toBeUndefined();
    const answer = await fetch(`${fake.url}/v1/nothing`, { method: "POST", body: "{}" });
    expect(answer.status).toBe(404);
  } finally {
    await fake.stop();
  }
});

test("a route two vendors claim is refused", () => {
  expect(() => registerFake("another-vendor", [{ method: "POST", path: "/v1/messages", handler: () => new Response() }])).toThrow(/anthropic and another-vendor/);
});
