import { isJsonObject, objectOf } from "../../json.ts";

/**
 * Chat `custom` (freeform) tools have no canonical equivalent: they travel as a function taking
 * `{input: string}` (docs/wire-formats.md#tools-and-tool-choice) and are unwrapped again for a client that declared
 * them.
 */
export function customToolParameters(): Record<string, unknown> {
  return { type: "object", properties: { input: { type: "string" } }, required: ["input"] };
}

/** A custom tool call's raw input as function arguments. */
export function wrapCustomInput(input: unknown): string {
  return JSON.stringify({ input: typeof input === "string" ? input : "" });
}

/** The raw input back from `{"input": "..."}` arguments; undefined when they have another shape. */
export function unwrapCustomInput(args: string): string | undefined {
  try {
    const parsed = JSON.parse(args);
    return typeof parsed?.input === "string" ? parsed.input : undefined;
  } catch {
    return undefined;
  }
}

/** The names of the custom tools a chat client declared. */
export function customToolNames(body: Record<string, unknown>): Set<string> {
  const names = new Set<string>();
  if (!Array.isArray(body.tools)) return names;
  for (const tool of body.tools) {
    if (!isJsonObject(tool) || tool.type !== "custom") continue;
    const name = objectOf(tool.custom).name;
    if (typeof name === "string") names.add(name);
  }
  return names;
}
