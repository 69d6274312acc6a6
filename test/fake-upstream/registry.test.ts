import { expect, test } from "bun:test";
import { join } from "node:path";
import { startFakeUpstream } from "./server.ts";
import { fakeRouteFor, registerFake, registeredVendors } from "./registry.ts";

/** The vendors whose fake lives in their provider's test folder (test/plugins/providers/<vendor>/fake.ts). */
function providerFolderFakes(): string[] {
  const testRoot = join(import.meta.dir, "..");
  return [...new Bun.Glob("plugins/providers/*/fake.ts").scanSync({ cwd: testRoot })].map((file) => file.split("/")[2]!);
}

test("the fake upstream's routes come from the vendors' modules, each registering its own", async () => {
  const fake = await startFakeUpstream();
  try {
    const vendors = registeredVendors();
    // The shared fakes in this folder, and every provider folder's fake under its folder's name.
    expect(vendors).toEqual(expect.arrayContaining(["anthropic", "openai-chat", "openai-images", "openai-responses"]));
    expect(vendors).toEqual(expect.arrayContaining(providerFolderFakes()));
    expect(fakeRouteFor("POST", "/v1/chat/completions")).toBeDefined();
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
