/**
 * JSON Schema -> the OpenAPI-3.0 subset Gemini accepts in functionDeclarations.parameters and
 * generationConfig.responseSchema (docs/wire-formats.md#google-gemini). Gemini answers 400 "Unknown name"
 * for any other keyword, "should be non-empty for OBJECT type" for `properties: {}`, "property is not
 * defined" for `required` names missing from `properties`, "only allowed for OBJECT type" for
 * properties on non-objects, and rejects arrays without `items`.
 */

import { objectOf, type JsonObject } from "../../../formats/json.ts";

type Schema = JsonObject;

const NUMERIC_KEYWORDS = ["minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "minProperties", "maxProperties"] as const;
const FORMATS: Record<string, ReadonlySet<string>> = {
  string: new Set(["enum", "date-time"]),
  integer: new Set(["int32", "int64"]),
  number: new Set(["float", "double"]),
};
const TYPES = new Set(["string", "number", "integer", "boolean", "array", "object"]);
/** Deeper $ref chains (or recursive schemas) end in a plain object. */
const MAX_REF_DEPTH = 8;

interface Walk {
  root: Schema;
  refs: string[];
}

/** A JSON schema in the subset Gemini accepts (never throws; unknown constructs are dropped). */
export function sanitizeGeminiSchema(schema: unknown): Schema {
  const root = isObject(schema) ? schema : {};
  return sanitize(root, { root, refs: [] });
}

/**
 * Function parameters for Gemini: an object schema, or undefined when the function takes no arguments
 * (Gemini refuses an object without properties at the root).
 */
export function geminiParameters(schema: unknown): Schema | undefined {
  const sanitized = sanitizeGeminiSchema(schema);
  if (!sanitized.properties) return undefined;
  sanitized.type = "object";
  return sanitized;
}

function sanitize(input: Schema, walk: Walk): Schema {
  if (typeof input.$ref === "string") return sanitizeReference(input, input.$ref, walk);
  const node = foldAllOf(input, walk, 0);
  const out: Schema = {};
  if (typeof node.title === "string") out.title = node.title;
  if (typeof node.description === "string") out.description = node.description;
  if (node.nullable === true) out.nullable = true;

  const alternatives: Schema[] = [];
  let type = readType(node.type, out, alternatives);
  readEnum(node, out);
  if (type === undefined && alternatives.length === 0) type = inferType(node, out);

  // A node with its own type keeps its own shape: branches that only add constraints to it
  // (e.g. anyOf [{required:[a]}, {required:[b]}]) cannot be expressed and are dropped.
  const anyOf = type !== undefined ? [] : [...(Array.isArray(node.anyOf) ? node.anyOf : []), ...(Array.isArray(node.oneOf) ? node.oneOf : [])];
  for (const branch of anyOf) {
    if (!isObject(branch)) continue;
    if (branch.type === "null" && Object.keys(branch).length === 1) out.nullable = true;
    else {
      const sanitized = sanitize(branch, walk);
      if (Object.keys(sanitized).length > 0) alternatives.push(sanitized);
    }
  }
  const [only] = alternatives;
  if (alternatives.length === 1 && only && type === undefined) return mergeInto(out, only);
  if (alternatives.length > 0) {
    out.anyOf = alternatives;
    return out;
  }
  if (type !== undefined) out.type = type;
  copyNumbers(node, out);
  if (typeof node.pattern === "string" && type === "string") out.pattern = node.pattern;
  if (typeof node.format === "string" && FORMATS[type ?? ""]?.has(node.format)) out.format = node.format;
  if (type === "object") readProperties(node, out, walk);
  if (type === "array") out.items = readItems(node, walk);
  else for (const key of ["minItems", "maxItems"]) delete out[key];
  return out;
}

/** A local `$ref` inlined (siblings win); a loop or an unknown target becomes a plain object. */
function sanitizeReference(input: Schema, ref: string, walk: Walk): Schema {
  const { $ref: _ref, ...siblings } = input;
  const target = resolvePointer(walk.root, ref);
  if (!target || walk.refs.includes(ref) || walk.refs.length >= MAX_REF_DEPTH) {
    return typeof siblings.description === "string" ? { type: "object", description: siblings.description } : { type: "object" };
  }
  walk.refs.push(ref);
  try {
    return sanitize({ ...target, ...siblings }, walk);
  } finally {
    walk.refs.pop();
  }
}

/** allOf folded into one node: properties and required are unions; other keywords keep their first value. */
function foldAllOf(input: Schema, walk: Walk, depth: number): Schema {
  if (!Array.isArray(input.allOf)) return input;
  const { allOf, ...rest } = input;
  let node: Schema = rest;
  for (const raw of allOf) {
    if (!isObject(raw) || depth >= MAX_REF_DEPTH) continue;
    const part = typeof raw.$ref === "string" ? resolvePointer(walk.root, raw.$ref) : raw;
    if (part) node = mergeSchemas(node, foldAllOf(part, walk, depth + 1));
  }
  return node;
}

function readType(raw: unknown, out: Schema, alternatives: Schema[]): string | undefined {
  if (typeof raw === "string") {
    if (raw === "null") {
      out.nullable = true;
      return undefined;
    }
    return TYPES.has(raw) ? raw : undefined;
  }
  if (!Array.isArray(raw)) return undefined;
  const types = raw.filter((item): item is string => typeof item === "string" && TYPES.has(item));
  if (raw.includes("null")) out.nullable = true;
  if (types.length === 1) return types[0];
  for (const item of types) alternatives.push({ type: item });
  return undefined;
}

/** Gemini enums are string-only: `const` becomes a one-value enum; other values move to the description. */
function readEnum(node: Schema, out: Schema): void {
  const values: unknown[] | undefined = Array.isArray(node.enum) ? node.enum : node.const !== undefined ? [node.const] : undefined;
  if (!values) return;
  if (values.includes(null)) out.nullable = true;
  const present = values.filter((value) => value !== null);
  if (present.length === 0) return;
  if (present.every((value) => typeof value === "string")) {
    out.enum = present;
    return;
  }
  const listed = `Allowed values: ${present.map((value) => JSON.stringify(value)).join(", ")}.`;
  out.description = out.description ? `${out.description} ${listed}` : listed;
}

function inferType(node: Schema, out: Schema): string | undefined {
  if (isObject(node.properties)) return "object";
  if (node.items !== undefined || node.prefixItems !== undefined) return "array";
  if (out.enum) return "string";
  return undefined;
}

function copyNumbers(node: Schema, out: Schema): void {
  for (const key of NUMERIC_KEYWORDS) if (typeof node[key] === "number") out[key] = node[key];
  if (typeof node.exclusiveMinimum === "number" && out.minimum === undefined) out.minimum = node.exclusiveMinimum;
  if (typeof node.exclusiveMaximum === "number" && out.maximum === undefined) out.maximum = node.exclusiveMaximum;
}

function readProperties(node: Schema, out: Schema, walk: Walk): void {
  if (!isObject(node.properties)) return;
  const properties: Schema = {};
  for (const [name, value] of Object.entries(node.properties)) {
    properties[name] = isObject(value) ? sanitize(value, walk) : {};
  }
  if (Object.keys(properties).length === 0) return;
  out.properties = properties;
  if (Array.isArray(node.required)) {
    const required = [...new Set(node.required.filter((name: unknown): name is string => typeof name === "string" && name in properties))];
    if (required.length > 0) out.required = required;
  }
}

/** Gemini needs `items`; tuple forms collapse to their alternatives; untyped arrays hold strings. */
function readItems(node: Schema, walk: Walk): Schema {
  const tuple = Array.isArray(node.prefixItems) ? node.prefixItems : Array.isArray(node.items) ? node.items : undefined;
  if (tuple) {
    const branches = tuple.filter(isObject).map((item: Schema) => sanitize(item, walk));
    const [only] = branches;
    if (branches.length === 1 && only) return only;
    if (branches.length > 1) return { anyOf: branches };
  } else if (isObject(node.items)) {
    const items = sanitize(node.items, walk);
    if (items.type !== undefined || items.anyOf !== undefined) return items;
    return { ...items, type: "string" };
  }
  return { type: "string" };
}

function mergeInto(out: Schema, branch: Schema): Schema {
  const merged = { ...branch };
  if (out.description !== undefined && merged.description === undefined) merged.description = out.description;
  if (out.title !== undefined && merged.title === undefined) merged.title = out.title;
  if (out.nullable) merged.nullable = true;
  return merged;
}

function mergeSchemas(base: Schema, extra: Schema): Schema {
  const merged: Schema = { ...extra, ...base };
  if (isObject(base.properties) || isObject(extra.properties)) merged.properties = { ...objectOf(extra.properties), ...objectOf(base.properties) };
  const required = [...(Array.isArray(base.required) ? base.required : []), ...(Array.isArray(extra.required) ? extra.required : [])];
  if (required.length > 0) merged.required = required;
  return merged;
}

function resolvePointer(root: Schema, ref: string): Schema | undefined {
  if (!ref.startsWith("#")) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(1).split("/").filter((segment) => segment !== "")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (!isObject(node)) return undefined;
    node = node[key];
  }
  return isObject(node) ? node : undefined;
}

function isObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
