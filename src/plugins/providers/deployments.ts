import { Type, type Static } from "@sinclair/typebox";
import { ConfigError } from "../../core/config.ts";
import type { Deployment } from "../../core/deployments.ts";
import type { PluginHost, Provider } from "../../core/plugin.ts";
import { missingKeyReason } from "./key.ts";

const ENV_NAME = "^[A-Za-z_][A-Za-z0-9_]*$";

/** One deployment as an operator writes it: a base URL and the variable holding its key. */
export const DeploymentConfigSchema = Type.Object({
  /** Unique within the provider; `<provider>#<n>` (1-based) when absent. */
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9][A-Za-z0-9_.#:-]*$" })),
  base_url: Type.String({ minLength: 1, pattern: "^https?://" }),
  /** The environment variable holding this deployment's key (the key itself never sits in YAML). */
  api_key_env: Type.String({ minLength: 1, pattern: ENV_NAME }),
  weight: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
});

/**
 * What every provider plugin's config has for where it sends requests: either one `base_url` with its
 * `api_key_env` (each may hold a comma-separated list: one deployment per entry, in priority order, one key for
 * all when only one is given), or a `deployments` list. And the retry policy's small override.
 */
export const DeploymentFields = {
  base_url: Type.Optional(Type.String({ minLength: 1, pattern: "^https?://" })),
  api_key_env: Type.Optional(Type.String({ minLength: 1, pattern: ENV_NAME })),
  deployments: Type.Optional(Type.Array(DeploymentConfigSchema, { minItems: 1, maxItems: 64 })),
  /** The upstream statuses after which the next deployment is tried (instead of the default set; core/attempts.ts). */
  retry_on: Type.Optional(Type.Array(Type.Integer({ minimum: 400, maximum: 599 }), { maxItems: 32 })),
};

export interface DeploymentsConfig {
  base_url?: string;
  api_key_env?: string;
  deployments?: Static<typeof DeploymentConfigSchema>[];
  retry_on?: number[];
}

/** The config's problem when it has neither form, or half of the first (a plugin's `checkConfig`). */
export function deploymentsConfigProblem(config: DeploymentsConfig, path = ""): string | undefined {
  if (config.deployments !== undefined) {
    if (config.base_url !== undefined) return `${path}/base_url: give base_url and api_key_env, or a deployments list, not both`;
    return undefined;
  }
  if (config.base_url === undefined && config.api_key_env === undefined) return `${path}/base_url: set base_url and api_key_env, or a deployments list`;
  if (config.api_key_env === undefined) return `${path}/api_key_env: required with base_url (the variable holding the key)`;
  if (config.base_url === undefined) return `${path}/base_url: required with api_key_env`;
  return undefined;
}

/** One deployment as a provider factory builds it. */
export interface DeploymentSpec {
  name: string;
  baseUrl: string;
  /** The variable its key was read from (named in the 503 and the start-up log, never the key). */
  apiKeyEnv: string;
  apiKey: string | undefined;
  weight: number;
}

/** A provider's deployments from its config and the environment (keys marked secret). Throws a ConfigError for a config with neither form. */
export function deploymentSpecs(provider: string, config: DeploymentsConfig, host: Pick<PluginHost, "env" | "secret">): DeploymentSpec[] {
  const specs = config.deployments ? listed(provider, config.deployments, host) : fromShortcut(provider, config, host);
  const seen = new Set<string>();
  for (const spec of specs) {
    if (seen.has(spec.name)) throw new ConfigError(`provider ${provider}: two deployments are named "${spec.name}"`);
    seen.add(spec.name);
  }
  return specs;
}

function listed(provider: string, list: NonNullable<DeploymentsConfig["deployments"]>, host: Pick<PluginHost, "env" | "secret">): DeploymentSpec[] {
  return list.map((entry, index) => {
    const apiKey = host.env[entry.api_key_env]?.trim() || undefined;
    host.secret(apiKey);
    return { name: entry.name ?? `${provider}#${index + 1}`, baseUrl: entry.base_url, apiKeyEnv: entry.api_key_env, apiKey, weight: entry.weight ?? 1 };
  });
}

/** `base_url: http://a/v1,http://b/v1` with `OPENAI_API_KEY=ka,kb` (or one key for all): one deployment per entry. */
function fromShortcut(provider: string, config: DeploymentsConfig, host: Pick<PluginHost, "env" | "secret">): DeploymentSpec[] {
  if (config.base_url === undefined || config.api_key_env === undefined) {
    throw new ConfigError(`provider ${provider}: set base_url and api_key_env, or a deployments list`);
  }
  const urls = splitList(config.base_url);
  const raw = host.env[config.api_key_env];
  host.secret(raw);
  const keys = raw === undefined ? [] : splitList(raw);
  for (const key of keys) host.secret(key);
  const count = Math.max(urls.length, keys.length, 1);
  if ((urls.length !== 1 && urls.length !== count) || (keys.length > 1 && keys.length !== count)) {
    throw new ConfigError(`provider ${provider}: ${urls.length} base URLs and ${keys.length} keys in ${config.api_key_env}: give one key for all, or one per URL`);
  }
  if (urls.length === 0) throw new ConfigError(`provider ${provider}: base_url is empty`);
  return Array.from({ length: count }, (_, index) => ({
    name: `${provider}#${index + 1}`,
    baseUrl: urls[urls.length === 1 ? 0 : index]!,
    apiKeyEnv: config.api_key_env!,
    apiKey: keys.length === 0 ? undefined : keys[keys.length === 1 ? 0 : index],
    weight: 1,
  }));
}

function splitList(text: string): string[] {
  return text.split(",").map((part) => part.trim()).filter((part) => part !== "");
}

/** The name, weight and availability of a spec's deployment (its endpoint is the provider's). */
export function deploymentBase(spec: DeploymentSpec): Omit<Deployment, "endpoint"> {
  const unavailableReason = missingKeyReason(spec.apiKey, spec.apiKeyEnv);
  return { name: spec.name, weight: spec.weight, ...(unavailableReason ? { unavailableReason } : {}) };
}

/** A provider cannot serve when none of its deployments can: the first one's reason. */
export function providerUnavailableReason(deployments: readonly Deployment[]): string | undefined {
  if (deployments.some((deployment) => deployment.unavailableReason === undefined)) return undefined;
  return deployments[0]?.unavailableReason;
}

/** The fields of a Provider that come from its deployments. */
export function deploymentFields(deployments: readonly Deployment[], retryOn: readonly number[] | undefined): Pick<Provider, "deployments" | "unavailableReason" | "retryOn"> {
  const reason = providerUnavailableReason(deployments);
  return { deployments, ...(reason ? { unavailableReason: reason } : {}), ...(retryOn ? { retryOn } : {}) };
}
