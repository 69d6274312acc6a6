/**
 * A small deterministic example generator for JSON Schema: the sandbox fills a tool's arguments and a
 * structured answer with it, so the value passes the client's own validation. It covers what tool and output
 * schemas use (types, required properties, enums, const, $ref, allOf/anyOf/oneOf, nested objects and arrays,
 * lengths, bounds, string formats, simple patterns); optional properties are left out. Pure.
 */
import { arrayOf, objectOf, type JsonObject } from "../../formats/json.ts";

/** A JSON Schema object: every keyword read with a guard (schemas come from clients). */
type Schema = JsonObject;

/** Deeper than this, a (recursive) schema gets the simplest value of its type. */
const MAX_DEPTH = 12;

/** A value for each common string format, valid for it. */
const FORMATS: Record<string, string> = {
  "date-time": "2026-01-01T00:00:00Z",
  date: "2026-01-01",
  time: "00:00:00Z",
  duration: "PT1S",
  email: "sandbox@example.com",
  "idn-email": "sandbox@example.com",
  hostname: "example.com",
  "idn-hostname": "example.com",
  ipv4: "192.0.2.1",
  ipv6: "2001:db8::1",
  uri: "https://example.com/sandbox",
  url: "https://example.com/sandbox",
  iri: "https://example.com/sandbox",
  "uri-reference": "https://example.com/sandbox",
  "iri-reference": "https://example.com/sandbox",
  "uri-template": "https://example.com/{id}",
  uuid: "00000000-0000-4000-8000-000000000000",
  "json-pointer": "/sandbox",
  "relative-json-pointer": "0",
  regex: ".*",
};

export interface ExampleOptions {
  /** The text of a plain string (no format, enum or pattern): "sandbox" unless set. */
  text?: string;
}

/** A value valid against `schema` (JSON Schema, draft 4 to 2020-12 keywords), the same for the same schema. */
export function exampleFor(schema: unknown, options: ExampleOptions = {}): unknown {
  return new Generator(schema, options.text ?? "sandbox").value(schema, 0, 0);
}

class Generator {
  constructor(
    private readonly root: unknown,
    private readonly text: string,
  ) {}

  /** `index` tells apart the items of an array (uniqueItems). */
  value(input: unknown, depth: number, index: number): unknown {
    const schema = this.resolve(input);
    if (schema === undefined) return this.string({}, index);
    if ("const" in schema) return schema.const;
    if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[index % schema.enum.length];
    if (Array.isArray(schema.allOf)) return this.value(this.merge(schema), depth, index);
    const branch = firstBranch(schema.anyOf, depth) ?? firstBranch(schema.oneOf, depth);
    if (branch !== undefined) return this.value(this.merge({ ...schema, anyOf: undefined, oneOf: undefined, allOf: [branch] }), depth, index);
    if (schema.default !== undefined && index === 0) return schema.default;
    switch (typeOf(schema)) {
      case "object":
        return depth >= MAX_DEPTH ? {} : this.object(schema, depth);
      case "array":
        return depth >= MAX_DEPTH ? [] : this.array(schema, depth);
      case "integer":
        return number(schema, index, true);
      case "number":
        return number(schema, index, false);
      case "boolean":
        return index % 2 === 1;
      case "null":
        return null;
      default:
        return this.string(schema, index);
    }
  }

  /** Follows local `$ref`s (#/$defs/..., #/definitions/...); `true`, `{}` and unknown refs read as any value. */
  private resolve(input: unknown, seen = 0): Schema | undefined {
    if (!isObject(input)) return undefined;
    const schema = input;
    if (typeof schema.$ref !== "string" || seen > 16) return schema;
    const target = pointer(this.root, schema.$ref);
    const { $ref: _ref, ...rest } = schema;
    if (target === undefined) return Object.keys(rest).length > 0 ? rest : undefined;
    const resolved = this.resolve(target, seen + 1);
    return Object.keys(rest).length > 0 ? { allOf: [resolved ?? {}, rest] } : resolved;
  }

  /** allOf folded into one schema: properties and required united, the other keywords of the later schema win. */
  private merge(schema: Schema): Schema {
    const { allOf, ...own } = schema;
    let merged: Schema = {};
    for (const part of [...arrayOf(allOf), own]) {
      const resolved = this.resolve(part);
      if (!resolved) continue;
      const flat = Array.isArray(resolved.allOf) ? this.merge(resolved) : resolved;
      merged = {
        ...merged,
        ...flat,
        properties: { ...objectOf(merged.properties), ...objectOf(flat.properties) },
        required: [...new Set([...arrayOf(merged.required), ...arrayOf(flat.required)])],
      };
    }
    return merged;
  }

  /** The required properties, then optional ones (declared first, then invented) up to minProperties. */
  private object(schema: Schema, depth: number): Record<string, unknown> {
    const properties: Schema = isObject(schema.properties) ? schema.properties : {};
    const out: Record<string, unknown> = {};
    const required: string[] = Array.isArray(schema.required) ? schema.required.filter((name: unknown) => typeof name === "string") : [];
    const schemaOf = (name: string) => properties[name] ?? patternSchema(schema.patternProperties, name) ?? extra(schema.additionalProperties);
    for (const name of required) out[name] = this.value(schemaOf(name), depth + 1, 0);
    const wanted = typeof schema.minProperties === "number" ? schema.minProperties : 0;
    for (const name of Object.keys(properties)) {
      if (Object.keys(out).length >= wanted) break;
      if (!(name in out)) out[name] = this.value(properties[name], depth + 1, 0);
    }
    for (let n = 1; Object.keys(out).length < wanted && schema.additionalProperties !== false; n++) {
      if (!(`key${n}` in out)) out[`key${n}`] = this.value(extra(schema.additionalProperties), depth + 1, n);
    }
    return out;
  }

  /** minItems items (none when it is absent): the tuple's own schemas first, then `contains`, then `items`. */
  private array(schema: Schema, depth: number): unknown[] {
    const prefix: unknown[] = Array.isArray(schema.prefixItems) ? schema.prefixItems : Array.isArray(schema.items) ? schema.items : [];
    const rest = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
    const contained = schema.contains === undefined ? 0 : typeof schema.minContains === "number" ? schema.minContains : 1;
    const count = Math.max(typeof schema.minItems === "number" ? schema.minItems : 0, contained > 0 ? prefix.length + contained : 0);
    const out: unknown[] = [];
    for (let i = 0; i < count; i++) {
      const itemSchema = i < prefix.length ? prefix[i] : i < prefix.length + contained ? { allOf: [rest ?? {}, schema.contains] } : rest;
      out.push(this.value(itemSchema, depth + 1, i));
    }
    return out;
  }

  private string(schema: Schema, index: number): string {
    const format = typeof schema.format === "string" ? FORMATS[schema.format] : undefined;
    let text = format ?? (index === 0 ? this.text : `${this.text}-${index + 1}`);
    if (typeof schema.pattern === "string" && !matches(schema.pattern, text)) text = patternExample(schema.pattern) ?? text;
    const min = typeof schema.minLength === "number" ? schema.minLength : 0;
    const max = typeof schema.maxLength === "number" ? schema.maxLength : Infinity;
    if ([...text].length < min) text = text + "x".repeat(min - [...text].length);
    if ([...text].length > max) text = [...text].slice(0, max).join("");
    return text;
  }
}

/** The type a schema asks for: its first non-null type, else the one its keywords imply, else string. */
function typeOf(schema: Schema): string {
  const types = Array.isArray(schema.type) ? schema.type : typeof schema.type === "string" ? [schema.type] : [];
  const chosen = types.find((type: unknown) => type !== "null") ?? types[0];
  if (typeof chosen === "string") return chosen;
  if (isObject(schema.properties) || Array.isArray(schema.required) || "additionalProperties" in schema) return "object";
  if ("items" in schema || "prefixItems" in schema || "minItems" in schema) return "array";
  if ("minimum" in schema || "maximum" in schema || "multipleOf" in schema) return "number";
  return "string";
}

/** A number within minimum/maximum (exclusive forms of draft 4 and later) on multipleOf; 1 when unbounded. */
function number(schema: Schema, index: number, integer: boolean): number {
  const step = typeof schema.multipleOf === "number" && schema.multipleOf > 0 ? schema.multipleOf : integer ? 1 : 0;
  let low = -Infinity;
  let high = Infinity;
  if (typeof schema.minimum === "number") low = schema.minimum;
  if (typeof schema.exclusiveMinimum === "number") low = Math.max(low, schema.exclusiveMinimum + (step || 1e-6));
  else if (schema.exclusiveMinimum === true && typeof schema.minimum === "number") low = schema.minimum + (step || 1e-6);
  if (typeof schema.maximum === "number") high = schema.maximum;
  if (typeof schema.exclusiveMaximum === "number") high = Math.min(high, schema.exclusiveMaximum - (step || 1e-6));
  else if (schema.exclusiveMaximum === true && typeof schema.maximum === "number") high = schema.maximum - (step || 1e-6);
  let value = Math.min(Math.max(1 + index, low), high);
  if (integer) value = value === high ? Math.floor(value) : Math.ceil(value);
  if (step) value = Math.ceil(value / step) * step;
  if (step && value > high) value = Math.floor(high / step) * step;
  return Number(value.toFixed(10));
}

/** The first branch that is not null; past half the depth limit the null one, so recursive schemas end. */
function firstBranch(branches: unknown, depth: number): unknown {
  if (!Array.isArray(branches) || branches.length === 0) return undefined;
  const isNull = (branch: unknown) => isObject(branch) && branch.type === "null";
  return (depth > MAX_DEPTH / 2 ? branches.find(isNull) : undefined) ?? branches.find((branch) => !isNull(branch)) ?? branches[0];
}

function patternSchema(patterns: unknown, name: string): unknown {
  if (!isObject(patterns)) return undefined;
  const hit = Object.keys(patterns).find((pattern) => matches(pattern, name));
  return hit === undefined ? undefined : patterns[hit];
}

function extra(additional: unknown): unknown {
  return isObject(additional) ? additional : undefined;
}

/** A JSON pointer into the root schema (`#/$defs/x`), or undefined. */
function pointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith("#")) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(1).split("/").slice(1)) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(node)) {
      const items: unknown[] = node;
      if (!(key in items)) return undefined;
      node = items[Number(key)];
    } else if (isObject(node) && key in node) node = node[key];
    else return undefined;
  }
  return node;
}

function matches(pattern: string, text: string): boolean {
  for (const flags of ["u", ""]) {
    try {
      return new RegExp(pattern, flags).test(text);
    } catch {
      // Not a valid pattern with these flags: try the next.
    }
  }
  return true; // a pattern no engine here can read cannot be checked by the client's either
}

/**
 * A string matching a simple regular expression: literals, escapes (\d \w \s), classes, groups (first
 * alternative) and quantifiers (their minimum, at least once for + and {n,}). Undefined when it does not match.
 */
function patternExample(pattern: string): string | undefined {
  let out = "";
  let i = 0;
  const atom = (): string => {
    const c = pattern[i++]!;
    if (c === "\\") {
      const e = pattern[i++] ?? "";
      return e === "d" ? "0" : e === "w" ? "a" : e === "s" ? " " : /[DWS]/.test(e) ? "-" : e;
    }
    if (c === "[") {
      const end = pattern.indexOf("]", i + 1);
      const body = pattern.slice(i, end < 0 ? undefined : end);
      i = end < 0 ? pattern.length : end + 1;
      return classExample(body);
    }
    if (c === "(") {
      let level = 1;
      const start = i;
      while (i < pattern.length && level > 0) {
        if (pattern[i] === "\\") i++;
        else if (pattern[i] === "(") level++;
        else if (pattern[i] === ")") level--;
        i++;
      }
      const inner = pattern.slice(start, i - 1).replace(/^\?(?::|<[^>]*>)/, "");
      return patternExample(topAlternative(inner)) ?? "";
    }
    if (c === ".") return "a";
    if (c === "^" || c === "$") return "";
    return c;
  };
  while (i < pattern.length) {
    if (pattern[i] === "|") break; // the first alternative is enough
    const piece = atom();
    const quantifier = /^(?:\{(\d+)(?:,(\d*))?\}|[*+?])\??/.exec(pattern.slice(i));
    let times = 1;
    if (quantifier) {
      i += quantifier[0].length;
      const q = quantifier[0][0];
      times = q === "*" || q === "?" ? 0 : q === "+" ? 1 : Math.max(Number(quantifier[1]), quantifier[2] === "" ? 1 : 0);
    }
    out += piece.repeat(times);
  }
  return matches(pattern, out) ? out : undefined;
}

function topAlternative(pattern: string): string {
  let level = 0;
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === "\\") i++;
    else if (pattern[i] === "(" || pattern[i] === "[") level++;
    else if (pattern[i] === ")" || pattern[i] === "]") level--;
    else if (pattern[i] === "|" && level === 0) return pattern.slice(0, i);
  }
  return pattern;
}

/** The first character a character class allows (a negated class: the first of a few common ones it leaves). */
function classExample(body: string): string {
  if (body.startsWith("^")) {
    return ["a", "0", "_", "-", "x", "Z"].find((c) => matches(`[${body}]`, c)) ?? "a";
  }
  if (body.startsWith("\\")) return body[1] === "d" ? "0" : body[1] === "w" ? "a" : body[1] === "s" ? " " : body[1] ?? "a";
  return body[0] ?? "a";
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
