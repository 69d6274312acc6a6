/**
 * Wire JSON as it arrives from clients and upstreams, before it is narrowed: an object's fields are
 * `unknown` until a guard says what they are. The decode functions validate requests; these helpers
 * only read, and never refuse what they do not recognize (an odd field reads as absent).
 */
export type JsonObject = Record<string, unknown>;

/** A JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The object at `value`, or an empty one: for reading optional nested fields. */
export function objectOf(value: unknown): JsonObject {
  return isJsonObject(value) ? value : {};
}

/** The string at `value`, or undefined. */
export function stringOf(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** The number at `value`, or undefined. */
export function numberOf(value: unknown): number | undefined {
  return typeof value === "number" ? value : undefined;
}

/** The array at `value`, or an empty one. */
export function arrayOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
