import { describe, expect, it } from "bun:test";
import { geminiParameters, sanitizeGeminiSchema } from "../../../../src/plugins/providers/gemini/tool-schema.ts";
import { validateGeminiRequest } from "./fake.ts";

/** What the fake (mirroring Gemini's 400s) says of a function declared with these parameters. */
function geminiAccepts(parameters: unknown): boolean {
  const body = {
    contents: [{ role: "user", parts: [{ text: "hi" }] }],
    tools: [{ functionDeclarations: [{ name: "f", ...(parameters ? { parameters } : {}) }] }],
  };
  validateGeminiRequest(body, "gemini-2.5-flash-lite");
  return true;
}

describe("gemini schema sanitising", () => {
  it("drops the JSON-schema keywords Gemini rejects, at every depth", () => {
    const schema = {
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      additionalProperties: false,
      propertyNames: { pattern: "^[a-z]+$" },
      properties: {
        city: { type: "string", minLength: 1, examples: ["Paris"], format: "uri" },
        days: { type: "integer", exclusiveMinimum: 0, maximum: 14, format: "int32" },
        nested: { type: "object", additionalProperties: { type: "string" }, properties: { a: { type: "boolean", deprecated: true } } },
      },
      required: ["city"],
    };
    const sanitized = sanitizeGeminiSchema(schema);
    expect(sanitized).toEqual({
      type: "object",
      properties: {
        city: { type: "string", minLength: 1 },
        days: { type: "integer", minimum: 0, maximum: 14, format: "int32" },
        nested: { type: "object", properties: { a: { type: "boolean" } } },
      },
      required: ["city"],
    });
    expect(geminiAccepts(sanitized)).toBe(true);
    expect(() => geminiAccepts(schema)).toThrow(/Unknown name "\$schema"/);
  });

  it("turns const into a one-value enum and moves non-string enums into the description", () => {
    expect(sanitizeGeminiSchema({ const: "fixed" })).toEqual({ type: "string", enum: ["fixed"] });
    expect(sanitizeGeminiSchema({ type: "integer", enum: [1, 2], description: "Level." })).toEqual({
      type: "integer",
      description: "Level. Allowed values: 1, 2.",
    });
    expect(sanitizeGeminiSchema({ type: ["string", "null"], enum: ["a", "b", null] })).toEqual({ type: "string", nullable: true, enum: ["a", "b"] });
  });

  it("reads nullable unions and type arrays the way Gemini expresses them", () => {
    expect(sanitizeGeminiSchema({ anyOf: [{ type: "string" }, { type: "null" }], description: "maybe" })).toEqual({
      type: "string",
      description: "maybe",
      nullable: true,
    });
    expect(sanitizeGeminiSchema({ type: ["string", "number"] })).toEqual({ anyOf: [{ type: "string" }, { type: "number" }] });
    expect(sanitizeGeminiSchema({ oneOf: [{ type: "string" }, { type: "integer" }] })).toEqual({ anyOf: [{ type: "string" }, { type: "integer" }] });
  });

  it("keeps a typed node's own shape when its anyOf only adds constraints", () => {
    const schema = {
      type: "object",
      properties: { a: { type: "string" }, b: { type: "string" } },
      anyOf: [{ required: ["a"] }, { required: ["b"] }],
    };
    expect(sanitizeGeminiSchema(schema)).toEqual({ type: "object", properties: { a: { type: "string" }, b: { type: "string" } } });
  });

  it("inlines local $refs, merges allOf, and stops recursive references", () => {
    const schema = {
      type: "object",
      $defs: { Point: { type: "object", properties: { x: { type: "number" }, y: { type: "number" } }, required: ["x", "y"] } },
      definitions: { Node: { type: "object", properties: { value: { type: "string" }, next: { $ref: "#/definitions/Node" } } } },
      properties: {
        at: { $ref: "#/$defs/Point", description: "Where." },
        both: { allOf: [{ $ref: "#/$defs/Point" }, { properties: { z: { type: "number" } }, required: ["z"] }] },
        list: { $ref: "#/definitions/Node" },
      },
    };
    const sanitized = sanitizeGeminiSchema(schema);
    const properties = sanitized.properties as Record<string, { properties: Record<string, unknown>; required?: string[]; [key: string]: unknown }>;
    expect(properties.at).toEqual({
      type: "object",
      description: "Where.",
      properties: { x: { type: "number" }, y: { type: "number" } },
      required: ["x", "y"],
    });
    expect(properties.both.properties).toEqual({ x: { type: "number" }, y: { type: "number" }, z: { type: "number" } });
    expect(properties.both.required).toEqual(["x", "y", "z"]);
    expect(properties.list.properties.next).toEqual({ type: "object" });
    expect(geminiAccepts(sanitized)).toBe(true);
  });

  it("gives every array items, removes empty properties and keeps required within properties", () => {
    const sanitized = sanitizeGeminiSchema({
      type: "object",
      properties: {
        tags: { type: "array" },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }] },
        free: { type: "object", properties: {} },
        text: { type: "string", properties: { bogus: { type: "string" } }, required: ["bogus"] },
      },
      required: ["tags", "missing"],
    });
    expect(sanitized).toEqual({
      type: "object",
      properties: {
        tags: { type: "array", items: { type: "string" } },
        pair: { type: "array", items: { anyOf: [{ type: "string" }, { type: "integer" }] } },
        free: { type: "object" },
        text: { type: "string" },
      },
      required: ["tags"],
    });
    expect(geminiAccepts(sanitized)).toBe(true);
  });

  it("infers missing types from the schema's shape", () => {
    expect(sanitizeGeminiSchema({ properties: { a: { items: { type: "string" } }, b: { enum: ["x"] } } })).toEqual({
      type: "object",
      properties: { a: { type: "array", items: { type: "string" } }, b: { type: "string", enum: ["x"] } },
    });
  });

  it("omits the parameters of a function without arguments (Gemini refuses an empty OBJECT)", () => {
    expect(geminiParameters({ type: "object", properties: {} })).toBeUndefined();
    expect(geminiParameters({ type: "object", properties: {}, additionalProperties: false, required: [] })).toBeUndefined();
    expect(geminiParameters(undefined)).toBeUndefined();
    expect(() => geminiAccepts({ type: "object", properties: {} })).toThrow(/should be non-empty for OBJECT type/);
    expect(geminiParameters({ properties: { q: { type: "string" } } })).toEqual({ type: "object", properties: { q: { type: "string" } } });
  });
});
