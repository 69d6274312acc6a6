import { readFileSync, existsSync, readdirSync } from "node:fs";
import { resolve, join } from "node:path";
import { availableParallelism } from "node:os";
import { parse as parseYaml } from "yaml";
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import type { PluginDefinition } from "./plugin.ts";
import { describeUnknownKey, findUnknownKey, nearestKey } from "./config-keys.ts";
import { TrustedProxies } from "./client-ip.ts";

/** Server settings (the `server` block of plugins-config.yaml). */
export const ServerConfigSchema = Type.Object({
  port: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  hostname: Type.String({ default: "0.0.0.0" }),
  /** Largest accepted request body; larger answers 413. */
  max_body_bytes: Type.Integer({ minimum: 1, default: 50 * 1024 * 1024 }),
  /** Longest upstream call, streams included (spec: streams up to 10 minutes). */
  upstream_timeout_ms: Type.Integer({ minimum: 1, default: 600_000 }),
  /** Longest silence of an upstream once it has started answering (headers sent); 0 = none. Reasoning models may think for minutes. */
  upstream_idle_timeout_ms: Type.Integer({ minimum: 0, default: 300_000 }),
  /**
   * Longest wait for one streamed attempt's answer headers (its first byte): past it the next deployment is
   * tried (core/attempts.ts). A stream's headers come as generation starts. Separate from the idle timeout
   * (silence mid-answer) and the request's cap. 0 = none.
   */
  upstream_first_byte_timeout_ms: Type.Integer({ minimum: 0, default: 60_000 }),
  /**
   * The same for a non-streamed attempt, whose headers come only with the whole answer: a reasoning model may
   * think for minutes, so the default is the idle timeout's (a request given up costs the upstream's bill). 0 = none.
   */
  upstream_first_byte_timeout_non_stream_ms: Type.Integer({ minimum: 0, default: 300_000 }),
  /** Most upstream attempts (deployments tried) per request. */
  upstream_max_attempts: Type.Integer({ minimum: 1, maximum: 16, default: 3 }),
  /** No new attempt starts this long after a request's first one began. */
  upstream_attempts_budget_ms: Type.Integer({ minimum: 0, default: 30_000 }),
  /** Request body bytes being received at once, all requests together; past it a request answers 503 with retry-after. */
  max_body_bytes_in_flight: Type.Integer({ minimum: 1, default: 256 * 1024 * 1024 }),
  /** How long a graceful stop waits for in-flight requests. */
  drain_timeout_ms: Type.Integer({ minimum: 0, default: 30_000 }),
  /** After traffic, this long without a new request triggers one full GC that hands memory back (0 = never). */
  idle_memory_release_ms: Type.Integer({ minimum: 0, default: 1_000 }),
  /**
   * Proxies (CIDRs, IPv4 and IPv6) whose X-Forwarded-For is believed: only a request whose socket peer is in
   * one of them is counted and logged under the forwarded client address. A comma-separated string is read
   * as a list (what ${TRUSTED_PROXIES} expands to).
   */
  trusted_proxies: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
  /**
   * Processes serving the port (docs/workers.md): 1 = this process alone; N > 1 = a primary and N workers sharing
   * the port (SO_REUSEPORT); "auto" = one per CPU core available.
   */
  workers: Type.String({ pattern: "^(auto|[1-9][0-9]{0,2})$", default: "1" }),
});
export type ServerConfig = Static<typeof ServerConfigSchema>;

export interface LoadedPlugin {
  definition: PluginDefinition;
  config: unknown;
}

export interface GatewayConfig {
  file: string;
  server: ServerConfig;
  /** Enabled plugins in pipeline order, configs validated. */
  plugins: LoadedPlugin[];
}

/**
 * How many worker processes `server.workers` asks for. "auto": the CPUs this process may use. Bun's
 * `availableParallelism()` counts the cores of its affinity and caps them by the CPU quota of the process's own
 * cgroup, rounded down, at least 1 (a container limited to 2 CPUs on 16 cores: 2; Node's would say 16). A limit set
 * only on a cgroup above it is not seen (pinned by test/e2e/workers-auto.test.ts).
 */
export function workerCount(server: ServerConfig): number {
  return server.workers === "auto" ? availableParallelism() : Number(server.workers);
}

/** A configuration problem: one line naming the file, the plugin and the field. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

const PLUGIN_ROOT = resolve(import.meta.dir, "../plugins");

/** Reads the YAML, expands ${VAR} / ${VAR:-default}, loads each enabled plugin and checks its config. */
export async function loadConfig(file: string, env: Record<string, string | undefined> = process.env): Promise<GatewayConfig> {
  const path = resolve(file);
  if (!existsSync(path)) throw new ConfigError(`${file}: file not found`);
  let raw: unknown;
  try {
    raw = interpolate(parseYaml(readFileSync(path, "utf8")), env);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${file}: ${error.message}`);
    throw new ConfigError(`${file}: invalid YAML: ${(error as Error).message.split("\n")[0]}`);
  }
  if (!isObject(raw)) throw new ConfigError(`${file}: expected a mapping with "server" and "plugins"`);
  rejectUnknownKey(FileSchema, raw, "", file);
  const server = loadServer(raw.server ?? {}, file);
  if (!isObject(raw.plugins)) throw new ConfigError(`${file}: "plugins" must be a mapping of plugin name to {enabled, config}`);

  const plugins: LoadedPlugin[] = [];
  const enabledNames = new Set<string>();
  for (const [name, entry] of Object.entries(raw.plugins)) {
    const where = `${file}: plugin "${name}"`;
    const block = entry ?? {};
    if (!isObject(block)) throw new ConfigError(`${where}: expected {enabled, config}`);
    pluginFolder(name, where);
    rejectUnknownKey(EntrySchema, block, `plugins.${name}`, where);
    const enabled = toBoolean(block.enabled ?? true, `${where}: /enabled`);
    // A disabled plugin's config is not checked: it may name a plugin of another version, or be half-written.
    if (!enabled) continue;
    const definition = await importPlugin(name, where);
    for (const required of definition.requires ?? []) {
      if (!enabledNames.has(required)) {
        throw new ConfigError(`${where}: requires plugin "${required}" enabled earlier in the pipeline`);
      }
    }
    rejectUnknownKey(definition.configSchema, block.config ?? {}, `plugins.${name}.config`, where);
    const config = checkSchema(definition.configSchema, block.config ?? {}, `${where}: config`);
    const problem = definition.checkConfig?.(config);
    if (problem !== undefined) throw new ConfigError(`${where}: config: ${problem}`);
    plugins.push({ definition, config });
    enabledNames.add(name);
  }
  return { file: path, server, plugins };
}

/** The top level of plugins-config.yaml and one entry of its `plugins` mapping (only their keys are checked here). */
const FileSchema = Type.Object({ server: Type.Unknown(), plugins: Type.Unknown() });
const EntrySchema = Type.Object({ enabled: Type.Unknown(), config: Type.Unknown() });

function rejectUnknownKey(schema: TSchema, value: unknown, path: string, where: string): void {
  const found = findUnknownKey(schema, value, path);
  if (found) throw new ConfigError(`${where}: ${describeUnknownKey(found)}`);
}

/** The `server` block: unknown keys refused, the schema checked, the trusted proxies parsed. */
function loadServer(block: unknown, file: string): ServerConfig {
  rejectUnknownKey(ServerConfigSchema, block, "server", file);
  const value = isObject(block) && typeof block.trusted_proxies === "string" ? { ...block, trusted_proxies: splitList(block.trusted_proxies) } : block;
  const server = checkSchema(ServerConfigSchema, value, `${file}: server`);
  try {
    TrustedProxies.parse(server.trusted_proxies);
  } catch (error) {
    throw new ConfigError(`${file}: server.trusted_proxies: ${(error as Error).message}`);
  }
  return server;
}

/** "10.0.0.0/8, fd00::/8" -> ["10.0.0.0/8", "fd00::/8"]; "" -> []. */
function splitList(text: string): string[] {
  return text.split(",").map((part) => part.trim()).filter((part) => part !== "");
}

/** The plugin's index.ts; an unknown name is refused with the nearest plugin name. */
function pluginFolder(name: string, where: string): string {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new ConfigError(`${where}: plugin names are kebab-case folder names`);
  const candidates = [join(PLUGIN_ROOT, name, "index.ts"), join(PLUGIN_ROOT, "providers", name, "index.ts")];
  const found = candidates.find((candidate) => existsSync(candidate));
  if (found) return found;
  const nearest = nearestKey(name, pluginNames());
  const hint = nearest === undefined ? "" : ` (did you mean ${nearest}?)`;
  throw new ConfigError(`${where}: unknown plugin plugins.${name}: no plugin folder src/plugins/${name} or src/plugins/providers/${name}${hint}`);
}

/** Every plugin folder name (src/plugins/* and src/plugins/providers/* with an index.ts). */
function pluginNames(): string[] {
  const names: string[] = [];
  for (const root of [PLUGIN_ROOT, join(PLUGIN_ROOT, "providers")]) {
    for (const entry of readdirSync(root, { withFileTypes: true })) {
      if (entry.isDirectory() && existsSync(join(root, entry.name, "index.ts"))) names.push(entry.name);
    }
  }
  return names;
}

async function importPlugin(name: string, where: string): Promise<PluginDefinition> {
  const found = pluginFolder(name, where);
  const module = await import(found);
  const definition = module.default as PluginDefinition | undefined;
  if (!definition || definition.name !== name) {
    throw new ConfigError(`${where}: ${found} must default-export definePlugin({ name: "${name}", ... })`);
  }
  return definition;
}

/** Defaults, string-to-number/boolean conversion (env values are strings), then a strict check. */
export function checkSchema<S extends TSchema>(schema: S, value: unknown, where: string): Static<S> {
  const converted = Value.Convert(schema, Value.Default(schema, structuredClone(value)));
  const first = Value.Errors(schema, converted).First();
  if (first) {
    const field = first.path === "" ? "/" : first.path;
    throw new ConfigError(`${where}: ${field}: ${first.message}`);
  }
  return converted as Static<S>;
}

const VARIABLE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** Expands ${VAR} and ${VAR:-default} in every string of a parsed YAML tree. */
export function interpolate(node: unknown, env: Record<string, string | undefined>): unknown {
  if (typeof node === "string") {
    return node.replace(VARIABLE, (_, name: string, fallback: string | undefined) => {
      const value = env[name];
      if (value !== undefined && value !== "") return value;
      if (fallback !== undefined) return fallback;
      throw new ConfigError(`environment variable ${name} is not set and has no default (write \${${name}:-default})`);
    });
  }
  if (Array.isArray(node)) return node.map((item) => interpolate(item, env));
  if (isObject(node)) return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, interpolate(v, env)]));
  return node;
}

function toBoolean(value: unknown, where: string): boolean {
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && /^(1|true|yes|on)$/i.test(value)) return true;
  if (typeof value === "string" && /^(0|false|no|off|)$/i.test(value)) return false;
  throw new ConfigError(`${where}: expected a boolean, got ${JSON.stringify(value)}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function defaultConfigFile(env: Record<string, string | undefined> = process.env): string {
  return env.GATEWAY_CONFIG || "plugins-config.yaml";
}

