import { afterAll, describe, expect, it } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadCatalog, parseCatalog } from "../../../src/plugins/catalog/catalog.ts";

const CATALOG_FILE = join(import.meta.dir, "../../../catalog.yaml");
const TODAY = new Date("2026-11-22T12:00:00Z");
const catalog = loadCatalog(CATALOG_FILE, TODAY);

function model(id: string) {
  const found = catalog.get(id);
  if (!found) throw new Error(`missing ${id}`);
  return found;
}

/** The 39 chat models the default catalog serves, by exact id. */
const TABLE_A = [
  "gpt-6.2-astra", "gpt-6.2-sol", "gpt-6-astra", "gpt-6.1-sol", "gpt-6.1-terra", "gpt-6-luna",
  "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna", "claude-fable-5-2", "claude-opus-5-5",
  "claude-sonnet-5-5", "claude-haiku-5-5", "claude-haiku-4-5", "gemini-4-carbon", "gemini-4-argon",
  "gemini-4-hydrogen", "gemini-3.8-flash", "gemini-3.1-pro-preview", "gemini-3.5-flash-lite",
  "gemini-2.5-flash-lite", "deepseek-flash", "deepseek-v4-pro", "grok-4.7", "grok-4.3", "grok-build-0.1",
  "mistral-large-2512", "mistral-medium-latest", "mistral-small-2603", "codestral-2508", "devstral-2512",
  "qwen3.7-max", "qwen3.7-plus", "qwen3-max", "qwen3-coder-plus", "kimi-k3", "glm-5.3",
  "llama-4-maverick-17b-128e-instruct", "llama-4-scout-17b-16e-instruct",
];

describe("catalog.yaml", () => {
  it("holds 40 models: the 39 chat models and one image model", () => {
    const all = catalog.all();
    expect(all).toHaveLength(40);
    expect(all.filter((m) => m.kind === "chat").map((m) => m.id).sort()).toEqual([...TABLE_A].sort());
    expect(all.filter((m) => m.kind === "image").map((m) => m.id)).toEqual(["gpt-image-2.6-sunburst"]);
  });

  it("has unique ids and at least seven families", () => {
    const ids = catalog.all().map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    const families = new Set(catalog.all().map((m) => m.family));
    expect(families.size).toBeGreaterThanOrEqual(7);
    for (const family of ["openai", "anthropic", "google", "deepseek", "xai"]) expect(families.has(family)).toBe(true);
  });

  it("routes every model to a provider and an upstream model name", () => {
    for (const m of catalog.all()) {
      expect(m.provider).toMatch(/^[a-z]+$/);
      // Groq names the Llama models with their vendor's prefix; our ids carry none.
      expect(m.upstream_model).toBe(m.family === "meta" ? `meta-llama/${m.id}` : m.id);
      expect(m.max_output_tokens).toBeLessThanOrEqual(m.context_length);
    }
    expect(model("gemini-4-carbon").provider).toBe("gemini");
    expect(model("llama-4-scout-17b-16e-instruct").provider).toBe("groq");
  });

  it("has no id with a provider prefix: no id contains a slash", () => {
    for (const m of catalog.all()) expect(m.id).not.toContain("/");
    expect(catalog.get("meta-llama/llama-4-scout-17b-16e-instruct")).toBeUndefined();
    expect(catalog.suggest("meta-llama/llama-4-scout-17b-16e-instruct")).toBe("llama-4-scout-17b-16e-instruct");
  });

  it("looks ids up exactly and case-sensitively", () => {
    expect(catalog.get("gpt-6-luna")?.id).toBe("gpt-6-luna");
    expect(catalog.get("GPT-6-LUNA")).toBeUndefined();
    expect(catalog.get("openai/gpt-6-luna")).toBeUndefined();
    expect(catalog.suggest("openai/GPT-6-Luna")).toBe("gpt-6-luna");
    expect(catalog.suggest("no-such-model")).toBeUndefined();
  });
});

describe("pricesFor", () => {
  it("gives exact integer nano-USD per token", () => {
    expect(catalog.pricesFor(model("gpt-6.2-sol"), 1000, TODAY)).toEqual({
      input: 2000, output: 10000, cacheRead: 100, cacheWrite: 2500, cacheWrite1h: 2500,
    });
    expect(catalog.pricesFor(model("qwen3.7-max"), 1000, TODAY)).toEqual({
      input: 1475, output: 4425, cacheRead: 295, cacheWrite: 1844, cacheWrite1h: 1844,
    });
    expect(catalog.pricesFor(model("deepseek-flash"), 1000, TODAY).cacheRead).toBe(6);
    expect(catalog.pricesFor(model("gemini-4-hydrogen"), 1000, TODAY).cacheRead).toBe(75);
    for (const m of catalog.all()) {
      const prices = catalog.pricesFor(m, 1, TODAY);
      for (const value of Object.values(prices)) expect(Number.isSafeInteger(value)).toBe(true);
    }
  });

  it("bills cache tokens as input where the provider has no cache price", () => {
    const llama = catalog.pricesFor(model("llama-4-scout-17b-16e-instruct"), 10, TODAY);
    expect(llama).toEqual({ input: 110, output: 340, cacheRead: 110, cacheWrite: 110, cacheWrite1h: 110 });
    expect(catalog.pricesFor(model("gemini-4-hydrogen"), 10, TODAY).cacheWrite).toBe(1500);
  });

  it("picks the price change in effect at the request's UTC date", () => {
    const carbon = model("gemini-4-carbon");
    expect(catalog.pricesFor(carbon, 10, new Date("2026-11-30T23:59:59.999Z")).input).toBe(2000);
    expect(catalog.pricesFor(carbon, 10, new Date("2026-12-01T00:00:00Z"))).toEqual({
      input: 4000, output: 20000, cacheRead: 200, cacheWrite: 4000, cacheWrite1h: 4000,
    });
    const flash = model("gemini-3.8-flash");
    expect(catalog.pricesFor(flash, 10, new Date("2026-12-31T23:59:59Z")).output).toBe(3750);
    expect(catalog.pricesFor(flash, 10, new Date("2027-01-01T00:00:00Z")).output).toBe(7500);
    expect(catalog.pricesFor(carbon, 10).input).toBe(2000); // the catalog's clock (TODAY)
  });

  it("applies the long-context tier to the whole request above the threshold", () => {
    const haiku = model("claude-haiku-5-5");
    expect(catalog.pricesFor(haiku, 100_000, TODAY)).toEqual({ input: 100, output: 500, cacheRead: 10, cacheWrite: 125, cacheWrite1h: 200 });
    expect(catalog.pricesFor(haiku, 100_001, TODAY)).toEqual({ input: 500, output: 2500, cacheRead: 50, cacheWrite: 625, cacheWrite1h: 1000 });
    const grok = model("grok-4.7");
    expect(catalog.pricesFor(grok, 199_999, TODAY).input).toBe(2000);
    expect(catalog.pricesFor(grok, 200_000, TODAY).input).toBe(4000);
    const sol = model("gpt-6.2-sol");
    expect(catalog.pricesFor(sol, 272_001, TODAY)).toEqual({ input: 4000, output: 15000, cacheRead: 200, cacheWrite: 5000, cacheWrite1h: 5000 });
  });

  it("prices a 1-hour cache write at cache_write_1h: 2x input for every Anthropic model, cache_write elsewhere", () => {
    const anthropic = catalog.all().filter((m) => m.provider === "anthropic");
    expect(anthropic.length).toBeGreaterThan(0);
    for (const m of anthropic) {
      const prices = catalog.pricesFor(m, 1, TODAY);
      expect(prices.cacheWrite1h).toBe(2 * prices.input);
      expect(prices.cacheWrite).toBe(prices.input + prices.input / 4); // the 5-minute write: 1.25x
    }
    for (const m of catalog.all().filter((m) => m.provider !== "anthropic")) {
      const prices = catalog.pricesFor(m, 1, TODAY);
      expect(prices.cacheWrite1h).toBe(prices.cacheWrite);
    }
    expect(catalog.pricesFor(model("claude-sonnet-5-5"), 10, TODAY)).toEqual({ input: 2000, output: 10000, cacheRead: 100, cacheWrite: 2500, cacheWrite1h: 4000 });
  });

  it("takes cache_write_1h per price period: a price change and the long-context tier carry their own", () => {
    const entry = {
      id: "dated", name: "Dated", family: "anthropic", kind: "chat", provider: "anthropic", context_length: 1000, max_output_tokens: 100,
      prices: { input: "1.00", output: "2.00", cache_read: "0.10", cache_write: "1.25", cache_write_1h: "2.00" },
      price_changes: [
        { from: "2027-01-01", input: "3.00", output: "6.00", cache_read: "0.30", cache_write: "3.75", cache_write_1h: "6.00" },
        { from: "2027-02-01", input: "3.00", output: "6.00", cache_read: "0.30", cache_write: "3.75" },
      ],
      long_context: { above_input_tokens: 500, input: "2.00", output: "4.00", cache_read: "0.20", cache_write: "2.50", cache_write_1h: "4.00" },
      capabilities: { tools: true, vision: false, json_output: true, reasoning: false },
      created: "2026-01-01",
    };
    const c = parseCatalog(JSON.stringify({ models: [entry] }), "dated.yaml", TODAY);
    const m = c.get("dated")!;
    expect(c.pricesFor(m, 10, TODAY).cacheWrite1h).toBe(2000);
    expect(c.pricesFor(m, 10, new Date("2027-01-01T00:00:00Z")).cacheWrite1h).toBe(6000);
    expect(c.pricesFor(m, 10, new Date("2027-02-01T00:00:00Z")).cacheWrite1h).toBe(3750); // none named: the 5-minute price
    expect(c.pricesFor(m, 501, TODAY).cacheWrite1h).toBe(4000);
    expect(c.listing(m, TODAY).pricing.input_cache_write_1h).toBe("0.000002");
    expect(c.listing(m, TODAY).long_context_pricing!.input_cache_write_1h).toBe("0.000004");
    expect(c.listing(m, new Date("2027-02-01T00:00:00Z")).pricing).not.toHaveProperty("input_cache_write_1h");
    expect(() => parseCatalog(JSON.stringify({ models: [{ ...entry, prices: { ...entry.prices, cache_write_1h: 2 } }] }), "n.yaml")).toThrow(
      /prices\.cache_write_1h: must be a quoted decimal string/,
    );
  });

  it("refuses a model that is not in this catalog", () => {
    const stranger = { ...model("gpt-6-luna"), id: "stranger" };
    expect(() => catalog.pricesFor(stranger, 1, TODAY)).toThrow(/not in the catalog/);
  });
});

describe("listing", () => {
  it("builds the /v1/models entry with USD-per-token price strings", () => {
    const entry = catalog.listing(model("gpt-6.2-sol"), TODAY);
    expect(entry).toMatchObject({
      id: "gpt-6.2-sol",
      object: "model",
      created: Date.UTC(2026, 10, 17) / 1000,
      owned_by: "openai",
      context_length: 1_050_000,
      max_output_tokens: 128_000,
      pricing: { prompt: "0.000002", completion: "0.00001", input_cache_read: "0.0000001", input_cache_write: "0.0000025" },
      architecture: { input_modalities: ["text", "image"], output_modalities: ["text"] },
      long_context_pricing: { above_prompt_tokens: 272_000, prompt: "0.000004" },
    });
    expect(entry.supported_parameters).toEqual(expect.arrayContaining(["tools", "response_format", "reasoning_effort"]));
  });

  it("shows input_cache_write_1h only where the model has a 1-hour write price", () => {
    expect(catalog.listing(model("gpt-6.2-sol"), TODAY).pricing).not.toHaveProperty("input_cache_write_1h");
    expect(catalog.listing(model("claude-sonnet-5-5"), TODAY).pricing).toEqual({
      prompt: "0.000002", completion: "0.00001", input_cache_read: "0.0000001", input_cache_write: "0.0000025", input_cache_write_1h: "0.000004",
    });
    expect(catalog.listing(model("claude-haiku-5-5"), TODAY).long_context_pricing?.input_cache_write_1h).toBe("0.000001");
  });

  it("shows the price in effect at the given date", () => {
    const carbon = model("gemini-4-carbon");
    expect(catalog.listing(carbon, TODAY).pricing.prompt).toBe("0.000002");
    expect(catalog.listing(carbon, new Date("2026-12-02T00:00:00Z")).pricing.prompt).toBe("0.000004");
  });

  it("derives parameters and modalities from capabilities and kind", () => {
    const codestral = catalog.listing(model("codestral-2508"), TODAY);
    expect(codestral.architecture.input_modalities).toEqual(["text"]);
    expect(codestral.supported_parameters).not.toContain("reasoning");
    expect(catalog.listing(model("deepseek-flash"), TODAY).supported_parameters).not.toContain("structured_outputs");
    const image = catalog.listing(model("gpt-image-2.6-sunburst"), TODAY);
    expect(image.architecture.output_modalities).toEqual(["image"]);
    expect(image.supported_parameters).toEqual(["prompt", "size", "quality"]);
  });
});

describe("loadCatalog validation", () => {
  const dir = mkdtempSync(join(tmpdir(), "catalog-test-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const good = {
    id: "test-model",
    name: "Test",
    family: "openai",
    kind: "chat",
    provider: "openai",
    context_length: 1000,
    max_output_tokens: 100,
    prices: { input: "1.00", output: "2.00", cache_read: "0.10", cache_write: "1.25" },
    capabilities: { tools: true, vision: false, json_output: true, reasoning: false },
    created: "2026-01-01",
  };

  /** Writes a catalog whose second model is `bad` and returns the load error message. */
  function loadError(bad: unknown, name = "bad.yaml"): string {
    const file = join(dir, name);
    writeFileSync(file, JSON.stringify({ models: [{ ...good, id: "first" }, bad] }, null, 2)); // JSON is YAML
    try {
      loadCatalog(file);
    } catch (error) {
      const message = (error as Error).message;
      expect(message).not.toContain("\n");
      return message;
    }
    throw new Error("expected the catalog to be rejected");
  }

  it("accepts a good entry and fills defaults", () => {
    const c = parseCatalog(JSON.stringify({ models: [good] }), "inline.yaml");
    const m = c.get("test-model")!;
    expect(m.upstream_model).toBe("test-model");
    expect(m.input_modalities).toEqual(["text"]);
    expect(m.output_modalities).toEqual(["text"]);
  });

  it("rejects a price with four decimals, naming file, model and field", () => {
    const message = loadError({ ...good, prices: { ...good.prices, cache_read: "0.0001" } }, "four-decimals.yaml");
    expect(message).toContain(join(dir, "four-decimals.yaml"));
    expect(message).toContain('model "test-model"');
    expect(message).toContain("prices.cache_read");
    expect(message).toContain("nano-USD");
  });

  it("rejects a four-decimal price inside a price change or a long-context tier", () => {
    const change = { from: "2027-01-01", input: "1.0005", output: "2", cache_read: "0.1", cache_write: "1" };
    expect(loadError({ ...good, price_changes: [change] })).toContain("price_changes[0].input");
    const long = { above_input_tokens: 500, input: "1", output: "2.0001", cache_read: "0.1", cache_write: "1" };
    expect(loadError({ ...good, long_context: long })).toContain("long_context.output");
  });

  it("rejects a price written as a YAML number", () => {
    const file = join(dir, "number.yaml");
    writeFileSync(file, [
      "models:",
      "  - id: numeric",
      "    name: Numeric",
      "    family: openai",
      "    kind: chat",
      "    provider: openai",
      "    context_length: 1000",
      "    max_output_tokens: 100",
      "    prices: { input: 1.5, output: \"2\", cache_read: \"0.1\", cache_write: \"1\" }",
      "    capabilities: { tools: true, vision: false, json_output: true, reasoning: false }",
      "    created: \"2026-01-01\"",
    ].join("\n"));
    expect(() => loadCatalog(file)).toThrow(/number\.yaml:2: model "numeric": prices\.input: must be a quoted decimal string/);
  });

  it("rejects duplicate ids", () => {
    expect(loadError({ ...good, id: "first" })).toMatch(/model "first": id: duplicate id/);
  });

  it("rejects unknown keys, bad kinds, bad dates and impossible limits", () => {
    expect(loadError({ ...good, prices: { ...good.prices, cache_reed: "1" } })).toContain("prices.cache_reed");
    expect(loadError({ ...good, kind: "video" })).toContain("test-model\": kind:");
    expect(loadError({ ...good, created: "2026-02-30" })).toContain("created:");
    expect(loadError({ ...good, max_output_tokens: 5000 })).toContain("max_output_tokens:");
    expect(loadError({ ...good, capabilities: { ...good.capabilities, vision: "yes" } })).toContain("capabilities.vision");
    const dup = { from: "2027-01-01", input: "1", output: "2", cache_read: "0.1", cache_write: "1" };
    expect(loadError({ ...good, price_changes: [dup, dup] })).toContain("price_changes[1].from: 2027-01-01 is not after");
    const earlier = { ...dup, from: "2026-12-01" };
    expect(loadError({ ...good, price_changes: [dup, earlier] })).toContain("price_changes[1].from");
  });

  it("rejects an id with a provider prefix or a space, and keeps a prefixed upstream_model", () => {
    const prefixed = loadError({ ...good, id: "meta-llama/test-model" });
    expect(prefixed).toContain('model "meta-llama/test-model": id:');
    expect(prefixed).toContain("no provider prefix");
    expect(loadError({ ...good, id: "test model" })).toContain("id:");
    const c = parseCatalog(JSON.stringify({ models: [{ ...good, upstream_model: "vendor/test-model" }] }), "inline.yaml");
    expect(c.get("test-model")!.upstream_model).toBe("vendor/test-model");
  });

  it("names an entry without an id by its position", () => {
    const { id: _id, ...noId } = good;
    expect(loadError(noId)).toContain("models[1]: id:");
  });

  it("checks fallbacks: known ids of the same kind, not the model itself", () => {
    const other = { ...good, id: "other-model" };
    const c = parseCatalog(JSON.stringify({ models: [{ ...good, fallbacks: ["other-model"] }, other] }), "inline.yaml");
    expect(c.get("test-model")!.fallbacks).toEqual(["other-model"]);
    expect(c.get("other-model")!.fallbacks).toBeUndefined();
    const reject = (models: unknown[]) => () => parseCatalog(JSON.stringify({ models }), "f.yaml");
    expect(reject([{ ...good, fallbacks: ["nope"] }])).toThrow(/model "test-model": fallbacks\[0\]: "nope" is not a model of this catalog/);
    expect(reject([{ ...good, fallbacks: ["test-model"] }])).toThrow(/fallbacks\[0\]: a model cannot be its own fallback/);
    const image = { ...good, id: "pic", kind: "image", output_modalities: ["image"] };
    expect(reject([{ ...good, fallbacks: ["pic"] }, image])).toThrow(/fallbacks\[0\]: "pic" is an image model; a chat model's fallbacks must be chat models/);
  });

  it("rejects a file without a models list, or that is not YAML", () => {
    expect(() => parseCatalog("models: {}", "x.yaml")).toThrow(/^x\.yaml: expected a top-level `models:` list/);
    expect(() => parseCatalog("models: [", "y.yaml")).toThrow(/^y\.yaml: invalid YAML/);
    expect(() => loadCatalog(join(dir, "missing.yaml"))).toThrow(/missing\.yaml: cannot read/);
  });
});
