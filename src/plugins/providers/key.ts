/** What a provider without its API key reports as `unavailableReason` (the start-up log and GET /ready show it). */
export function missingKeyReason(apiKey: string | undefined, apiKeyEnv: string): string | undefined {
  return apiKey ? undefined : `no API key: ${apiKeyEnv} is not set`;
}
