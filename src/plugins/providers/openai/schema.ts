import { Type, type Static } from "@sinclair/typebox";
import { DeploymentFields } from "../deployments.ts";

/**
 * An OpenAI-speaking upstream: `base_url` + `api_key_env` (each may be a comma-separated list: one deployment
 * per entry) or a `deployments` list (src/plugins/providers/deployments.ts).
 */
export const OpenAIUpstreamSchema = Type.Object({ ...DeploymentFields });
export type OpenAIUpstreamConfig = Static<typeof OpenAIUpstreamSchema>;
