/** A tiny protobuf walk for the tests: the top-level fields of a message (number, wire type, raw value), in order. */
export function protobufFields(bytes: Uint8Array): { field: number; wire: number; value: number | Uint8Array }[] {
  const out: { field: number; wire: number; value: number | Uint8Array }[] = [];
  let p = 0;
  const varint = () => {
    let value = 0;
    let scale = 1;
    let b: number;
    do {
      b = bytes[p++]!;
      value += (b & 0x7f) * scale;
      scale *= 128;
    } while (b & 0x80);
    return value;
  };
  while (p < bytes.length) {
    const tag = varint();
    const wire = tag & 7;
    if (wire === 0) out.push({ field: tag >>> 3, wire, value: varint() });
    else if (wire === 2) {
      const length = varint();
      out.push({ field: tag >>> 3, wire, value: bytes.subarray(p, p + length) });
      p += length;
    } else if (wire === 1 || wire === 5) {
      const size = wire === 1 ? 8 : 4;
      out.push({ field: tag >>> 3, wire, value: bytes.subarray(p, p + size) });
      p += size;
    } else throw new Error(`wire type ${wire}`);
  }
  return out;
}

/** The same fields by number: number → raw values. */
export function protobufFieldMap(bytes: Uint8Array): Map<number, (number | Uint8Array)[]> {
  const out = new Map<number, (number | Uint8Array)[]>();
  for (const { field, value } of protobufFields(bytes)) out.set(field, [...(out.get(field) ?? []), value]);
  return out;
}
