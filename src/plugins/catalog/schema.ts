import { Type, type Static } from "@sinclair/typebox";

/** Plugin config: where the catalog file is (relative paths resolve against the process cwd). */
export const CatalogConfigSchema = Type.Object(
  {
    file: Type.Optional(
      Type.String({ minLength: 1, default: "catalog.yaml", description: "Path of the catalog YAML file." }),
    ),
  },
  { additionalProperties: false },
);
export type CatalogConfig = Static<typeof CatalogConfigSchema>;

export const DEFAULT_CATALOG_FILE = "catalog.yaml";

/** USD per 1M tokens as a quoted decimal string; the loader also checks it is whole nano-USD per token. */
const Price = Type.String({ pattern: "^\\d+(\\.\\d+)?$", description: "USD per 1M tokens, e.g. \"1.475\"" });
const IsoDate = Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$", description: "YYYY-MM-DD (UTC)" });
const Name = Type.String({ pattern: "^[a-z0-9][a-z0-9-]*$" });
const Modality = Type.Union([Type.Literal("text"), Type.Literal("image"), Type.Literal("audio"), Type.Literal("file")]);

const priceFields = {
  input: Price,
  output: Price,
  /** Prompt tokens read from the provider's cache. */
  cache_read: Price,
  /** Prompt tokens written to the provider's cache (Anthropic: with the 5-minute lifetime). */
  cache_write: Price,
  /** Prompt tokens written to the cache with a 1-hour lifetime (Anthropic); absent: cache_write. */
  cache_write_1h: Type.Optional(Price),
};

export const PricesSchema = Type.Object(priceFields, { additionalProperties: false });
export type CatalogPrices = Static<typeof PricesSchema>;

/** A full new price set, effective from 00:00 UTC of `from`. */
export const PriceChangeSchema = Type.Object({ from: IsoDate, ...priceFields }, { additionalProperties: false });

/** Prices of the whole request once its prompt exceeds `above_input_tokens` tokens. */
export const LongContextSchema = Type.Object(
  { above_input_tokens: Type.Integer({ minimum: 1 }), ...priceFields },
  { additionalProperties: false },
);

export const CapabilitiesSchema = Type.Object(
  {
    tools: Type.Boolean(),
    vision: Type.Boolean(),
    /** JSON mode (`response_format: json_object`). */
    json_output: Type.Boolean(),
    /** JSON-schema structured output; defaults to `json_output`. */
    structured_outputs: Type.Optional(Type.Boolean()),
    reasoning: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** One model of catalog.yaml. */
export const CatalogEntrySchema = Type.Object(
  {
    /**
     * What clients send in `model`: verbatim, case-sensitive, no provider prefix (spec), so no "/":
     * a vendor's prefixed name (meta-llama/...) belongs in `upstream_model`.
     */
    id: Type.String({
      pattern: "^[^\\s/]+$",
      description: 'an id without spaces or "/" (ids carry no provider prefix; put the vendor\'s prefixed name in upstream_model)',
    }),
    name: Type.String({ minLength: 1 }),
    /** Who makes the model; shown as `owned_by`. */
    family: Name,
    kind: Type.Union([Type.Literal("chat"), Type.Literal("image")]),
    /** The provider plugin / upstream that serves it. */
    provider: Name,
    /** The model name the upstream knows; defaults to `id`. */
    upstream_model: Type.Optional(Type.String({ pattern: "^\\S+$" })),
    context_length: Type.Integer({ minimum: 1 }),
    max_output_tokens: Type.Integer({ minimum: 1 }),
    prices: PricesSchema,
    price_changes: Type.Optional(Type.Array(PriceChangeSchema, { minItems: 1 })),
    long_context: Type.Optional(LongContextSchema),
    capabilities: CapabilitiesSchema,
    /** Release date. */
    created: IsoDate,
    /**
     * Other catalog ids (same kind) tried in order when every deployment of this model's provider failed
     * retryably before any byte reached the client; their own fallbacks are not followed. Default: none.
     */
    fallbacks: Type.Optional(Type.Array(Type.String({ pattern: "^[^\\s/]+$" }), { uniqueItems: true })),
    /**
     * Automatic prompt-cache breakpoints on translated routes into a provider that takes them (anthropic; its own
     * `auto_cache` switch too). Default: on; false turns them off for this model.
     */
    auto_cache: Type.Optional(Type.Boolean()),
    /**
     * The shortest prompt prefix (tokens) the provider caches for this model: automatic breakpoints go only past it.
     * Default for Anthropic models: 2048 for Haiku ids, 1024 otherwise (formats/anthropic-messages/cache.ts).
     */
    cache_min_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Default: text, plus image when `capabilities.vision` (chat); text (image). */
    input_modalities: Type.Optional(Type.Array(Modality, { minItems: 1, uniqueItems: true })),
    /** Default: text (chat); image (image). */
    output_modalities: Type.Optional(Type.Array(Modality, { minItems: 1, uniqueItems: true })),
  },
  { additionalProperties: false },
);
export type CatalogEntry = Static<typeof CatalogEntrySchema>;

export const CatalogFileSchema = Type.Object(
  { models: Type.Array(Type.Unknown(), { minItems: 1 }) },
  { additionalProperties: false },
);

/** USD per token as decimal strings (e.g. "0.000002"), as `GET /v1/models` shows them. */
const TokenPricing = {
  prompt: Type.String(),
  completion: Type.String(),
  input_cache_read: Type.String(),
  input_cache_write: Type.String(),
  /** A cache write with a 1-hour lifetime; only where the model has its own price for it. */
  input_cache_write_1h: Type.Optional(Type.String()),
};

/** One element of `GET /v1/models` `data` (OpenAI list shape plus OpenRouter-style details). */
export const ModelListingSchema = Type.Object({
  id: Type.String(),
  object: Type.Literal("model"),
  /** Unix seconds. */
  created: Type.Integer(),
  owned_by: Type.String(),
  name: Type.String(),
  context_length: Type.Integer(),
  max_output_tokens: Type.Integer(),
  pricing: Type.Object(TokenPricing),
  /** Present when the model has a long-context tier. */
  long_context_pricing: Type.Optional(Type.Object({ above_prompt_tokens: Type.Integer(), ...TokenPricing })),
  architecture: Type.Object({
    input_modalities: Type.Array(Type.String()),
    output_modalities: Type.Array(Type.String()),
  }),
  supported_parameters: Type.Array(Type.String()),
});
export type ModelListing = Static<typeof ModelListingSchema>;
