/**
 * A small JSON Schema checker for the sandbox tests, written apart from the generator it checks: the keywords
 * the agents' tool schemas and the tests' own schemas use. Returns the violations (empty when the value is valid).
 */

type Schema = Record<string, any>;

const FORMATS: Record<string, RegExp> = {
  "date-time": /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
  time: /^\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
  email: /^[^@\s]+@[^@\s]+\.[^@\s]+$/,
  uri: /^[a-z][a-z0-9+.-]*:[^\s]*$/i,
  url: /^https?:\/\/[^\s]+$/i,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  ipv4: /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/,
  hostname: /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i,
};

export function violations(schema: unknown, value: unknown, root: unknown = schema, path = "$"): string[] {
  if (schema === true || schema === undefined) return [];
  if (schema === false) return [`${path}: no value allowed`];
  const s = schema as Schema;
  const errors: string[] = [];
  const fail = (message: string) => errors.push(`${path}: ${message}`);

  if (typeof s.$ref === "string") {
    const target = s.$ref
      .slice(2)
      .split("/")
      .reduce((node: any, key: string) => node?.[key.replaceAll("~1", "/").replaceAll("~0", "~")], root);
    if (target === undefined) fail(`unresolved ${s.$ref}`);
    else errors.push(...violations(target, value, root, path));
  }
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(value)) fail(`not the const ${JSON.stringify(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((option: unknown) => JSON.stringify(option) === JSON.stringify(value))) fail(`not one of ${JSON.stringify(s.enum)}`);
  if (s.type !== undefined) {
    const types: string[] = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((type) => isType(type, value))) fail(`not of type ${types.join("|")} (${JSON.stringify(value)})`);
  }
  for (const part of s.allOf ?? []) errors.push(...violations(part, value, root, path));
  if (Array.isArray(s.anyOf) && !s.anyOf.some((part: unknown) => violations(part, value, root, path).length === 0)) fail("matches no anyOf branch");
  if (Array.isArray(s.oneOf)) {
    const matching = s.oneOf.filter((part: unknown) => violations(part, value, root, path).length === 0).length;
    if (matching !== 1) fail(`matches ${matching} oneOf branches`);
  }
  if (s.not !== undefined && violations(s.not, value, root, path).length === 0) fail("matches the not schema");

  if (typeof value === "string") {
    const length = [...value].length;
    if (typeof s.minLength === "number" && length < s.minLength) fail(`shorter than ${s.minLength}`);
    if (typeof s.maxLength === "number" && length > s.maxLength) fail(`longer than ${s.maxLength}`);
    if (typeof s.pattern === "string" && !new RegExp(s.pattern, "u").test(value)) fail(`does not match /${s.pattern}/`);
    const format = FORMATS[s.format];
    if (format && !format.test(value)) fail(`not a ${s.format}`);
  }
  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum) fail(`below ${s.minimum}`);
    if (typeof s.maximum === "number" && value > s.maximum) fail(`above ${s.maximum}`);
    if (typeof s.exclusiveMinimum === "number" && value <= s.exclusiveMinimum) fail(`not above ${s.exclusiveMinimum}`);
    if (typeof s.exclusiveMaximum === "number" && value >= s.exclusiveMaximum) fail(`not below ${s.exclusiveMaximum}`);
    if (typeof s.multipleOf === "number" && Math.abs(value / s.multipleOf - Math.round(value / s.multipleOf)) > 1e-9) fail(`not a multiple of ${s.multipleOf}`);
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems) fail(`fewer than ${s.minItems} items`);
    if (typeof s.maxItems === "number" && value.length > s.maxItems) fail(`more than ${s.maxItems} items`);
    if (s.uniqueItems === true && new Set(value.map((item) => JSON.stringify(item))).size !== value.length) fail("items not unique");
    const prefix: unknown[] = s.prefixItems ?? [];
    value.forEach((item, index) => {
      const itemSchema = index < prefix.length ? prefix[index] : s.items;
      errors.push(...violations(itemSchema, item, root, `${path}[${index}]`));
    });
    if (s.contains !== undefined) {
      const count = value.filter((item) => violations(s.contains, item, root, path).length === 0).length;
      if (count < (s.minContains ?? 1)) fail(`contains ${count} matching items`);
    }
  }
  if (isObject(value)) {
    const properties: Schema = s.properties ?? {};
    for (const name of s.required ?? []) if (!(name in value)) fail(`missing required property ${name}`);
    const count = Object.keys(value).length;
    if (typeof s.minProperties === "number" && count < s.minProperties) fail(`fewer than ${s.minProperties} properties`);
    if (typeof s.maxProperties === "number" && count > s.maxProperties) fail(`more than ${s.maxProperties} properties`);
    for (const [name, item] of Object.entries(value)) {
      if (name in properties) {
        errors.push(...violations(properties[name], item, root, `${path}.${name}`));
        continue;
      }
      const patterns = Object.keys(s.patternProperties ?? {}).filter((pattern) => new RegExp(pattern, "u").test(name));
      for (const pattern of patterns) errors.push(...violations(s.patternProperties[pattern], item, root, `${path}.${name}`));
      if (patterns.length === 0 && s.additionalProperties !== undefined) errors.push(...violations(s.additionalProperties, item, root, `${path}.${name}`));
    }
  }
  return errors;
}

function isType(type: string, value: unknown): boolean {
  switch (type) {
    case "object":
      return isObject(value);
    case "array":
      return Array.isArray(value);
    case "integer":
      return Number.isInteger(value);
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "null":
      return value === null;
    default:
      return typeof value === type;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
