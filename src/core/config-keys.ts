import { Kind, type TSchema } from "@sinclair/typebox";

/**
 * Unknown keys in configuration files: a misspelled key (`cache_tll_ms`) would otherwise be dropped in
 * silence and its default used. Every object schema counts as closed here, whether or not it says
 * `additionalProperties: false` (TypeBox objects are open by default); only a schema that gives
 * `additionalProperties` a schema of its own, or `true`, takes keys it does not name.
 */

export interface UnknownKey {
  /** Dotted path of the key, from the `path` given (`plugins.auth.config.cache_tll_ms`, `models[3].prices.inptu`). */
  readonly path: string;
  readonly key: string;
  /** The keys allowed where it is. */
  readonly known: readonly string[];
}

/** The first key in `value` that `schema` does not allow, walking nested objects, records, arrays and unions. */
export function findUnknownKey(schema: TSchema, value: unknown, path: string): UnknownKey | undefined {
  if (Array.isArray(value)) {
    const items = (schema as { items?: TSchema }).items;
    if (schema[Kind] !== "Array" || !items) return undefined;
    for (let index = 0; index < value.length; index++) {
      const found = findUnknownKey(items, value[index], `${path}[${index}]`);
      if (found) return found;
    }
    return undefined;
  }
  if (!isPlainObject(value)) return undefined;
  switch (schema[Kind]) {
    case "Object":
      return inObject(schema, value, path);
    case "Record":
      return inRecord(schema, value, path);
    case "Union":
      return inUnion(schema, value, path);
    case "Intersect":
      return inObject(mergedObject(schema), value, path);
    default:
      return undefined;
  }
}

function inObject(schema: TSchema, value: Record<string, unknown>, path: string): UnknownKey | undefined {
  const properties = (schema.properties ?? {}) as Record<string, TSchema>;
  const extra = schema.additionalProperties as TSchema | boolean | undefined;
  for (const [key, child] of Object.entries(value)) {
    const childPath = join(path, key);
    const childSchema = properties[key] ?? (typeof extra === "object" ? extra : undefined);
    if (childSchema === undefined) {
      if (extra === true) continue;
      return { path: childPath, key, known: Object.keys(properties) };
    }
    const found = findUnknownKey(childSchema, child, childPath);
    if (found) return found;
  }
  return undefined;
}

function inRecord(schema: TSchema, value: Record<string, unknown>, path: string): UnknownKey | undefined {
  const valueSchemas = Object.values((schema.patternProperties ?? {}) as Record<string, TSchema>);
  const valueSchema = valueSchemas[0];
  if (!valueSchema) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const found = findUnknownKey(valueSchema, child, join(path, key));
    if (found) return found;
  }
  return undefined;
}

/** A value any variant takes without an unknown key passes; otherwise the first object variant's finding. */
function inUnion(schema: TSchema, value: Record<string, unknown>, path: string): UnknownKey | undefined {
  const variants = ((schema.anyOf ?? []) as TSchema[]).filter((variant) => ["Object", "Record", "Intersect", "Union"].includes(variant[Kind]));
  let first: UnknownKey | undefined;
  for (const variant of variants) {
    const found = findUnknownKey(variant, value, path);
    if (!found) return undefined;
    first ??= found;
  }
  return first;
}

function mergedObject(schema: TSchema): TSchema {
  const properties: Record<string, TSchema> = {};
  for (const part of (schema.allOf ?? []) as TSchema[]) Object.assign(properties, part.properties ?? {});
  return { [Kind]: "Object", type: "object", properties } as unknown as TSchema;
}

/** `name` as a path segment: dotted when it is a plain key, quoted otherwise. */
function join(path: string, key: string): string {
  const segment = /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
  return path === "" ? segment : `${path}.${segment}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** "unknown key <path> (did you mean <nearest>?)", or the known keys when none is near. */
export function describeUnknownKey(found: UnknownKey): string {
  const nearest = nearestKey(found.key, found.known);
  if (nearest !== undefined) return `unknown key ${found.path} (did you mean ${nearest}?)`;
  if (found.known.length === 0) return `unknown key ${found.path} (this block takes no keys)`;
  return `unknown key ${found.path} (known keys: ${found.known.join(", ")})`;
}

/** The candidate closest to `word` in edits (a swap of two neighbours is one), when it is close enough to be a typo. */
export function nearestKey(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  const allowed = Math.max(2, Math.floor(word.length / 3));
  return bestDistance <= allowed ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}
