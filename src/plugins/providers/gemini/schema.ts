import { Type, type Static } from "@sinclair/typebox";
import { DeploymentFields } from "../deployments.ts";

/** base_url (before `/v1beta/models/...`, e.g. https://generativelanguage.googleapis.com) and api_key_env, or deployments (providers/deployments.ts). */
export const GeminiConfigSchema = Type.Object({ ...DeploymentFields });
export type GeminiConfig = Static<typeof GeminiConfigSchema>;
