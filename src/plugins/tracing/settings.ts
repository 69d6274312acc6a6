/**
 * The standard OpenTelemetry variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/
 * and .../protocol/exporter/), read from the environment the gateway was started with (`host.env`), not only
 * `process.env`: a gateway started in process (tests, an embedding program) has its own. The SDK's exporters and
 * processors read `process.env` themselves as a fallback; every value read here is passed to them explicitly, so
 * `host.env` wins.
 */

export type OtlpProtocol = "http/protobuf" | "http/json";

export type SamplerSetting =
  | { kind: "always_on" | "always_off" | "parentbased_always_on" | "parentbased_always_off" }
  | { kind: "traceidratio" | "parentbased_traceidratio"; ratio: number };

export interface TracingSettings {
  /** The full URL spans are POSTed to (…/v1/traces). */
  url: string;
  protocol: OtlpProtocol;
  headers: Record<string, string>;
  timeoutMillis?: number;
  compression?: "gzip" | "none";
  serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES, decoded. */
  resourceAttributes: Record<string, string>;
  sampler: SamplerSetting;
  /** The batch span processor's OTEL_BSP_* settings, those that are set. */
  batch: { scheduledDelayMillis?: number; exportTimeoutMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number };
}

type Env = Readonly<Record<string, string | undefined>>;

/** A setting that is not honoured: one line naming the variable (the gateway refuses to start on it). */
export class TracingSettingsError extends Error {
  override name = "TracingSettingsError";
}

/**
 * Tracing's settings, or undefined when it is off: no OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT,
 * OTEL_TRACES_EXPORTER=none, or OTEL_SDK_DISABLED=true.
 */
export function readTracingSettings(env: Env): TracingSettings | undefined {
  if (value(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  const exporter = value(env, "OTEL_TRACES_EXPORTER")?.toLowerCase();
  if (exporter === "none") return undefined;
  if (exporter !== undefined && exporter !== "otlp") {
    throw new TracingSettingsError(`OTEL_TRACES_EXPORTER=${exporter} is not supported: "otlp" (the default) or "none"`);
  }
  const url = tracesUrl(env);
  if (url === undefined) return undefined;
  const protocol = value(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? value(env, "OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf";
  if (protocol !== "http/protobuf" && protocol !== "http/json") {
    throw new TracingSettingsError(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: "http/protobuf" (the default) or "http/json"`);
  }
  const compression = value(env, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION") ?? value(env, "OTEL_EXPORTER_OTLP_COMPRESSION");
  if (compression !== undefined && compression !== "gzip" && compression !== "none") {
    throw new TracingSettingsError(`OTEL_EXPORTER_OTLP_COMPRESSION=${compression} is not supported: "gzip" or "none"`);
  }
  const timeoutMillis = milliseconds(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") ?? milliseconds(env, "OTEL_EXPORTER_OTLP_TIMEOUT");
  const resourceAttributes = keyValues(value(env, "OTEL_RESOURCE_ATTRIBUTES"));
  const serviceName = value(env, "OTEL_SERVICE_NAME") ?? resourceAttributes["service.name"] ?? "ai-gateway";
  const batch: TracingSettings["batch"] = {};
  const delay = milliseconds(env, "OTEL_BSP_SCHEDULE_DELAY");
  if (delay !== undefined) batch.scheduledDelayMillis = delay;
  const exportTimeout = milliseconds(env, "OTEL_BSP_EXPORT_TIMEOUT");
  if (exportTimeout !== undefined) batch.exportTimeoutMillis = exportTimeout;
  const queue = milliseconds(env, "OTEL_BSP_MAX_QUEUE_SIZE");
  if (queue !== undefined) batch.maxQueueSize = Math.max(1, queue);
  const batchSize = milliseconds(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
  if (batchSize !== undefined) batch.maxExportBatchSize = Math.max(1, batchSize);
  return {
    url,
    protocol,
    // The signal's own headers win over the general ones (the specification: combined, the specific first).
    headers: { ...keyValues(value(env, "OTEL_EXPORTER_OTLP_HEADERS")), ...keyValues(value(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")) },
    ...(timeoutMillis === undefined ? {} : { timeoutMillis }),
    ...(compression === undefined ? {} : { compression }),
    serviceName,
    resourceAttributes,
    sampler: sampler(env),
    batch,
  };
}

/** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces". */
function tracesUrl(env: Env): string | undefined {
  const specific = value(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (specific !== undefined) return checkedUrl(specific, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const base = value(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  if (base === undefined) return undefined;
  checkedUrl(base, "OTEL_EXPORTER_OTLP_ENDPOINT");
  return (base.endsWith("/") ? base : base + "/") + "v1/traces";
}

function checkedUrl(text: string, name: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new TracingSettingsError(`${name}=${text} is not a URL (e.g. http://otel-collector:4318)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TracingSettingsError(`${name}=${text}: an http:// or https:// URL (OTLP over HTTP)`);
  return text;
}

/** OTEL_TRACES_SAMPLER (default parentbased_always_on) and OTEL_TRACES_SAMPLER_ARG for the ratio samplers (default 1). */
function sampler(env: Env): SamplerSetting {
  const kind = value(env, "OTEL_TRACES_SAMPLER")?.toLowerCase() ?? "parentbased_always_on";
  switch (kind) {
    case "always_on":
    case "always_off":
    case "parentbased_always_on":
    case "parentbased_always_off":
      return { kind };
    case "traceidratio":
    case "parentbased_traceidratio": {
      const arg = value(env, "OTEL_TRACES_SAMPLER_ARG");
      const ratio = arg === undefined ? 1 : Number(arg);
      if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
        throw new TracingSettingsError(`OTEL_TRACES_SAMPLER_ARG=${arg}: a ratio between 0 and 1 for ${kind}`);
      }
      return { kind, ratio };
    }
    default:
      throw new TracingSettingsError(
        `OTEL_TRACES_SAMPLER=${kind} is not supported: always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio`,
      );
  }
}

/** A set variable's trimmed value; unset and empty are the same (the specification's rule). */
function value(env: Env, name: string): string | undefined {
  const text = env[name]?.trim();
  return text === undefined || text === "" ? undefined : text;
}

function milliseconds(env: Env, name: string): number | undefined {
  const text = value(env, name);
  if (text === undefined) return undefined;
  const number = Number(text);
  if (!Number.isInteger(number) || number < 0) throw new TracingSettingsError(`${name}=${text}: a whole number of milliseconds (or items)`);
  return number;
}

/** "k1=v1,k2=v2" with percent-encoded values (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS). */
export function keyValues(text: string | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  if (text === undefined) return result;
  for (const pair of text.split(",")) {
    const equals = pair.indexOf("=");
    if (equals <= 0) continue;
    const key = decode(pair.slice(0, equals).trim());
    const item = decode(pair.slice(equals + 1).trim());
    if (key !== "" && item !== "") result[key] = item;
  }
  return result;
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
