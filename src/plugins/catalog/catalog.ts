import { readFileSync } from "node:fs";
import { LineCounter, parseDocument } from "yaml";
import { Value, ValueErrorType, type ValueError } from "@sinclair/typebox/value";
import { describeUnknownKey, findUnknownKey } from "../../core/config-keys.ts";
import type { ModelDirectory } from "../../core/plugin.ts";
import { nanoPerTokenToUsdString, usdPerMillionToNanoPerToken, type NanoUsd } from "../../core/money.ts";
import {
  CatalogEntrySchema,
  CatalogFileSchema,
  type CatalogEntry,
  type CatalogPrices,
  type ModelListing,
} from "./schema.ts";

/** A validated catalog entry with its defaults filled in. */
export type CatalogModel = Readonly<
  CatalogEntry & Required<Pick<CatalogEntry, "upstream_model" | "input_modalities" | "output_modalities">>
>;

/** Prices in effect for one request, in integer nano-USD per token. */
export interface ModelPrices {
  readonly input: NanoUsd;
  readonly output: NanoUsd;
  readonly cacheRead: NanoUsd;
  /** A cache write (Anthropic: the 5-minute lifetime). */
  readonly cacheWrite: NanoUsd;
  /** A cache write with a 1-hour lifetime: `cache_write_1h`, else cacheWrite. */
  readonly cacheWrite1h: NanoUsd;
}

/** One dated price set of a model, with its `/v1/models` entry built once. */
interface PricePeriod {
  /** Epoch ms from which it applies (-Infinity for the base prices). */
  readonly from: number;
  readonly prices: ModelPrices;
  readonly listing: ModelListing;
}

interface CompiledModel {
  readonly model: CatalogModel;
  /** Ascending by `from`; the first is the base price. */
  readonly periods: readonly PricePeriod[];
  readonly longContext?: { readonly aboveInputTokens: number; readonly prices: ModelPrices };
}

type Clock = () => Date;

/** The loaded model catalog: lookups by exact id, prices by date and prompt length. */
export class Catalog implements ModelDirectory {
  readonly #byId: ReadonlyMap<string, CompiledModel>;
  readonly #models: readonly CatalogModel[];
  readonly #now: Clock;

  constructor(compiled: readonly CompiledModel[], now: Clock, readonly file: string) {
    this.#byId = new Map(compiled.map((c) => [c.model.id, c]));
    this.#models = Object.freeze(compiled.map((c) => c.model));
    this.#now = now;
  }

  /** The model with exactly this id (case-sensitive), if any. */
  get(id: string): CatalogModel | undefined {
    return this.#byId.get(id)?.model;
  }

  /** Every model, in file order. */
  all(): readonly CatalogModel[] {
    return this.#models;
  }

  /** Every model id and the provider that serves it (core's start-up check and /ready name the unserved ones). */
  routedModels(): readonly { readonly id: string; readonly provider: string }[] {
    return this.#models;
  }

  /** Nano-USD per-token prices for a request with `promptTokens` prompt tokens made at `at`. */
  pricesFor(model: CatalogModel, promptTokens: number, at: Date = this.#now()): ModelPrices {
    const compiled = this.#compiled(model);
    const long = compiled.longContext;
    if (long && promptTokens > long.aboveInputTokens) return long.prices;
    return periodAt(compiled, at.getTime()).prices;
  }

  /** The model's `GET /v1/models` entry with the prices in effect at `at`. */
  listing(model: CatalogModel, at: Date = this.#now()): ModelListing {
    return periodAt(this.#compiled(model), at.getTime()).listing;
  }

  /** Nearest real id for a mistyped one (other case, provider prefix), for error hints. */
  suggest(id: string): string | undefined {
    const parts = id.toLowerCase().split("/");
    for (let i = 0; i < parts.length; i++) {
      const candidate = parts.slice(i).join("/");
      const hit = this.#models.find((m) => m.id.toLowerCase() === candidate);
      if (hit) return hit.id;
    }
    return undefined;
  }

  #compiled(model: CatalogModel): CompiledModel {
    const compiled = this.#byId.get(model.id);
    if (!compiled) throw new Error(`model "${model.id}" is not in the catalog ${this.file}`);
    return compiled;
  }
}

function periodAt(compiled: CompiledModel, atMs: number): PricePeriod {
  const periods = compiled.periods;
  for (let i = periods.length - 1; i > 0; i--) if (periods[i].from <= atMs) return periods[i];
  return periods[0];
}

/** Reads and validates a catalog file; throws a one-line Error naming file, model and field. */
export function loadCatalog(path: string, now?: Date | Clock): Catalog {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`${path}: cannot read the model catalog: ${(error as Error).message}`);
  }
  return parseCatalog(text, path, now);
}

/** Validates catalog YAML text; `file` only names it in errors. */
export function parseCatalog(text: string, file: string, now?: Date | Clock): Catalog {
  const clock: Clock = now === undefined ? () => new Date() : typeof now === "function" ? now : () => now;
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true });
  if (doc.errors.length > 0) throw new Error(`${file}: invalid YAML: ${oneLine(doc.errors[0].message)}`);
  const root: unknown = doc.toJS();
  const unknownTop = findUnknownKey(CatalogFileSchema, root, "");
  if (unknownTop) throw new Error(`${file}: ${describeUnknownKey(unknownTop)}`);

  const fileError = Value.Errors(CatalogFileSchema, root).First();
  if (fileError) {
    const where = fileError.path ? ` at ${dotted(fileError.path)}` : "";
    throw new Error(`${file}: expected a top-level \`models:\` list${where}: ${fileError.message}`);
  }

  const entries = (root as { models: unknown[] }).models;
  const seen = new Set<string>();
  const compiled = entries.map(function compileEntry(raw, index) {
    const node = doc.getIn(["models", index], true) as { range?: [number, number, number] } | undefined;
    const line = node?.range ? lineCounter.linePos(node.range[0]).line : undefined;
    const rawId = (raw as { id?: unknown } | null)?.id;
    const label = typeof rawId === "string" ? `model "${rawId}"` : `models[${index}]`;
    const where = `${file}${line ? `:${line}` : ""}: ${label}`;
    const fail = (field: string, problem: string): never => {
      throw new Error(`${where}: ${field}: ${oneLine(problem)}`);
    };
    // Before the schema check: a misspelled key is the cause of the "required property" error it would give.
    const unknown = findUnknownKey(CatalogEntrySchema, raw, `models[${index}]`);
    if (unknown) throw new Error(`${where}: ${describeUnknownKey(unknown)}`);
    const model = validateEntry(raw, fail);
    if (seen.has(model.id)) fail("id", `duplicate id "${model.id}"`);
    seen.add(model.id);
    return { compiled: compileModel(model, fail), fail };
  });
  const byId = new Map(compiled.map(({ compiled: c }) => [c.model.id, c.model]));
  for (const { compiled: { model }, fail } of compiled) {
    (model.fallbacks ?? []).forEach(function checkFallback(id, i) {
      const field = `fallbacks[${i}]`;
      const other = byId.get(id);
      if (id === model.id) fail(field, `a model cannot be its own fallback`);
      if (!other) fail(field, `"${id}" is not a model of this catalog`);
      if (other!.kind !== model.kind) fail(field, `"${id}" is ${article(other!.kind)} ${other!.kind} model; ${article(model.kind)} ${model.kind} model's fallbacks must be ${model.kind} models`);
    });
  }
  return new Catalog(
    compiled.map(({ compiled: c }) => c),
    clock,
    file,
  );
}

type Fail = (field: string, problem: string) => never;

function validateEntry(raw: unknown, fail: Fail): CatalogModel {
  const error = Value.Errors(CatalogEntrySchema, raw).First();
  if (error) {
    const field = dotted(error.path) || "(entry)";
    if (/(^|\.)(input|output|cache_read|cache_write|cache_write_1h)$/.test(field) && typeof error.value === "number") {
      fail(field, `must be a quoted decimal string (e.g. "${error.value}"), got a YAML number`);
    }
    fail(field, `${describeError(error)}${error.value === undefined ? "" : `, got ${JSON.stringify(error.value)}`}`);
  }
  const entry = raw as CatalogEntry;
  const vision = entry.capabilities.vision;
  const model: CatalogModel = deepFreeze({
    ...entry,
    upstream_model: entry.upstream_model ?? entry.id,
    input_modalities: entry.input_modalities ?? (entry.kind === "chat" && vision ? ["text", "image"] : ["text"]),
    output_modalities: entry.output_modalities ?? (entry.kind === "image" ? ["image"] : ["text"]),
  });

  parseDate(model.created, "created", fail);
  if (model.max_output_tokens > model.context_length) {
    fail("max_output_tokens", `${model.max_output_tokens} exceeds context_length ${model.context_length}`);
  }
  if (model.long_context && model.long_context.above_input_tokens >= model.context_length) {
    fail("long_context.above_input_tokens", `must be below context_length ${model.context_length}`);
  }
  const wantOutput = model.kind === "image" ? "image" : "text";
  if (!model.output_modalities.includes(wantOutput)) {
    fail("output_modalities", `${article(model.kind)} ${model.kind} model must include "${wantOutput}"`);
  }
  if (model.kind === "chat" && vision && !model.input_modalities.includes("image")) {
    fail("input_modalities", `must include "image" since capabilities.vision is true`);
  }
  return model;
}

function compileModel(model: CatalogModel, fail: Fail): CompiledModel {
  const createdSeconds = parseDate(model.created, "created", fail) / 1000;
  const long = model.long_context;
  const longContext = long && { aboveInputTokens: long.above_input_tokens, prices: nanoPrices(long, "long_context", fail), own1h: long.cache_write_1h !== undefined };
  const listingAt = (prices: ModelPrices, own1h: boolean) => buildListing(model, createdSeconds, prices, own1h, longContext);
  const base = nanoPrices(model.prices, "prices", fail);
  const periods: PricePeriod[] = [{ from: -Infinity, prices: base, listing: listingAt(base, model.prices.cache_write_1h !== undefined) }];
  (model.price_changes ?? []).forEach(function compileChange(change, i) {
    const field = `price_changes[${i}]`;
    const from = parseDate(change.from, `${field}.from`, fail);
    if (from <= periods[periods.length - 1].from) fail(`${field}.from`, `${change.from} is not after the previous change`);
    const prices = nanoPrices(change, field, fail);
    periods.push({ from, prices, listing: listingAt(prices, change.cache_write_1h !== undefined) });
  });
  const longFrozen = longContext && Object.freeze({ aboveInputTokens: longContext.aboveInputTokens, prices: longContext.prices });
  return Object.freeze({ model, periods: Object.freeze(periods), longContext: longFrozen });
}

function nanoPrices(prices: CatalogPrices, field: string, fail: Fail): ModelPrices {
  const nano = (key: keyof CatalogPrices): NanoUsd => {
    const text = prices[key]!;
    try {
      return usdPerMillionToNanoPerToken(text);
    } catch {
      return fail(`${field}.${key}`, `"${text}" USD per 1M tokens is not an integer nano-USD per token (at most 3 decimals)`);
    }
  };
  return Object.freeze({
    input: nano("input"),
    output: nano("output"),
    cacheRead: nano("cache_read"),
    cacheWrite: nano("cache_write"),
    cacheWrite1h: prices.cache_write_1h === undefined ? nano("cache_write") : nano("cache_write_1h"),
  });
}

function buildListing(
  model: CatalogModel,
  created: number,
  prices: ModelPrices,
  own1h: boolean,
  longContext: (CompiledModel["longContext"] & { own1h: boolean }) | undefined,
): ModelListing {
  const listing: ModelListing = {
    id: model.id,
    object: "model",
    created,
    owned_by: model.family,
    name: model.name,
    context_length: model.context_length,
    max_output_tokens: model.max_output_tokens,
    pricing: tokenPricing(prices, own1h),
    architecture: {
      input_modalities: [...model.input_modalities],
      output_modalities: [...model.output_modalities],
    },
    supported_parameters: supportedParameters(model),
  };
  if (longContext) {
    listing.long_context_pricing = {
      above_prompt_tokens: longContext.aboveInputTokens,
      ...tokenPricing(longContext.prices, longContext.own1h),
    };
  }
  return deepFreeze(listing);
}

/** USD per token; `input_cache_write_1h` only where the price set names its own 1-hour write price (`own1h`). */
function tokenPricing(prices: ModelPrices, own1h: boolean): ModelListing["pricing"] {
  const pricing: ModelListing["pricing"] = {
    prompt: nanoPerTokenToUsdString(prices.input),
    completion: nanoPerTokenToUsdString(prices.output),
    input_cache_read: nanoPerTokenToUsdString(prices.cacheRead),
    input_cache_write: nanoPerTokenToUsdString(prices.cacheWrite),
  };
  if (own1h) pricing.input_cache_write_1h = nanoPerTokenToUsdString(prices.cacheWrite1h);
  return pricing;
}

/** Request parameters a client may send for this model, derived from its capabilities. */
export function supportedParameters(model: CatalogModel): string[] {
  if (model.kind === "image") return ["prompt", "size", "quality"];
  const caps = model.capabilities;
  const params = ["max_tokens", "temperature", "top_p", "stop", "stream"];
  if (caps.tools) params.push("tools", "tool_choice", "parallel_tool_calls");
  if (caps.json_output) params.push("response_format");
  if (caps.structured_outputs ?? caps.json_output) params.push("structured_outputs");
  if (caps.reasoning) params.push("reasoning", "reasoning_effort");
  return params;
}

/** TypeBox's message, made readable for literal unions and described string formats. */
function describeError(error: ValueError): string {
  const schema = error.schema as { anyOf?: { const?: unknown }[]; description?: string };
  const literals = schema.anyOf?.map((option) => option.const);
  if (literals && literals.every((value) => value !== undefined)) {
    return `must be one of ${literals.map((value) => JSON.stringify(value)).join(", ")}`;
  }
  if (error.type === ValueErrorType.StringPattern && schema.description) return `expected ${schema.description}`;
  return error.message;
}

/** Epoch ms of 00:00 UTC on a YYYY-MM-DD date that must exist in the calendar. */
function parseDate(text: string, field: string, fail: Fail): number {
  const ms = Date.parse(`${text}T00:00:00Z`);
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== text) fail(field, `"${text}" is not a real date`);
  return ms;
}

/** "/prices/input" -> "prices.input", "/price_changes/0/from" -> "price_changes[0].from". */
function dotted(path: string): string {
  return path
    .split("/")
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** "a" or "an" before a model kind ("an image model"). */
function article(word: string): string {
  return /^[aeiou]/i.test(word) ? "an" : "a";
}
