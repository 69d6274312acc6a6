import { describe, expect, it } from "bun:test";
import { exampleFor } from "../../../src/plugins/sandbox/json-example.ts";
import { violations } from "./schema-check.ts";
import claudeCodeTools from "./fixtures/claude-code-2.1.197-tools.json";
import codexTools from "./fixtures/codex-0.169-tools.json";

type Schema = Record<string, any>;

/** Every function tool schema in Codex's captured requests, namespaces flattened. */
function codexFunctionSchemas(): { name: string; parameters: Schema }[] {
  const out: { name: string; parameters: Schema }[] = [];
  const visit = (tools: any[]) => {
    for (const tool of tools) {
      if (tool.type === "namespace") visit(tool.tools);
      else if (tool.type === "function") out.push({ name: tool.name, parameters: tool.parameters });
    }
  };
  for (const group of Object.values(codexTools) as any[]) visit(Array.isArray(group) ? group : group.tools);
  return out;
}

/** The example, checked: valid against the schema and the same on a second call. */
function validExample(schema: Schema): any {
  const value = exampleFor(schema);
  expect(violations(schema, value)).toEqual([]);
  expect(exampleFor(schema)).toEqual(value);
  return value;
}

describe("sandbox json-example", () => {
  it("the test's checker catches what the generator must avoid (so these tests can fail)", () => {
    const schema = { type: "object", properties: { n: { type: "integer", minimum: 2 }, tag: { enum: ["a", "b"] } }, required: ["n", "tag"], additionalProperties: false };
    expect(violations(schema, { n: 2, tag: "a" })).toEqual([]);
    expect(violations(schema, { input: "x" })).toEqual(["$: missing required property n", "$: missing required property tag", "$.input: no value allowed"]);
    expect(violations(schema, { n: 1.5, tag: "c" })).toHaveLength(3);
    expect(violations({ type: "string", format: "date-time" }, "sandbox")).toEqual(["$: not a date-time"]);
  });

  it("gives every Claude Code 2.1.197 tool arguments its schema accepts (Agent gets description and prompt)", () => {
    expect(claudeCodeTools.length).toBeGreaterThan(20);
    for (const tool of claudeCodeTools) {
      const value = exampleFor(tool.input_schema);
      expect({ tool: tool.name, errors: violations(tool.input_schema, value) }).toEqual({ tool: tool.name, errors: [] });
    }
    const agent = claudeCodeTools.find((tool) => tool.name === "Agent")!;
    expect(exampleFor(agent.input_schema)).toMatchObject({ description: expect.any(String), prompt: expect.any(String) });
  });

  it("gives every Codex 0.169 function tool arguments its schema accepts (exec_command gets cmd)", () => {
    const tools = codexFunctionSchemas();
    expect(tools.length).toBeGreaterThan(15);
    for (const tool of tools) {
      const value = exampleFor(tool.parameters);
      expect({ tool: tool.name, errors: violations(tool.parameters, value) }).toEqual({ tool: tool.name, errors: [] });
    }
    expect(exampleFor(tools.find((tool) => tool.name === "exec_command")!.parameters)).toEqual({ cmd: "sandbox" });
  });

  it("fills required properties only, with values of their types, nested objects and arrays down", () => {
    const value = validExample({
      type: "object",
      properties: {
        name: { type: "string" },
        count: { type: "integer" },
        ratio: { type: "number" },
        on: { type: "boolean" },
        nothing: { type: "null" },
        optional: { type: "string" },
        nested: { type: "object", properties: { list: { type: "array", items: { type: "string" }, minItems: 2 } }, required: ["list"] },
      },
      required: ["name", "count", "ratio", "on", "nothing", "nested"],
      additionalProperties: false,
    });
    expect(value).toEqual({ name: "sandbox", count: 1, ratio: 1, on: false, nothing: null, nested: { list: ["sandbox", "sandbox-2"] } });
  });

  it("takes const and the first enum value, and distinct values for uniqueItems arrays", () => {
    expect(validExample({ type: "object", properties: { mode: { enum: ["fast", "slow"] }, kind: { const: "x" } }, required: ["mode", "kind"] })).toEqual({ mode: "fast", kind: "x" });
    expect(validExample({ type: "array", items: { type: "string", enum: ["a", "b", "c"] }, minItems: 3, uniqueItems: true })).toEqual(["a", "b", "c"]);
    expect(validExample({ type: "array", items: { type: "integer" }, minItems: 3, uniqueItems: true })).toEqual([1, 2, 3]);
  });

  it("writes strings in their format, within their lengths and matching simple patterns", () => {
    for (const format of ["date-time", "date", "time", "email", "uri", "url", "uuid", "ipv4", "hostname"]) validExample({ type: "string", format });
    expect(validExample({ type: "string", minLength: 12 })).toBe("sandboxxxxxx");
    expect(validExample({ type: "string", maxLength: 3 })).toBe("san");
    for (const pattern of ["^[a-z]{3}-\\d{2}$", "^[A-Z][a-z]+(_[0-9]+)?$", "^(GET|POST)$", "^v\\d+\\.\\d+\\.\\d+$", "^[^\\s]{4,}$", "^\\w+@\\w+\\.com$"]) {
      validExample({ type: "string", pattern });
    }
  });

  it("keeps numbers within bounds, exclusive bounds and multiples", () => {
    expect(validExample({ type: "integer", minimum: 10, maximum: 20 })).toBe(10);
    expect(validExample({ type: "integer", exclusiveMinimum: 10 })).toBe(11);
    expect(validExample({ type: "number", maximum: 0.5 })).toBe(0.5);
    expect(validExample({ type: "number", minimum: 0.25, multipleOf: 0.5 })).toBe(1);
    expect(validExample({ type: "integer", minimum: 7, multipleOf: 5 })).toBe(10);
    validExample({ type: "number", exclusiveMaximum: 0 });
  });

  it("follows $ref into $defs and definitions, recursive schemas included", () => {
    const tree: Schema = {
      type: "object",
      properties: { root: { $ref: "#/$defs/node" } },
      required: ["root"],
      $defs: {
        node: {
          type: "object",
          properties: { label: { type: "string" }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] }, children: { type: "array", items: { $ref: "#/$defs/node" } } },
          required: ["label", "next", "children"],
        },
      },
    };
    const value = exampleFor(tree) as any;
    expect(violations(tree, value)).toEqual([]);
    expect(value.root.next.next).toMatchObject({ label: "sandbox", children: [] });
    expect(JSON.stringify(value).length).toBeLessThan(1000);
    validExample({ definitions: { id: { type: "string", format: "uuid" } }, type: "object", properties: { id: { $ref: "#/definitions/id" } }, required: ["id"] });
  });

  it("merges allOf, takes the first non-null anyOf/oneOf branch and the first non-null of a type list", () => {
    expect(
      validExample({
        allOf: [
          { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
          { properties: { b: { type: "integer", minimum: 3 } }, required: ["b"] },
        ],
      }),
    ).toEqual({ a: "sandbox", b: 3 });
    expect(validExample({ anyOf: [{ type: "null" }, { type: "array", items: { type: "string" }, minItems: 1 }] })).toEqual(["sandbox"]);
    expect(validExample({ oneOf: [{ type: "integer" }, { type: "string" }] })).toBe(1);
    expect(validExample({ type: ["null", "boolean"] })).toBe(false);
  });

  it("fills minProperties and tuples (prefixItems)", () => {
    expect(validExample({ type: "object", minProperties: 2, additionalProperties: { type: "integer" } })).toEqual({ key1: 2, key2: 3 });
    expect(validExample({ type: "object", minProperties: 1, properties: { x: { type: "boolean" } } })).toEqual({ x: false });
    expect(validExample({ type: "array", prefixItems: [{ type: "string" }, { type: "integer" }], minItems: 2 })).toEqual(["sandbox", 2]);
  });

  it("uses the text it is given for plain strings", () => {
    expect(exampleFor({ type: "object", properties: { title: { type: "string" } }, required: ["title"] }, { text: "Sandbox session" })).toEqual({ title: "Sandbox session" });
  });
});
