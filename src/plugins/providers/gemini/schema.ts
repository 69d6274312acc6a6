import { Type, type Static } from "@sinclair/typebox";

export const GeminiConfigSchema = Type.Object({
  /** Before `/v1beta/models/...`, e.g. https://generativelanguage.googleapis.com. */
  base_url: Type.String({ minLength: 1, pattern: "^https?://" }),
  /** The environment variable holding the key (the key itself never sits in YAML). */
  api_key_env: Type.String({ minLength: 1, pattern: "^[A-Za-z_][A-Za-z0-9_]*$" }),
});
export type GeminiConfig = Static<typeof GeminiConfigSchema>;
