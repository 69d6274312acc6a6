import type { CanonicalTool, CanonicalToolChoice } from "../../core/canonical.ts";
import { isJsonObject as isObject, objectOf, type JsonObject } from "../json.ts";

type Json = JsonObject;

/** A tool as the Responses client declared it, found again by its canonical name. */
export interface ClientTool {
  kind: "function" | "custom";
  name: string;
  namespace?: string;
}

/** Tool types the client runs itself; every other type (web_search, file_search, mcp, ...) is hosted by OpenAI. */
const CLIENT_TOOL_TYPES = new Set(["function", "custom", "namespace"]);

/**
 * The canonical (single, flat) name of a Responses tool. Tools grouped in a `namespace` tool are called
 * with `{name, namespace}`: other formats see them as `<namespace>__<name>`.
 */
export function canonicalToolName(name: string, namespace?: unknown): string {
  return typeof namespace === "string" && namespace !== "" ? `${namespace}__${name}` : name;
}

/** A client tool with the namespace it was declared in, if any. */
interface DeclaredTool {
  tool: Json;
  namespace?: string;
}

/**
 * Every tool a request declares, namespaces flattened: top-level `tools`, then the `tools` of each
 * `additional_tools` input item (Codex declares its tools there for OpenAI model names). A canonical name
 * declared twice keeps its first declaration; hosted tools (no name) are all kept.
 */
function declaredTools(body: Record<string, unknown>): DeclaredTool[] {
  const out: DeclaredTool[] = [];
  const seen = new Set<string>();
  const add = (tool: Json, namespace?: string) => {
    if (typeof tool?.name === "string") {
      const name = canonicalToolName(tool.name, namespace);
      if (seen.has(name)) return;
      seen.add(name);
    }
    out.push({ tool, ...(namespace ? { namespace } : {}) });
  };
  const visit = (tools: unknown) => {
    for (const tool of Array.isArray(tools) ? (tools as Json[]) : []) {
      if (tool?.type === "namespace" && Array.isArray(tool.tools)) for (const inner of tool.tools) add(inner, String(tool.name ?? ""));
      else add(tool);
    }
  };
  visit(body.tools);
  for (const item of Array.isArray(body.input) ? (body.input as Json[]) : []) if (item?.type === "additional_tools") visit(item.tools);
  return out;
}

/** Whether a request declares any tool, at the top level or in an `additional_tools` input item. */
export function declaresTools(body: Record<string, unknown>): boolean {
  return declaredTools(body).length > 0;
}

/** The client's function and custom tools by canonical name, to answer a call in the shape the client declared. */
export function clientTools(body: Record<string, unknown>): Map<string, ClientTool> {
  const tools = new Map<string, ClientTool>();
  for (const { tool, namespace } of declaredTools(body)) {
    if ((tool?.type !== "function" && tool?.type !== "custom") || typeof tool.name !== "string") continue;
    tools.set(canonicalToolName(tool.name, namespace), { kind: tool.type, name: tool.name, ...(namespace ? { namespace } : {}) });
  }
  return tools;
}

/**
 * A request's tools (top-level and `additional_tools` items) in canonical form. Function tools are flat here
 * (nested in chat); custom (freeform) tools become a function taking `{input: string}`
 * (docs/wire-formats.md#tools-and-tool-choice); namespace tools are flattened. Hosted tools (web_search,
 * file_search, code_interpreter, mcp, local_shell, ...) only run on OpenAI's servers: they are left out when the request goes to another format, so the model simply does not see them.
 */
export function toolsToCanonical(body: Record<string, unknown>): CanonicalTool[] {
  const out: CanonicalTool[] = [];
  for (const { tool, namespace } of declaredTools(body)) {
    if (tool?.type === "function" && typeof tool.name === "string") {
      out.push({
        name: canonicalToolName(tool.name, namespace),
        ...(typeof tool.description === "string" ? { description: tool.description } : {}),
        parameters: isObject(tool.parameters) ? tool.parameters : { type: "object", properties: {} },
        ...(typeof tool.strict === "boolean" ? { strict: tool.strict } : {}),
      });
    } else if (tool?.type === "custom" && typeof tool.name === "string") {
      out.push({
        name: canonicalToolName(tool.name, namespace),
        ...(typeof tool.description === "string" ? { description: tool.description } : {}),
        parameters: customToolParameters(tool.format),
      });
    }
  }
  return out;
}

/** Whether a tool type runs on OpenAI's servers (and so cannot be translated). */
export function isHostedTool(type: unknown): boolean {
  return typeof type === "string" && !CLIENT_TOOL_TYPES.has(type);
}

/** How the stand-in schema of a custom tool describes its one property (and how it is recognized). */
const RAW_INPUT = "The tool's raw input (plain text";

/** A custom tool's stand-in schema; its grammar goes in the description so the model knows the raw format. */
function customToolParameters(format: unknown): Record<string, unknown> {
  const spec = isObject(format) ? (format as Json) : {};
  const description =
    spec.type === "grammar" && typeof spec.definition === "string"
      ? `${RAW_INPUT}, not JSON), following this ${String(spec.syntax ?? "")} grammar:\n${spec.definition}`
      : `${RAW_INPUT}).`;
  return { type: "object", properties: { input: { type: "string", description } }, required: ["input"], additionalProperties: false };
}

/** Whether a canonical tool's parameters are the stand-in of a custom (freeform) tool: its input is raw text, not JSON. */
export function isCustomToolParameters(parameters: unknown): boolean {
  const properties = isObject(parameters) ? parameters.properties : undefined;
  if (!isObject(properties) || Object.keys(properties).length !== 1) return false;
  const description = objectOf(properties.input).description;
  return typeof description === "string" && description.startsWith(RAW_INPUT);
}

/** A Responses tool_choice in canonical form; a hosted-tool choice (its tool is dropped) reads as auto. */
export function toolChoiceToCanonical(choice: unknown): CanonicalToolChoice | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === "auto" || choice === "none" || choice === "required") return { type: choice };
  if (!isObject(choice)) return { type: "auto" };
  const spec = choice as Json;
  if ((spec.type === "function" || spec.type === "custom") && typeof spec.name === "string") {
    return { type: "tool", name: canonicalToolName(spec.name, spec.namespace) };
  }
  if (spec.type === "allowed_tools") return { type: spec.mode === "required" ? "required" : "auto" };
  return { type: "auto" };
}

/** The raw input of a custom tool call back from `{"input": "..."}` arguments (the arguments as sent otherwise). */
export function unwrapCustomInput(args: string): string {
  if (args.trim() === "") return "";
  try {
    const parsed = JSON.parse(args);
    if (typeof parsed?.input === "string") return parsed.input;
    if (isObject(parsed) && Object.keys(parsed).length === 0) return "";
  } catch {}
  return args;
}

/** A custom tool call's raw input as canonical (JSON) arguments. */
export function wrapCustomInput(input: unknown): string {
  return JSON.stringify({ input: typeof input === "string" ? input : "" });
}
