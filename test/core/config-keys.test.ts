import { describe, expect, it } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Type } from "@sinclair/typebox";
import { describeUnknownKey, findUnknownKey, nearestKey } from "../../src/core/config-keys.ts";
import { parseCatalog } from "../../src/plugins/catalog/catalog.ts";

describe("nearestKey", () => {
  it("finds swapped, missing, extra and changed letters, ignoring case", () => {
    const keys = ["cache_ttl_ms", "requests_per_second", "port", "hostname"];
    expect(nearestKey("cache_tll_ms", keys)).toBe("cache_ttl_ms");
    expect(nearestKey("prot", keys)).toBe("port");
    expect(nearestKey("hostnme", keys)).toBe("hostname");
    expect(nearestKey("Requests_Per_Sec", keys)).toBe("requests_per_second");
  });

  it("suggests nothing for a word far from every key", () => {
    expect(nearestKey("burst", ["requests_per_second"])).toBeUndefined();
    expect(nearestKey("x", [])).toBeUndefined();
  });
});

describe("findUnknownKey", () => {
  const schema = Type.Object({
    open: Type.Object({}, { additionalProperties: true }),
    typed: Type.Object({}, { additionalProperties: Type.Object({ a: Type.Number() }) }),
    list: Type.Array(Type.Object({ name: Type.String() })),
    byName: Type.Record(Type.String(), Type.Object({ size: Type.Number() })),
    either: Type.Union([Type.Literal("all"), Type.Object({ only: Type.Array(Type.String()) }), Type.Object({ except: Type.Array(Type.String()) })]),
  });

  it("treats an object without additionalProperties as closed, and one that allows extras as open", () => {
    expect(findUnknownKey(schema, { open: { anything: 1 }, typed: { x: { a: 1 } } }, "root")).toBeUndefined();
    expect(findUnknownKey(schema, { typed: { x: { a: 1, b: 2 } } }, "root")?.path).toBe("root.typed.x.b");
    expect(findUnknownKey(schema, { extra: 1 }, "root")).toMatchObject({ path: "root.extra", key: "extra" });
  });

  it("walks arrays, records and unions (a value one variant takes passes)", () => {
    expect(findUnknownKey(schema, { list: [{ name: "a" }, { nmae: "b" }] }, "root")?.path).toBe("root.list[1].nmae");
    expect(findUnknownKey(schema, { byName: { small: { size: 1 }, big: { szie: 2 } } }, "root")?.path).toBe("root.byName.big.szie");
    expect(findUnknownKey(schema, { either: "all" }, "root")).toBeUndefined();
    expect(findUnknownKey(schema, { either: { except: ["x"] } }, "root")).toBeUndefined();
    expect(findUnknownKey(schema, { either: { onyl: ["x"] } }, "root")?.path).toBe("root.either.onyl");
  });

  it("quotes a key that is not a plain word in the path", () => {
    const found = findUnknownKey(schema, { "a b": 1 }, "root")!;
    expect(found.path).toBe('root."a b"');
    expect(describeUnknownKey(found)).toContain("known keys: open, typed, list, byName, either");
  });
});

describe("catalog keys", () => {
  const text = readFileSync(resolve(import.meta.dir, "../../catalog.yaml"), "utf8");
  const failure = (changed: string) => {
    try {
      parseCatalog(changed, "catalog.yaml");
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error("the catalog loaded");
  };

  it("the shipped catalog.yaml has no unknown key", () => {
    expect(parseCatalog(text, "catalog.yaml").all().length).toBeGreaterThan(0);
  });

  it("a misspelled key of a model names the file, line, model, path and nearest key", () => {
    expect(failure(text.replace("capabilities: { tools: true", "capabilities: { tool: true"))).toMatch(
      /^catalog\.yaml:\d+: model "[^"]+": unknown key models\[0\]\.capabilities\.tool \(did you mean tools\?\)$/,
    );
    expect(failure(text.replace("    kind: chat\n", "    knid: chat\n"))).toContain("unknown key models[0].knid (did you mean kind?)");
  });

  it("a misspelled top-level key", () => {
    expect(failure(text.replace("\nmodels:", "\nmodles:"))).toBe("catalog.yaml: unknown key modles (did you mean models?)");
  });
});
