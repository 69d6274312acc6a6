/**
 * Which offered tool the sandbox calls, and with what arguments: a shell tool running a harmless command when
 * one is offered (so a coding agent's loop runs a real tool and ends), else the first JSON tool, with arguments
 * generated from the tool's own JSON schema so the client's validation passes. Pure.
 */
import { isCustomToolParameters } from "../../formats/openai-responses/tools.ts";
import { exampleFor } from "./json-example.ts";
import { numberOf, objectOf, type JsonObject } from "../../formats/json.ts";

/** A tool of an OpenAI chat request. */
export interface ChatTool {
  type: string;
  function?: { name: string; description?: string; parameters?: unknown };
}

/** What the sandbox runs through a shell tool. The shell computes the marker: seeing it proves the command ran. */
export const SANDBOX_COMMAND = "echo sandbox-tool-$((6*7))";
export const SANDBOX_MARKER = "sandbox-tool-42";

/**
 * Shell tools of the coding agents (Claude Code's Bash; Codex's exec_command, shell_command, shell; others'
 * usual names), recognized by name (namespace prefix aside) and a `command` or `cmd` property.
 */
const SHELL_NAMES = new Set(["bash", "shell", "exec_command", "shell_command", "local_shell", "run_shell_command", "run_terminal_cmd", "execute_command", "run_command", "terminal"]);
const COMMAND_FIELDS = ["command", "cmd"];

type NamedTool = ChatTool & { function: { name: string; description?: string; parameters?: unknown } };

/** The call the sandbox makes, or null when tool_choice says none or names a tool that is not offered. */
export function sandboxToolCall(tools: ChatTool[] | undefined, choice: unknown): { name: string; arguments: string } | null {
  const offered = (tools ?? []).filter((tool): tool is NamedTool => tool.type === "function" && typeof tool.function?.name === "string");
  if (offered.length === 0 || choice === "none") return null;
  const named = objectOf(objectOf(choice).function).name;
  const candidates = typeof named === "string" ? offered.filter((tool) => tool.function.name === named) : offered;
  const tool = candidates.find(isShell) ?? candidates.find(isCodeModeExec) ?? candidates.find((t) => !isCustomToolParameters(t.function.parameters)) ?? candidates[0];
  if (!tool) return null;
  return { name: tool.function.name, arguments: JSON.stringify(argumentsFor(tool)) };
}

function argumentsFor(tool: NamedTool): unknown {
  if (isShell(tool)) return shellArguments(tool);
  if (isCodeModeExec(tool)) return { input: codeModeScript(tool.function.description ?? "") };
  return exampleFor(tool.function.parameters ?? { type: "object" });
}

function baseName(name: string): string {
  const cut = name.lastIndexOf("__");
  return (cut < 0 ? name : name.slice(cut + 2)).toLowerCase();
}

/** The tool's parameter schemas by property name. */
function properties(tool: NamedTool): JsonObject {
  return objectOf(objectOf(tool.function.parameters).properties);
}

function isShell(tool: NamedTool): boolean {
  return SHELL_NAMES.has(baseName(tool.function.name)) && COMMAND_FIELDS.some((field) => field in properties(tool));
}

/** Codex's code mode (GPT models): one freeform `exec` tool that runs JavaScript calling the other tools. */
function isCodeModeExec(tool: NamedTool): boolean {
  return baseName(tool.function.name) === "exec" && isCustomToolParameters(tool.function.parameters) && /JavaScript/i.test(tool.function.description ?? "");
}

/** The schema's example with the command field set to SANDBOX_COMMAND (an argv array when the field is one). */
function shellArguments(tool: NamedTool): JsonObject {
  const props = properties(tool);
  const args = { ...objectOf(exampleFor(tool.function.parameters)) };
  for (const field of COMMAND_FIELDS) {
    if (!(field in props)) continue;
    args[field] = isArrayField(props[field]) ? ["bash", "-lc", SANDBOX_COMMAND] : SANDBOX_COMMAND;
    break;
  }
  const note = "Print the sandbox marker";
  const description = objectOf(props.description);
  if (description.type === "string" && (numberOf(description.maxLength) ?? Infinity) >= note.length) args.description = note;
  return args;
}

function isArrayField(schema: unknown): boolean {
  const type = objectOf(schema).type;
  return type === "array" || (Array.isArray(type) && type.includes("array") && !type.includes("string"));
}

/** JavaScript for the code-mode tool: the shell command through its nested exec_command when it has one. */
function codeModeScript(description: string): string {
  if (description.includes("exec_command")) {
    return `const result = await tools.exec_command({ cmd: ${JSON.stringify(SANDBOX_COMMAND)} });\ntext(result.output);`;
  }
  return `text(${JSON.stringify("sandbox")});`;
}
