import type { Stage } from "./pipeline.ts";
import { isModelDirectory, type Provider } from "./plugin.ts";

/** A provider that cannot serve, why, and the model ids it leaves without an upstream. */
export interface UnservedProvider {
  reason: string;
  models: string[];
}

/**
 * The models no enabled provider can serve, by provider: the router's (a `ModelDirectory` among the plugins'
 * `provides`) models whose provider is not enabled or reports an `unavailableReason` (no key). Empty when no
 * plugin routes models, or a provider serves every model (the sandbox).
 */
export function unservedModels(stages: readonly Stage[]): Record<string, UnservedProvider> {
  const directory = stages.map((stage) => stage.instance.provides).find(isModelDirectory);
  if (!directory) return {};
  const providers = new Map<string, Provider>();
  for (const { instance } of stages) for (const [name, provider] of Object.entries(instance.providers ?? {})) providers.set(name, provider);
  if ([...providers.values()].some((provider) => provider.servesEveryModel)) return {};
  const unserved: Record<string, UnservedProvider> = {};
  for (const { id, provider: name } of directory.routedModels()) {
    const provider = providers.get(name);
    const reason = provider === undefined ? `no enabled plugin serves provider "${name}"` : provider.unavailableReason;
    if (reason === undefined) continue;
    (unserved[name] ??= { reason, models: [] }).models.push(id);
  }
  return unserved;
}
