import { ProviderUnavailableError } from "../../core/errors.ts";

/** What a provider without its API key reports as `unavailableReason` (the start-up log and GET /ready show it). */
export function missingKeyReason(apiKey: string | undefined, apiKeyEnv: string): string | undefined {
  return apiKey ? undefined : `no API key: ${apiKeyEnv} is not set`;
}

/** The 503 of a request to a provider that has no API key (thrown from its endpoint, before anything is sent). */
export function missingKeyError(model: string, provider: string, apiKeyEnv: string): ProviderUnavailableError {
  return new ProviderUnavailableError(`model "${model}" is served by ${provider}, which has no API key: set ${apiKeyEnv} and restart the gateway`);
}
