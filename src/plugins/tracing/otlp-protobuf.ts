import type { Attributes, AttributeValue, HrTime, TraceState } from "@opentelemetry/api";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { ProtobufTraceSerializer, type IExportTraceServiceResponse, type ISerializer } from "@opentelemetry/otlp-transformer";

/**
 * A lean encoder of OTLP's `ExportTraceServiceRequest` (opentelemetry-proto, trace/v1 and collector/trace/v1) for the
 * spans the gateway makes: what the official `ProtobufTraceSerializer` of @opentelemetry/otlp-transformer writes, byte
 * for byte (the same fields in the same order, zero dropped counts and the span flags included), at a fraction of its
 * cost on the gateway's thread (0.7 µs a span instead of 3.1 for our spans: test/plugins/tracing/bench-encode.ts). The
 * official one walks every batch twice (a size estimate, then the write), allocates a Uint8Array per trace, span and
 * parent id, serializes each span's tracestate and re-encodes every attribute key; this one writes once into a
 * scratch buffer kept between batches, ids straight from hex into it, attribute keys from a cache (a whole KeyValue
 * when its value is the one the key had in the last span), the resource and each instrumentation scope encoded once.
 *
 * Only what our spans hold is encoded here: scalar attributes (string, boolean, integer, double), a status, a parent,
 * a tracestate. A batch with anything else (an event, a link, an array, byte or map attribute value, an id that is not
 * hex of the right length, a resource whose attributes are still being detected) goes whole to the official
 * serializer, so the bytes never depend on this subset.
 */

/** The official serializer's interface: what an OTLP export delegate is given. */
export type TraceSerializer = ISerializer<ReadableSpan[], IExportTraceServiceResponse>;

/** Thrown (and caught in serializeRequest) when a span holds something this encoder leaves to the official one. */
const UNSUPPORTED = Symbol("otlp-protobuf: unsupported");

/** Span flags (trace/v1 SpanFlags): the context's trace flags, and whether its parent is remote. */
const FLAGS_HAS_IS_REMOTE = 0x100;
const FLAGS_IS_REMOTE = 0x200;

/** int_value covers [-(2^63), 2^63) (what the official serializer encodes as an integer; the rest as a double). */
const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;

/** Hex digit values by char code (lower and upper case), 255 for anything else. */
const HEX = new Uint8Array(256).fill(255);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[97 + i] = 10 + i;
  HEX[65 + i] = 10 + i;
}

/** Attribute keys cached at most (ours are a few dozen): beyond it a key is encoded each time. */
const MAX_CACHED_KEYS = 1024;

const textEncoder = new TextEncoder();

function varintSize(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5;
}

/** What is kept per attribute key. */
interface KeyEntry {
  /** KeyValue.key's tag, length and UTF-8 bytes, then KeyValue.value's tag (0x12). */
  readonly prefix: Uint8Array;
  /** The key's value in the last span that had it, and (once seen twice in a row) its Span.attributes field's bytes. */
  value: AttributeValue | undefined;
  bytes: Uint8Array | undefined;
}

/** One encoder; its scratch buffer is reused by every batch (the bytes handed out are a copy). */
export class OtlpProtobufEncoder {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  private pos = 0;
  private readonly keys = new Map<string, KeyEntry>();
  /** ResourceSpans.resource (tag, length, Resource), by resource object. */
  private readonly resources = new WeakMap<Resource, Uint8Array>();
  /** ScopeSpans.scope (tag, length, InstrumentationScope), by scope object. */
  private readonly scopes = new WeakMap<object, Uint8Array>();
  /** The last tracestate seen and its serialization (a trace's spans share one object). */
  private lastTraceState: TraceState | undefined;
  private lastTraceStateText = "";

  /** The request's bytes, or undefined when a span holds something left to the official serializer. */
  encode(spans: ReadableSpan[]): Uint8Array | undefined {
    try {
      return this.encodeRequest(spans);
    } catch (error) {
      if (error === UNSUPPORTED) return undefined;
      throw error;
    }
  }

  private encodeRequest(spans: ReadableSpan[]): Uint8Array {
    // Grouped by resource, then scope, by identity (as the official serializer does); ours are all one and one.
    const groups = new Map<Resource, Map<object, ReadableSpan[]>>();
    const first = spans[0];
    let same = first !== undefined;
    if (first) {
      const resource = first.resource;
      const scope = first.instrumentationScope;
      for (let i = 1; i < spans.length; i++) {
        const span = spans[i]!;
        if (span.resource !== resource || span.instrumentationScope !== scope) {
          same = false;
          break;
        }
      }
      if (same) groups.set(resource, new Map([[scope, spans]]));
    }
    if (!same) {
      for (const span of spans) {
        let scopes = groups.get(span.resource);
        if (!scopes) groups.set(span.resource, (scopes = new Map()));
        const list = scopes.get(span.instrumentationScope);
        if (list) list.push(span);
        else scopes.set(span.instrumentationScope, [span]);
      }
    }

    // The spans of each group into the scratch buffer, one after another; then the messages around them into the
    // request's own buffer (their lengths known by then), each group's spans copied once.
    this.pos = 0;
    const layout: { resource: Uint8Array; schemaUrl: string | undefined; scopes: { scope: Uint8Array; schemaUrl: string | undefined; start: number; end: number }[] }[] = [];
    for (const [resource, scopes] of groups) {
      const entry = { resource: this.resourceBytes(resource), schemaUrl: resource.schemaUrl, scopes: [] as { scope: Uint8Array; schemaUrl: string | undefined; start: number; end: number }[] };
      for (const [scope, list] of scopes) {
        const start = this.pos;
        for (const span of list) this.writeSpan(span);
        entry.scopes.push({ scope: this.scopeBytes(scope), schemaUrl: (scope as { schemaUrl?: string }).schemaUrl, start, end: this.pos });
      }
      layout.push(entry);
    }

    const sizes: number[] = [];
    let total = 0;
    for (const entry of layout) {
      let resourceSpans = entry.resource.length;
      for (const scope of entry.scopes) {
        const scopeSpans = scope.scope.length + (scope.end - scope.start) + stringFieldSize(scope.schemaUrl);
        sizes.push(scopeSpans);
        resourceSpans += 1 + varintSize(scopeSpans) + scopeSpans;
      }
      resourceSpans += stringFieldSize(entry.schemaUrl);
      sizes.push(resourceSpans);
      total += 1 + varintSize(resourceSpans) + resourceSpans;
    }

    const out = new Uint8Array(total);
    let p = 0;
    let s = 0;
    for (const entry of layout) {
      // sizes holds each resource's scopes' sizes, then the resource's.
      const resourceSize = sizes[s + entry.scopes.length]!;
      out[p++] = 0x0a; // ExportTraceServiceRequest.resource_spans
      p = putVarint(out, p, resourceSize);
      out.set(entry.resource, p);
      p += entry.resource.length;
      for (const scope of entry.scopes) {
        out[p++] = 0x12; // ResourceSpans.scope_spans
        p = putVarint(out, p, sizes[s++]!);
        out.set(scope.scope, p);
        p += scope.scope.length;
        out.set(this.buf.subarray(scope.start, scope.end), p);
        p += scope.end - scope.start;
        if (scope.schemaUrl) p = putStringField(out, p, 0x1a, scope.schemaUrl); // ScopeSpans.schema_url
      }
      s++;
      if (entry.schemaUrl) p = putStringField(out, p, 0x1a, entry.schemaUrl); // ResourceSpans.schema_url
    }
    return out;
  }

  /** trace/v1 Span, with its ScopeSpans.spans tag and length, at pos. */
  private writeSpan(span: ReadableSpan): void {
    if (span.events.length !== 0 || span.links.length !== 0) throw UNSUPPORTED;
    const context = span.spanContext();
    const traceId = context.traceId;
    const spanId = context.spanId;
    const parentId = span.parentSpanContext?.spanId;
    if (traceId.length !== 32 || spanId.length !== 16 || (parentId && parentId.length !== 16)) throw UNSUPPORTED;
    const traceState = context.traceState === undefined ? "" : this.traceStateText(context.traceState);
    const name = span.name;

    // Everything but the attributes and strings is at most 128 bytes; ensure() is called again for those.
    this.ensure(160);
    const buf = this.buf;
    let p = this.pos;
    buf[p] = 0x12; // ScopeSpans.spans
    // Two bytes for the span's length (its usual size: 128 B to 16 KiB); moved after when it is not.
    const lengthAt = p + 1;
    p += 3;
    const bodyStart = p;
    buf[p++] = 0x0a; // trace_id
    buf[p++] = 16;
    p = putHex(buf, p, traceId);
    buf[p++] = 0x12; // span_id
    buf[p++] = 8;
    p = putHex(buf, p, spanId);
    this.pos = p;
    if (traceState) this.writeString(0x1a, traceState); // trace_state
    if (parentId) {
      this.ensure(10);
      p = this.pos;
      this.buf[p++] = 0x22; // parent_span_id
      this.buf[p++] = 8;
      this.pos = putHex(this.buf, p, parentId);
    }
    this.writeString(0x2a, name); // name
    this.ensure(64);
    p = this.pos;
    this.buf[p++] = 0x30; // kind: the API's SpanKind + 1 (0 is SPAN_KIND_UNSPECIFIED)
    this.buf[p++] = span.kind + 1;
    this.buf[p++] = 0x39; // start_time_unix_nano
    p = putHrTime(this.buf, p, span.startTime);
    this.buf[p++] = 0x41; // end_time_unix_nano
    p = putHrTime(this.buf, p, span.endTime);
    this.pos = p;
    this.writeAttributes(span.attributes);
    this.ensure(64);
    const status = span.status;
    // dropped_attributes_count, dropped_events_count, dropped_links_count: written when 0 too, as the official does.
    p = this.pos;
    this.buf[p++] = 0x50;
    p = putVarint(this.buf, p, span.droppedAttributesCount);
    this.buf[p++] = 0x60;
    p = putVarint(this.buf, p, span.droppedEventsCount);
    this.buf[p++] = 0x70;
    p = putVarint(this.buf, p, span.droppedLinksCount);
    this.pos = p;
    const message = status.message;
    if (message) {
      // status: message, then code.
      const bytes = utf8(message);
      const size = 1 + varintSize(bytes.length) + bytes.length + 1 + varintSize(status.code);
      this.ensure(size + 16);
      p = this.pos;
      this.buf[p++] = 0x7a;
      p = putVarint(this.buf, p, size);
      this.buf[p++] = 0x12;
      p = putVarint(this.buf, p, bytes.length);
      this.buf.set(bytes, p);
      p += bytes.length;
      this.buf[p++] = 0x18;
      p = putVarint(this.buf, p, status.code);
    } else {
      this.ensure(24);
      p = this.pos;
      this.buf[p++] = 0x7a; // status: code only
      this.buf[p++] = 1 + varintSize(status.code);
      this.buf[p++] = 0x18;
      p = putVarint(this.buf, p, status.code);
    }
    // flags (field 16, fixed32)
    const flags = (context.traceFlags & 0xff) | FLAGS_HAS_IS_REMOTE | (span.parentSpanContext?.isRemote ? FLAGS_IS_REMOTE : 0);
    this.buf[p++] = 0x85;
    this.buf[p++] = 0x01;
    this.buf[p++] = flags & 0xff;
    this.buf[p++] = (flags >>> 8) & 0xff;
    this.buf[p++] = (flags >>> 16) & 0xff;
    this.buf[p++] = flags >>> 24;
    this.pos = p;
    this.finishLength(lengthAt, 2, bodyStart);
  }

  /**
   * Span.attributes: one KeyValue per own key, in the object's order; scalars only. A key whose value is the one it
   * had in the last span is copied from that span's bytes (the operation, provider, model, status of most requests).
   */
  private writeAttributes(attributes: Attributes): void {
    for (const key in attributes) {
      if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
      const value = attributes[key];
      const entry = this.keyEntry(key);
      if (entry.value === value && typeof value !== "object") {
        const bytes = entry.bytes;
        if (bytes) {
          this.ensure(bytes.length);
          this.pos = putBytes(this.buf, this.pos, bytes);
        } else {
          const start = this.pos;
          this.writeAttribute(0x4a, entry.prefix, value);
          entry.bytes = this.buf.slice(start, this.pos);
        }
      } else {
        this.writeAttribute(0x4a, entry.prefix, value); // Span.attributes
        entry.value = value;
        entry.bytes = undefined;
      }
    }
  }

  /** A KeyValue field (tag, length, key, value), its value a scalar. */
  private writeAttribute(tag: number, prefix: Uint8Array, value: AttributeValue | undefined): void {
    const type = typeof value;
    if (type === "string") {
      const text = value as string;
      const n = text.length;
      // Written as ASCII (one byte per UTF-16 unit); rewritten from UTF-8 bytes if a unit is not.
      const anySize = 1 + varintSize(n) + n;
      const kvSize = prefix.length + varintSize(anySize) + anySize;
      this.ensure(1 + 5 + kvSize);
      const buf = this.buf;
      const start = this.pos;
      let p = start;
      buf[p++] = tag;
      p = putVarint(buf, p, kvSize);
      p = putBytes(buf, p, prefix);
      p = putVarint(buf, p, anySize);
      buf[p++] = 0x0a; // AnyValue.string_value
      p = putVarint(buf, p, n);
      for (let i = 0; i < n; i++) {
        const c = text.charCodeAt(i);
        if (c > 0x7f) {
          this.pos = start;
          this.writeUtf8Attribute(tag, prefix, text);
          return;
        }
        buf[p++] = c;
      }
      this.pos = p;
      return;
    }
    this.ensure(1 + 5 + prefix.length + 1 + 11);
    const buf = this.buf;
    let p = this.pos;
    buf[p++] = tag;
    if (type === "number") {
      const number = value as number;
      if (Number.isInteger(number) && number >= MIN_INT64 && number < MAX_INT64) {
        const intSize = number >= 0 && number <= 0xffffffff ? varintSize(number) : int64VarintSize(number);
        const anySize = 1 + intSize;
        p = putVarint(buf, p, prefix.length + 1 + anySize);
        p = putBytes(buf, p, prefix);
        buf[p++] = anySize;
        buf[p++] = 0x18; // AnyValue.int_value
        p = putInt64Varint(buf, p, number);
      } else {
        p = putVarint(buf, p, prefix.length + 1 + 9);
        p = putBytes(buf, p, prefix);
        buf[p++] = 9;
        buf[p++] = 0x21; // AnyValue.double_value
        this.view.setFloat64(p, number, true);
        p += 8;
      }
    } else if (type === "boolean") {
      p = putVarint(buf, p, prefix.length + 1 + 2);
      p = putBytes(buf, p, prefix);
      buf[p++] = 2;
      buf[p++] = 0x10; // AnyValue.bool_value
      buf[p++] = value ? 1 : 0;
    } else {
      throw UNSUPPORTED;
    }
    this.pos = p;
  }

  private writeUtf8Attribute(tag: number, prefix: Uint8Array, text: string): void {
    const bytes = utf8(text);
    const anySize = 1 + varintSize(bytes.length) + bytes.length;
    const kvSize = prefix.length + varintSize(anySize) + anySize;
    this.ensure(1 + 5 + kvSize);
    let p = this.pos;
    this.buf[p++] = tag;
    p = putVarint(this.buf, p, kvSize);
    p = putBytes(this.buf, p, prefix);
    p = putVarint(this.buf, p, anySize);
    this.buf[p++] = 0x0a;
    p = putVarint(this.buf, p, bytes.length);
    this.buf.set(bytes, p);
    this.pos = p + bytes.length;
  }

  /** A string field (tag, length, UTF-8) at pos. */
  private writeString(tag: number, text: string): void {
    const n = text.length;
    this.ensure(1 + 5 + n);
    const buf = this.buf;
    const start = this.pos;
    let p = start;
    buf[p++] = tag;
    p = putVarint(buf, p, n);
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c > 0x7f) {
        const bytes = utf8(text);
        this.ensure(1 + 5 + bytes.length);
        p = start;
        this.buf[p++] = tag;
        p = putVarint(this.buf, p, bytes.length);
        this.buf.set(bytes, p);
        this.pos = p + bytes.length;
        return;
      }
      buf[p++] = c;
    }
    this.pos = p;
  }

  /** The varint length of the message from bodyStart to pos, at `at` where `reserved` bytes were left for it. */
  private finishLength(at: number, reserved: number, bodyStart: number): void {
    const length = this.pos - bodyStart;
    const size = varintSize(length);
    if (size !== reserved) {
      this.ensure(size - reserved);
      this.buf.copyWithin(at + size, bodyStart, this.pos);
      this.pos += size - reserved;
    }
    putVarint(this.buf, at, length);
  }

  private ensure(size: number): void {
    if (this.pos + size <= this.buf.length) return;
    let length = this.buf.length * 2;
    while (length < this.pos + size) length *= 2;
    const grown = new Uint8Array(length);
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
    this.view = new DataView(grown.buffer);
  }

  private keyEntry(key: string): KeyEntry {
    let entry = this.keys.get(key);
    if (entry) return entry;
    const encoded = utf8(key);
    const prefix = new Uint8Array(1 + varintSize(encoded.length) + encoded.length + 1);
    prefix[0] = 0x0a; // KeyValue.key
    let p = putVarint(prefix, 1, encoded.length);
    prefix.set(encoded, p);
    p += encoded.length;
    prefix[p] = 0x12; // KeyValue.value
    entry = { prefix, value: undefined, bytes: undefined };
    if (this.keys.size < MAX_CACHED_KEYS) this.keys.set(key, entry);
    return entry;
  }

  private traceStateText(traceState: TraceState): string {
    if (traceState !== this.lastTraceState) {
      this.lastTraceState = traceState;
      this.lastTraceStateText = traceState.serialize();
    }
    return this.lastTraceStateText;
  }

  /** ResourceSpans.resource: attributes, then dropped_attributes_count 0 (as the official writes it). */
  private resourceBytes(resource: Resource): Uint8Array {
    const cached = this.resources.get(resource);
    if (cached) return cached;
    if (resource.asyncAttributesPending) throw UNSUPPORTED;
    const bytes = this.message(0x0a, () => {
      const attributes = resource.attributes;
      for (const key in attributes) {
        if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
        this.writeAttribute(0x0a, this.keyEntry(key).prefix, attributes[key]); // Resource.attributes
      }
      this.ensure(2);
      this.buf[this.pos++] = 0x10;
      this.buf[this.pos++] = 0;
    });
    this.resources.set(resource, bytes);
    return bytes;
  }

  /** ScopeSpans.scope: name, version (when set), attributes, dropped_attributes_count (when not 0). */
  private scopeBytes(scope: object): Uint8Array {
    const cached = this.scopes.get(scope);
    if (cached) return cached;
    const { name, version, attributes, droppedAttributesCount } = scope as { name: string; version?: string; attributes?: Attributes; droppedAttributesCount?: number };
    const bytes = this.message(0x0a, () => {
      this.writeString(0x0a, name);
      if (version) this.writeString(0x12, version);
      if (attributes) {
        for (const key in attributes) {
          if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
          this.writeAttribute(0x1a, this.keyEntry(key).prefix, attributes[key]); // InstrumentationScope.attributes
        }
      }
      if (droppedAttributesCount) {
        this.ensure(6);
        this.buf[this.pos++] = 0x20;
        this.pos = putVarint(this.buf, this.pos, droppedAttributesCount);
      }
    });
    this.scopes.set(scope, bytes);
    return bytes;
  }

  /** A message written by `body` past the scratch buffer's end, with its tag and length, copied out. */
  private message(tag: number, body: () => void): Uint8Array {
    const start = this.pos;
    body();
    const content = this.buf.subarray(start, this.pos);
    const out = new Uint8Array(1 + varintSize(content.length) + content.length);
    out[0] = tag;
    out.set(content, putVarint(out, 1, content.length));
    this.pos = start;
    return out;
  }
}

/** A serializer with the official ProtobufTraceSerializer's interface, encoding with ours when it can. */
export function createProtobufTraceSerializer(fallback: TraceSerializer = ProtobufTraceSerializer): TraceSerializer {
  const encoder = new OtlpProtobufEncoder();
  return {
    serializeRequest: (spans) => encoder.encode(spans) ?? fallback.serializeRequest(spans),
    deserializeResponse: (bytes) => fallback.deserializeResponse(bytes),
  };
}

function utf8(text: string): Uint8Array {
  return textEncoder.encode(text);
}

function stringFieldSize(text: string | undefined): number {
  if (!text) return 0;
  const n = utf8(text).length;
  return 1 + varintSize(n) + n;
}

function putStringField(out: Uint8Array, p: number, tag: number, text: string): number {
  const bytes = utf8(text);
  out[p++] = tag;
  p = putVarint(out, p, bytes.length);
  out.set(bytes, p);
  return p + bytes.length;
}

/** An unsigned varint below 2^32. */
function putVarint(buf: Uint8Array, p: number, value: number): number {
  let v = value >>> 0;
  while (v > 0x7f) {
    buf[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[p++] = v;
  return p;
}

/** The int64 two's complement halves of an integer in [-(2^63), 2^63). */
function int64Halves(value: number): [number, number] {
  if (value >= 0) return [value >>> 0, (value / 0x100000000) >>> 0];
  const abs = -value;
  let low = ~(abs >>> 0) >>> 0;
  let high = ~((abs / 0x100000000) >>> 0) >>> 0;
  low = (low + 1) >>> 0;
  if (low === 0) high = (high + 1) >>> 0;
  return [low, high];
}

function int64VarintSize(value: number): number {
  let [low, high] = int64Halves(value);
  let size = 1;
  while (high > 0 || low > 0x7f) {
    low = ((low >>> 7) | (high << 25)) >>> 0;
    high >>>= 7;
    size++;
  }
  return size;
}

function putInt64Varint(buf: Uint8Array, p: number, value: number): number {
  if (value >= 0 && value <= 0xffffffff) return putVarint(buf, p, value);
  let [low, high] = int64Halves(value);
  while (high > 0 || low > 0x7f) {
    buf[p++] = (low & 0x7f) | 0x80;
    low = ((low >>> 7) | (high << 25)) >>> 0;
    high >>>= 7;
  }
  buf[p++] = low & 0x7f;
  return p;
}

/** Short byte strings copied by hand (a call to set() costs more for a key's twenty bytes). */
function putBytes(buf: Uint8Array, p: number, bytes: Uint8Array): number {
  const n = bytes.length;
  for (let i = 0; i < n; i++) buf[p + i] = bytes[i]!;
  return p + n;
}

/** The bytes of a lower- or upper-case hex id, without a string or array per id. */
function putHex(buf: Uint8Array, p: number, hex: string): number {
  const n = hex.length;
  for (let i = 0; i < n; i += 2) {
    const hi = HEX[hex.charCodeAt(i)]!;
    const lo = HEX[hex.charCodeAt(i + 1)]!;
    if ((hi | lo) === 255) throw UNSUPPORTED;
    buf[p++] = (hi << 4) | lo;
  }
  return p;
}

/** HrTime [seconds, nanoseconds] as fixed64 nanoseconds, split as the official serializer does (exact past 2^53). */
function putHrTime(buf: Uint8Array, p: number, time: HrTime): number {
  const seconds = time[0];
  const nanos = time[1];
  const lowerNanos = (seconds & 0xffff) * 1_000_000_000;
  const upperNanos = ((seconds / 0x10000) >>> 0) * 1_000_000_000;
  const sum = (lowerNanos >>> 0) + (((upperNanos & 0xffff) * 0x10000) >>> 0) + nanos;
  const low = sum >>> 0;
  const high = (Math.floor(lowerNanos / 0x100000000) + ((upperNanos / 0x10000) >>> 0) + Math.floor(sum / 0x100000000)) >>> 0;
  buf[p++] = low & 0xff;
  buf[p++] = (low >>> 8) & 0xff;
  buf[p++] = (low >>> 16) & 0xff;
  buf[p++] = low >>> 24;
  buf[p++] = high & 0xff;
  buf[p++] = (high >>> 8) & 0xff;
  buf[p++] = (high >>> 16) & 0xff;
  buf[p++] = high >>> 24;
  return p;
}
